use super::*;

const FLOOR: Duration = Duration::from_secs(5);

/// A node of a job that settled at its hello `t0`, holding the lease a
/// settled node's hello gets (the floor's, less the margin).
fn settled(t0: Instant) -> Liveness {
    let l = Liveness::new(FLOOR, t0);
    l.lock().settled_at = Some(0);
    l.lock().leased_until = t0 + FLOOR - margin(FLOOR);
    l
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn the_threshold_follows_the_gaps_between_the_floor_and_the_ceiling() {
    assert_eq!(threshold([], FLOOR), FLOOR);
    assert_eq!(threshold([ms(200), ms(210)], FLOOR), FLOOR);
    assert_eq!(threshold([ms(200), ms(2000)], FLOOR), ms(8000));
    assert_eq!(threshold([ms(60_000)], FLOOR), FLOOR * CEILING);
}

#[test]
fn silence_counts_from_the_hello_and_the_last_message() {
    let t0 = Instant::now();
    let l = settled(t0);
    assert_eq!(l.silence(t0 + ms(4900)), None);
    let s = l.silence(t0 + ms(5100)).unwrap();
    assert_eq!((s.silent, s.threshold), (ms(5100), FLOOR));
    let l = settled(t0);
    l.heard(t0 + ms(200), true);
    assert_eq!(l.silence(t0 + ms(5100)), None);
    assert!(l.silence(t0 + ms(5300)).is_some());
    // A gap as long as the floor makes it four times as patient (capped).
    l.heard(t0 + ms(5200), true);
    assert_eq!(l.silence(t0 + ms(5200) + ms(14_900)), None);
    assert!(l.silence(t0 + ms(5200) + ms(15_100)).is_some());
}

#[test]
fn a_node_slowed_down_gets_more_patience_up_to_the_ceiling() {
    let t0 = Instant::now();
    let l = settled(t0);
    // Heartbeats every 200 ms, then a gap of 3 s (a loaded machine).
    let mut t = t0;
    for _ in 0..10 {
        t += ms(200);
        l.heard(t, true);
    }
    t += ms(3000);
    let lease = l.heard(t, true).unwrap();
    assert_eq!(lease, ms(12_000) - margin(FLOOR));
    assert_eq!(margin(FLOOR), ms(1250));
    // 6 s of silence would have killed it with a fixed 5 s timeout.
    assert_eq!(l.silence(t + ms(6000)), None);
    let s = l.silence(t + ms(12_100)).unwrap();
    assert_eq!(s.threshold, ms(12_000));
    // A gap past the ceiling is capped.
    let l = settled(t0);
    l.heard(t0 + ms(60_000), true);
    assert!(l
        .silence(t0 + ms(60_000) + FLOOR * CEILING + ms(1))
        .is_some());
}

#[test]
fn the_node_dies_only_a_margin_after_its_last_lease_ends() {
    let t0 = Instant::now();
    let l = settled(t0);
    let mut granted = Vec::new();
    let mut t = t0;
    for gap in [200, 200, 1500, 200, 200] {
        t += ms(gap);
        granted.push((t, l.heard(t, true).unwrap()));
    }
    let lease_end = granted
        .iter()
        .map(|(at, lease)| *at + *lease)
        .max()
        .unwrap();
    // Whatever the threshold says later, the death waits for the leases.
    let mut now = t;
    while l.silence(now).is_none() {
        now += ms(10);
    }
    assert!(now >= lease_end + margin(FLOOR), "{now:?} {lease_end:?}");
    for (_, lease) in &granted {
        assert!(*lease <= threshold([ms(1500)], FLOOR) - margin(FLOOR));
    }
}

#[test]
fn a_node_given_up_gets_no_lease_and_messages_that_are_not_heartbeats_renew_none() {
    let t0 = Instant::now();
    let l = settled(t0);
    assert_eq!(l.heard(t0 + ms(100), false), None);
    assert!(l.heard(t0 + ms(200), true).is_some());
    l.stop_renewing();
    assert_eq!(l.heard(t0 + ms(300), true), None);
    // It still counts as heard (a late message is not a new lease).
    assert_eq!(l.silence(t0 + ms(5200)), None);
}

#[test]
fn until_the_job_settles_every_node_gets_the_ceiling() {
    assert_eq!(first_lease(FLOOR) + margin(FLOOR), FLOOR * CEILING);
    let t0 = Instant::now();
    let l = Liveness::new(FLOOR, t0);
    // Quick heartbeats at the start grant the ceiling's lease all the same.
    let lease = l.heard(t0 + ms(200), true).unwrap();
    assert_eq!(lease, FLOOR * CEILING - margin(FLOOR));
    assert_eq!(l.silence(t0 + FLOOR * 2), None);
    assert!(l.silence(t0 + ms(200) + FLOOR * CEILING + ms(1)).is_some());
    // Released, it keeps the ceiling for SETTLING more messages; then the
    // threshold follows the gaps.
    l.settle();
    let mut t = t0 + ms(200);
    for _ in 0..SETTLING {
        t += ms(200);
        let lease = l.heard(t, true).unwrap();
        assert_eq!(lease, FLOOR * CEILING - margin(FLOOR));
    }
    let lease = l.heard(t + ms(200), true).unwrap();
    assert_eq!(lease, FLOOR - margin(FLOOR));
    // Each release (a recovery's too) brings the ceiling back a while.
    l.settle();
    let lease = l.heard(t + ms(400), true).unwrap();
    assert_eq!(lease, FLOOR * CEILING - margin(FLOOR));
}

#[test]
fn one_long_stall_keeps_the_node_patient_for_the_next_history() {
    let t0 = Instant::now();
    let l = settled(t0);
    let mut t = t0 + ms(2500);
    let after_stall = l.heard(t, true).unwrap();
    assert_eq!(after_stall, ms(10_000) - margin(FLOOR));
    for n in 1..HISTORY {
        t += ms(200);
        assert_eq!(l.heard(t, true), Some(after_stall), "message {n}");
    }
    t += ms(200);
    assert_eq!(l.heard(t, true), Some(FLOOR - margin(FLOOR)));
}

#[test]
fn the_longest_gap_is_the_longest_of_the_last_history() {
    let mut longest = Longest::default();
    let mut all = Vec::new();
    let mut x: u64 = 7;
    for _ in 0..3 * HISTORY {
        // A rough pseudo-random walk of gaps, with runs up and down.
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let gap = ms((x >> 33) % 5000);
        longest.push(gap);
        all.push(gap);
        let from = all.len().saturating_sub(HISTORY as usize);
        assert_eq!(longest.longest(), all[from..].iter().max().copied());
        assert!(longest.candidates.len() <= HISTORY as usize);
    }
}

#[test]
fn a_crowded_machine_raises_the_heartbeat_timeout() {
    // A few nodes on two cores keep the timeout given.
    assert_eq!(crowded_floor(FLOOR, 20, 2), FLOOR);
    assert_eq!(crowded_floor(FLOOR, 500, 2), FLOOR);
    // 128 nodes of 8 ranks, a standby, a daemon and a manager each, and
    // a spare node: 1419 processes, 710 a core.
    assert_eq!(crowded_floor(FLOOR, 1419, 2), ms(14_200));
    // Given longer, it stays; no cores reported counts as one.
    assert_eq!(crowded_floor(ms(60_000), 1419, 2), ms(60_000));
    assert_eq!(crowded_floor(FLOOR, 300, 0), ms(6000));
}
