//! Recovery planning: which checkpoint every rank restores.
//!
//! The planner is a pure function. Each rank describes what it can restore
//! (its [`Inventory`]); that description is encoded as a fixed-size
//! [`Ballot`] whose element-wise minimum over all ranks (one all-reduce)
//! carries enough to decide. [`Ballot::decide`] then gives every rank the same
//! [`Decision`] without a second round.
//!
//! The ballot holds the newest valid id (minimised), the complement of the
//! newest valid id (minimised, i.e. the maximum newest id), whether the rank
//! holds no damaged committed checkpoint (minimised), and one presence
//! flag per id modulo [`WINDOW`] for the ids within `WINDOW` of the rank's
//! newest. For any id between `max_newest - WINDOW + 1` and `min_newest`,
//! every rank's flag refers to that very id, so the minimum of the flags says
//! whether *all* ranks can restore it. The newest such id is the decision.

/// Largest `retention.keep_last` accepted; keeps every retained id inside the
/// ballot's window (checkpoint ids are consecutive: a failed checkpoint's id
/// is reused by the next attempt).
pub const MAX_KEEP_LAST: u32 = 32;

/// Number of consecutive checkpoint ids a ballot can tell apart.
pub const WINDOW: u64 = 64;

/// Ballot elements before the presence flags.
const FLAGS: usize = 3;

/// What one rank can restore.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Inventory {
    /// Committed checkpoint ids this rank holds valid data for (any order).
    pub valid: Vec<u64>,
    /// Committed checkpoints present but unusable (damaged, or written by a
    /// different job layout), each with the reason.
    pub invalid: Vec<(u64, String)>,
    /// Leftovers of checkpoints that never committed; safe to delete.
    pub uncommitted: Vec<u64>,
}

impl Inventory {
    /// The newest valid id not in `excluded`.
    pub fn newest(&self, excluded: &[u64]) -> Option<u64> {
        self.usable(excluded).max()
    }

    fn usable<'a>(&'a self, excluded: &'a [u64]) -> impl Iterator<Item = u64> + 'a {
        self.valid
            .iter()
            .copied()
            .filter(move |id| *id > 0 && !excluded.contains(id))
    }

    /// One line describing why this rank cannot restore checkpoint `id`
    /// (or what it has, when it has nothing).
    pub fn explain(&self, id: Option<u64>) -> String {
        if let Some(id) = id {
            if let Some((_, why)) = self.invalid.iter().find(|(i, _)| *i == id) {
                return format!("checkpoint {id} is unusable: {why}");
            }
            if !self.valid.contains(&id) {
                return format!("checkpoint {id} is missing");
            }
        }
        match (self.valid.is_empty(), self.invalid.first()) {
            (true, None) => "no checkpoint found".to_string(),
            (true, Some((i, why))) => format!("no valid checkpoint (checkpoint {i}: {why})"),
            (false, _) => format!("holds checkpoints {:?}", self.valid),
        }
    }
}

/// The agreed outcome of recovery planning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// No rank holds any committed checkpoint, valid or damaged: start from
    /// the beginning.
    Fresh,
    /// Every rank restores this checkpoint id.
    Restore(u64),
    /// Some ranks hold checkpoints (valid or damaged) but no id is
    /// restorable by all. Nothing is deleted in this case.
    Unrecoverable,
}

/// One rank's vote, reduced element-wise with `Min` over all ranks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ballot {
    values: Vec<u64>,
}

impl Ballot {
    /// Encodes `inventory`, ignoring ids in `excluded` (ids that failed to
    /// load on some rank in an earlier attempt).
    pub fn new(inventory: &Inventory, excluded: &[u64]) -> Self {
        let mut values = vec![0u64; FLAGS + WINDOW as usize];
        let newest = inventory.newest(excluded).unwrap_or(0);
        values[0] = newest;
        values[1] = u64::MAX - newest;
        values[2] = u64::from(inventory.invalid.is_empty());
        for id in inventory.usable(excluded) {
            if id + WINDOW > newest {
                values[FLAGS + (id % WINDOW) as usize] = 1;
            }
        }
        Self { values }
    }

    /// The values to reduce with [`ReduceOp::Min`](crate::comm::ReduceOp::Min).
    pub fn values_mut(&mut self) -> &mut [u64] {
        &mut self.values
    }

    /// The newest id held by any rank (0 if none), from a reduced ballot.
    pub fn newest_anywhere(&self) -> u64 {
        u64::MAX - self.values[1]
    }

    /// The decision encoded by a reduced ballot. Every rank holding the same
    /// reduced ballot gets the same answer.
    pub fn decide(&self) -> Decision {
        let min_newest = self.values[0];
        let max_newest = self.newest_anywhere();
        if max_newest == 0 {
            let clean = self.values[2] == 1;
            return if clean {
                Decision::Fresh
            } else {
                Decision::Unrecoverable
            };
        }
        if min_newest == 0 {
            return Decision::Unrecoverable;
        }
        let lowest = (max_newest + 1).saturating_sub(WINDOW).max(1);
        (lowest..=min_newest)
            .rev()
            .find(|id| self.values[FLAGS + (id % WINDOW) as usize] == 1)
            .map_or(Decision::Unrecoverable, Decision::Restore)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reduces ballots the way the all-reduce does.
    fn agree(inventories: &[Inventory], excluded: &[u64]) -> Decision {
        let mut acc = Ballot::new(&inventories[0], excluded);
        for inv in &inventories[1..] {
            let b = Ballot::new(inv, excluded);
            for (a, v) in acc.values.iter_mut().zip(b.values) {
                *a = (*a).min(v);
            }
        }
        acc.decide()
    }

    fn inv(ids: &[u64]) -> Inventory {
        Inventory {
            valid: ids.to_vec(),
            ..Inventory::default()
        }
    }

    #[test]
    fn nobody_has_anything_means_fresh() {
        assert_eq!(agree(&[inv(&[]), inv(&[])], &[]), Decision::Fresh);
    }

    #[test]
    fn damaged_checkpoints_block_a_fresh_start() {
        let damaged = Inventory {
            invalid: vec![(1, "written by a job of 2 ranks".into())],
            ..Inventory::default()
        };
        assert_eq!(agree(&[damaged, inv(&[])], &[]), Decision::Unrecoverable);
        let leftovers = Inventory {
            uncommitted: vec![1],
            ..Inventory::default()
        };
        assert_eq!(agree(&[leftovers, inv(&[])], &[]), Decision::Fresh);
    }

    #[test]
    fn newest_common_checkpoint_wins() {
        let d = agree(&[inv(&[3, 4]), inv(&[3, 4]), inv(&[4, 3])], &[]);
        assert_eq!(d, Decision::Restore(4));
    }

    #[test]
    fn a_rank_missing_the_newest_pulls_everyone_back() {
        // Rank 1 crashed before committing 5.
        let d = agree(&[inv(&[4, 5]), inv(&[4]), inv(&[4, 5])], &[]);
        assert_eq!(d, Decision::Restore(4));
    }

    #[test]
    fn a_hole_is_skipped() {
        // Rank 1's checkpoint 6 is corrupt, but it still has 7 and 5.
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
        assert_eq!(d, Decision::Fresh);
    }

    #[test]
    fn one_rank_with_nothing_is_unrecoverable() {
        let d = agree(&[inv(&[4, 5]), inv(&[]), inv(&[5])], &[]);
        assert_eq!(d, Decision::Unrecoverable);
    }

    #[test]
    fn disjoint_sets_are_unrecoverable() {
        assert_eq!(agree(&[inv(&[2]), inv(&[3])], &[]), Decision::Unrecoverable);
    }

    #[test]
    fn ids_far_apart_do_not_alias() {
        // 70 and 6 share a slot modulo 64 but are not the same checkpoint.
        assert_eq!(
            agree(&[inv(&[70]), inv(&[6])], &[]),
            Decision::Unrecoverable
        );
        assert_eq!(
            agree(&[inv(&[6, 69, 70]), inv(&[6, 69])], &[]),
            Decision::Restore(69)
        );
        // A common id further than WINDOW below the newest is out of sight;
        // checkpoint ids are consecutive, so retention never keeps one.
        assert_eq!(
            agree(&[inv(&[6, 70]), inv(&[6, 69])], &[]),
            Decision::Unrecoverable
        );
        assert_eq!(
            agree(&[inv(&[69, 70]), inv(&[69])], &[]),
            Decision::Restore(69)
        );
    }

    #[test]
    fn exhaustive_small_cases_match_the_set_intersection() {
        // Every pair of subsets of ids 1..=6 for two ranks, plus a third rank
        // holding everything: the decision is the newest id in the intersection.
        for a in 0u32..64 {
            for b in 0u32..64 {
                let set = |m: u32| {
                    (1..=6u64)
                        .filter(|i| m & (1 << (i - 1)) != 0)
                        .collect::<Vec<_>>()
                };
                let (sa, sb) = (set(a), set(b));
                let expect = if sa.is_empty() && sb.is_empty() {
                    Decision::Fresh
                } else {
                    sa.iter()
                        .filter(|i| sb.contains(i))
                        .max()
                        .map_or(Decision::Unrecoverable, |i| Decision::Restore(*i))
                };
                let all = inv(&[1, 2, 3, 4, 5, 6]);
                let got = agree(&[inv(&sa), inv(&sb)], &[]);
                assert_eq!(got, expect, "{sa:?} {sb:?}");
                if !sa.is_empty() && !sb.is_empty() {
                    assert_eq!(
                        agree(&[inv(&sa), inv(&sb), all], &[]),
                        expect,
                        "{sa:?} {sb:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn explanations_name_the_problem() {
        let i = Inventory {
            valid: vec![3],
            invalid: vec![(4, "truncated".into())],
            uncommitted: vec![],
        };
        assert_eq!(i.explain(Some(4)), "checkpoint 4 is unusable: truncated");
        assert_eq!(i.explain(Some(5)), "checkpoint 5 is missing");
        assert_eq!(inv(&[]).explain(None), "no checkpoint found");
    }
}
