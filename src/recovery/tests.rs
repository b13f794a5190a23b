use super::*;

/// Reduces ballots the way the all-reduce does.
fn reduce(inventories: &[Inventory], excluded: &[u64]) -> Ballot {
    let mut acc = Ballot::new(&inventories[0], excluded, 1000);
    for (i, inv) in inventories[1..].iter().enumerate() {
        let b = Ballot::new(inv, excluded, 2000 + i as u64);
        for (a, v) in acc.values.iter_mut().zip(b.values) {
            *a = (*a).min(v);
        }
    }
    acc
}

fn agree(inventories: &[Inventory], excluded: &[u64]) -> Decision {
    reduce(inventories, excluded).decide()
}

/// Sound copies of `ids`, all written by the same attempt per id.
fn inv(ids: &[u64]) -> Inventory {
    Inventory {
        valid: ids.iter().map(|&id| Held { id, stamp: id * 10 }).collect(),
        ..Inventory::default()
    }
}

const FRESH: Decision = Decision::Fresh { next_id: 1 };

#[test]
fn nobody_has_anything_means_fresh_from_one() {
    assert_eq!(agree(&[inv(&[]), inv(&[])], &[]), FRESH);
}

#[test]
fn damaged_checkpoints_block_a_fresh_start_but_leftovers_do_not() {
    let damaged = Inventory {
        damaged: vec![(1, "written by a job of 2 ranks".into())],
        ..Inventory::default()
    };
    assert_eq!(agree(&[damaged, inv(&[])], &[]), Decision::Unrecoverable);
    let leftovers = Inventory {
        incomplete: vec![(7, "data file without its record".into())],
        ..Inventory::default()
    };
    // A fresh start numbers past the leftovers instead of deleting them.
    assert_eq!(
        agree(&[leftovers, inv(&[])], &[]),
        Decision::Fresh { next_id: 8 }
    );
}

#[test]
fn a_checkpoint_only_some_ranks_completed_is_not_restored_and_not_refused() {
    // Rank 1 was killed while writing the first checkpoint.
    let d = agree(&[inv(&[1]), inv(&[])], &[]);
    assert_eq!(d, Decision::Fresh { next_id: 2 });
}

#[test]
fn newest_common_checkpoint_wins() {
    let d = agree(&[inv(&[3, 4]), inv(&[3, 4]), inv(&[4, 3])], &[]);
    assert_eq!(d, Decision::Restore(4));
}

#[test]
fn copies_from_different_attempts_are_never_mixed() {
    // Both ranks hold a sound checkpoint 6, but rank 1's is a leftover of an
    // earlier run that reused the id.
    let mut stale = inv(&[5, 6]);
    stale.valid[1].stamp = 99;
    let d = agree(&[inv(&[5, 6]), stale], &[]);
    assert_eq!(d, Decision::Restore(5));
}

#[test]
fn a_rank_missing_the_newest_pulls_everyone_back() {
    let d = agree(&[inv(&[4, 5]), inv(&[4]), inv(&[4, 5])], &[]);
    assert_eq!(d, Decision::Restore(4));
}

#[test]
fn a_hole_is_skipped() {
    let d = agree(&[inv(&[5, 6, 7]), inv(&[5, 7]), inv(&[5, 6, 7])], &[]);
    assert_eq!(d, Decision::Restore(7));
    let d = agree(&[inv(&[5, 6]), inv(&[5, 7]), inv(&[5, 6, 7])], &[]);
    assert_eq!(d, Decision::Restore(5));
}

#[test]
fn excluded_ids_are_not_chosen() {
    let d = agree(&[inv(&[4, 5]), inv(&[4, 5])], &[5]);
    assert_eq!(d, Decision::Restore(4));
    let d = agree(&[inv(&[4, 5]), inv(&[4, 5])], &[5, 4]);
    assert_eq!(d, Decision::Fresh { next_id: 6 });
}

#[test]
fn disjoint_sets_start_fresh_past_both() {
    assert_eq!(
        agree(&[inv(&[2]), inv(&[3])], &[]),
        Decision::Fresh { next_id: 4 }
    );
}

#[test]
fn ids_far_apart_do_not_alias() {
    // 70 and 6 share a slot modulo 64 but are not the same checkpoint.
    assert_eq!(
        agree(&[inv(&[70]), inv(&[6])], &[]),
        Decision::Fresh { next_id: 71 }
    );
    assert_eq!(
        agree(&[inv(&[6, 69, 70]), inv(&[6, 69])], &[]),
        Decision::Restore(69)
    );
    // A common id further than WINDOW below the newest is out of sight;
    // checkpoint ids are consecutive, so retention never keeps one.
    assert_eq!(
        agree(&[inv(&[6, 70]), inv(&[6, 69])], &[]),
        Decision::Fresh { next_id: 71 }
    );
}

#[test]
fn every_rank_shares_the_smallest_random_number() {
    let b = reduce(&[inv(&[1]), inv(&[1]), inv(&[1])], &[]);
    assert_eq!(b.session(), 1000);
}

#[test]
fn exhaustive_small_cases_match_the_set_intersection() {
    // Every pair of subsets of ids 1..=6 for two ranks, with or without a
    // stamp disagreement on one id, plus a third rank holding everything:
    // the decision is the newest id both hold with one stamp.
    let set = |m: u32| {
        (1..=6u64)
            .filter(|i| m & (1 << (i - 1)) != 0)
            .collect::<Vec<_>>()
    };
    for a in 0u32..64 {
        for b in 0u32..64 {
            for odd in [None, Some(3u64)] {
                let (sa, sb) = (set(a), set(b));
                let mut ib = inv(&sb);
                for h in &mut ib.valid {
                    if Some(h.id) == odd {
                        h.stamp += 1;
                    }
                }
                let common = sa
                    .iter()
                    .filter(|i| sb.contains(i) && Some(**i) != odd)
                    .max();
                let largest = sa.iter().chain(&sb).max().copied().unwrap_or(0);
                let expect = common.map_or(
                    Decision::Fresh {
                        next_id: largest + 1,
                    },
                    |i| Decision::Restore(*i),
                );
                let got = agree(&[inv(&sa), ib.clone()], &[]);
                assert_eq!(got, expect, "{sa:?} {sb:?} odd {odd:?}");
                let all = inv(&[1, 2, 3, 4, 5, 6]);
                let with_all = agree(&[inv(&sa), ib, all], &[]);
                let expect = match expect {
                    Decision::Fresh { .. } => Decision::Fresh { next_id: 7 },
                    d => d,
                };
                assert_eq!(with_all, expect, "{sa:?} {sb:?} odd {odd:?} + all");
            }
        }
    }
}

#[test]
fn explanations_name_the_problem() {
    let i = Inventory {
        valid: vec![Held { id: 3, stamp: 1 }],
        damaged: vec![(4, "truncated".into())],
        incomplete: vec![(5, "data file without its record".into())],
        committed: 0,
        committed_levels: Vec::new(),
    };
    assert_eq!(i.explain(Some(4)), "checkpoint 4 is unusable: truncated");
    assert_eq!(
        i.explain(Some(5)),
        "checkpoint 5 is incomplete here: data file without its record"
    );
    assert_eq!(i.explain(Some(6)), "holds no files of checkpoint 6");
    assert_eq!(inv(&[]).explain(None), "no checkpoint found");
}

fn with_evidence(mut i: Inventory, committed: u64) -> Inventory {
    i.committed = committed;
    i
}

#[test]
fn a_lost_rank_with_commit_evidence_elsewhere_is_refused_not_started_over() {
    // Rank 1's node and its files are gone; rank 0 still holds checkpoint 15
    // and its node's pointer says 15 committed on every rank.
    let d = agree(&[with_evidence(inv(&[14, 15]), 15), inv(&[])], &[]);
    assert_eq!(d, Decision::Unrecoverable);
    // The evidence may sit on the rank that lost everything (the runtime's
    // record) or on any other.
    let d = agree(&[inv(&[15]), with_evidence(inv(&[]), 15)], &[]);
    assert_eq!(d, Decision::Unrecoverable);
    // Without evidence, a checkpoint only some ranks completed is a
    // leftover of an interrupted first checkpoint: start over.
    assert_eq!(
        agree(&[inv(&[1]), inv(&[])], &[]),
        Decision::Fresh { next_id: 2 }
    );
}

#[test]
fn evidence_never_changes_what_is_restored() {
    let d = agree(&[with_evidence(inv(&[4, 5]), 9), inv(&[4, 5])], &[]);
    assert_eq!(d, Decision::Restore(5));
    let d = agree(&[with_evidence(inv(&[4, 5]), 5), inv(&[4])], &[]);
    assert_eq!(d, Decision::Restore(4));
}

#[test]
fn evidence_is_named_when_a_rank_holds_nothing() {
    let i = with_evidence(inv(&[]), 7);
    assert!(i
        .explain(None)
        .contains("checkpoint 7 is recorded as committed"));
}
