use super::*;

fn seqs(entries: Vec<Entry>) -> Vec<u64> {
    entries.iter().map(|e| e.seq).collect()
}

#[test]
fn each_destination_numbers_its_messages_and_replays_them_in_order() {
    let mut j = Journal::new(3, 1 << 20);
    assert_eq!(j.record(1, 7, b"a"), 1);
    assert_eq!(j.record(2, 7, b"b"), 1);
    assert_eq!(j.record(1, 8, b"c"), 2);
    assert_eq!(j.record(1, 7, b"d"), 3);
    let all = j.replay(1, 0).unwrap();
    assert_eq!(
        all.iter()
            .map(|e| (e.seq, e.tag, &e.data[..]))
            .collect::<Vec<_>>(),
        [(1, 7, &b"a"[..]), (2, 8, &b"c"[..]), (3, 7, &b"d"[..])]
    );
    assert_eq!(seqs(j.replay(1, 2).unwrap()), [3]);
    assert_eq!(seqs(j.replay(0, 0).unwrap()), Vec::<u64>::new());
    assert_eq!(j.sent(), [0, 3, 1]);
    assert_eq!(j.held(), 4 + 4 * ENTRY_COST);
    // Outside the job: numbered 0 and never kept.
    assert_eq!(j.record(9, 7, b"x"), 0);
}

#[test]
fn a_commit_drops_the_window_and_numbers_go_on() {
    let mut j = Journal::new(2, 1 << 20);
    for _ in 0..3 {
        j.record(1, 0, b"old");
    }
    j.open_window(5);
    assert_eq!(j.held(), 0);
    assert_eq!(j.record(1, 0, b"new"), 4);
    assert_eq!(seqs(j.replay(1, 3).unwrap()), [4]);
    // A replacement that consumed only 2 needs message 3, which is gone.
    assert_eq!(
        j.replay(1, 2).err(),
        Some(Unreplayable::BeforeWindow {
            dest: 1,
            after: 2,
            kept_after: 3,
            window: 5
        })
    );
}

#[test]
fn a_window_past_the_limit_cannot_be_replayed_until_the_next_commit() {
    let limit = 10 + 2 * ENTRY_COST;
    let mut j = Journal::new(2, limit);
    j.record(1, 0, &[0; 6]);
    j.record(1, 0, &[0; 6]);
    assert_eq!(j.held(), 0, "the overflowing window frees what it held");
    let err = j.replay(1, 0).err().unwrap();
    assert_eq!(err, Unreplayable::Overflowed { window: 0, limit });
    assert!(
        err.to_string().contains(&format!("limit of {limit} bytes")),
        "{err}"
    );
    j.open_window(1);
    j.record(1, 0, &[0; 6]);
    assert_eq!(seqs(j.replay(1, 2).unwrap()), [3]);
}

#[test]
fn empty_messages_fill_the_log_too() {
    let mut j = Journal::new(2, 100 * ENTRY_COST);
    for _ in 0..100 {
        j.record(1, 0, b"");
    }
    assert_eq!(j.replay(1, 0).unwrap().len(), 100);
    j.record(1, 0, b"");
    assert!(j.replay(1, 0).is_err());
}

#[test]
fn a_resumed_log_continues_the_numbers_it_was_restored_with() {
    let mut j = Journal::new(3, 1 << 20);
    j.record(2, 0, b"lost with the process");
    j.resume(4, &[0, 10, 20]);
    assert_eq!(j.record(1, 0, b"x"), 11);
    assert_eq!(j.record(2, 0, b"y"), 21);
    assert_eq!(seqs(j.replay(2, 20).unwrap()), [21]);
    assert!(j.replay(2, 19).is_err());
}

#[test]
fn the_window_starts_at_the_mark_so_the_commits_own_messages_stay() {
    let mut j = Journal::new(2, 1 << 20);
    j.record(1, 0, b"before");
    j.mark();
    j.record(1, 9, b"commit round");
    j.open_window(3);
    assert_eq!(j.held(), 12 + ENTRY_COST);
    j.record(1, 0, b"after");
    assert_eq!(seqs(j.replay(1, 1).unwrap()), [2, 3]);
    assert!(matches!(
        j.replay(1, 0),
        Err(Unreplayable::BeforeWindow { kept_after: 1, .. })
    ));
    // The next commit without a mark drops everything sent so far.
    j.open_window(4);
    assert_eq!(j.held(), 0);
    assert_eq!(seqs(j.replay(1, 3).unwrap()), Vec::<u64>::new());
}
