use super::Roll;

#[test]
fn all_holds_once_every_rank_reported_whatever_the_order_or_repeats() {
    let mut roll = Roll::new(4);
    assert!(!roll.all());
    for (rank, v) in [(2, 'a'), (2, 'b'), (0, 'c'), (3, 'd')] {
        roll.set(rank, v);
        assert!(!roll.all());
    }
    roll.set(9, 'x');
    assert!(!roll.all(), "a rank outside the job counts for nothing");
    roll.set(1, 'e');
    assert!(roll.all());
    assert_eq!(roll.every().map(String::from_iter).as_deref(), Some("cebd"));
    roll.clear(1);
    roll.clear(1);
    assert!(!roll.all());
    assert_eq!(roll.every(), None, "a gap is no table");
    roll.set(1, 'f');
    assert!(roll.all());
}

#[test]
fn an_empty_job_has_everyone() {
    assert!(Roll::<()>::new(0).all());
}
