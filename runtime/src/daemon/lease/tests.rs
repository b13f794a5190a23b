use super::*;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn a_lease_counts_from_when_the_heartbeat_was_sent_not_when_the_answer_came() {
    let t0 = Instant::now();
    let mut l = Lease::new(ms(2500), t0);
    assert_eq!(l.expired(t0 + ms(2499)), None);
    assert!(l.expired(t0 + ms(2500)).is_some());
    let b = l.beat(t0 + ms(200));
    // The answer arrives late: the lease still ends 2.5 s after the beat.
    l.renew(b, 2500, t0 + ms(2000));
    assert_eq!(l.left(t0 + ms(2000)), ms(700));
    assert!(l.expired(t0 + ms(2700)).is_some());
}

#[test]
fn an_old_or_unknown_answer_never_shortens_or_forges_a_lease() {
    let t0 = Instant::now();
    let mut l = Lease::new(ms(2500), t0);
    let b1 = l.beat(t0 + ms(200));
    let b2 = l.beat(t0 + ms(400));
    l.renew(b2, 2500, t0 + ms(450));
    l.renew(b1, 2500, t0 + ms(460));
    assert_eq!(l.left(t0), ms(2900));
    l.renew(999, 60_000, t0 + ms(500));
    assert_eq!(l.left(t0), ms(2900));
    // Silence is told from the last word of the root.
    assert_eq!(l.expired(t0 + ms(2900)), Some(ms(2400)));
}

#[test]
fn beats_far_back_are_forgotten() {
    let t0 = Instant::now();
    let mut l = Lease::new(ms(100), t0);
    let first = l.beat(t0);
    for i in 0..SENT as u64 {
        l.beat(t0 + ms(i));
    }
    l.renew(first, 60_000, t0);
    assert_eq!(l.left(t0), ms(100));
}
