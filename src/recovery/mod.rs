//! Recovery planning: which checkpoint every rank restores.
//!
//! The planner is a pure function. Each rank describes what it holds (its
//! [`Inventory`]); that description is encoded as a fixed-size [`Ballot`]
//! whose element-wise minimum over all ranks (one all-reduce) carries enough
//! to decide. [`Ballot::decide`] then gives every rank the same [`Decision`]
//! without a second round.
//!
//! A checkpoint is restorable when every rank holds a sound copy of it (file
//! and record consistent, in the right place) *with the same stamp*: the
//! stamp identifies the collective attempt that wrote it, so copies of one
//! id left by different runs are never mixed. Nothing else decides what is
//! restored: no pointer file, no commit marker. Kills at any step leave
//! either a checkpoint every rank holds, or leftovers some ranks lack, which
//! are simply not restorable.
//!
//! Commit evidence decides only between starting over and refusing: when
//! any rank knows that some checkpoint committed on every rank (its node's
//! `LATEST` pointer, a higher level's commit marker, or the runtime's own
//! record, see [`Inventory::committed`]) and no checkpoint is restorable,
//! the job lost data it had saved, and the decision is
//! [`Decision::Unrecoverable`], never a fresh start.
//!
//! The ballot holds:
//! - the newest restorable-here id (minimised) and its complement
//!   (minimised, i.e. the maximum newest id);
//! - whether the rank holds no damaged checkpoint (minimised);
//! - the complement of the largest id of any file the rank holds, damaged
//!   or incomplete included (minimised: the largest id anywhere), so that a
//!   fresh start numbers its checkpoints past every leftover;
//! - a random value (minimised: a number all ranks share, the session's);
//! - the complement of the newest id the rank knows committed everywhere
//!   (minimised: the newest such id anywhere);
//! - for levels 2, 3 and 4, whether the rank saw none of the level's commit
//!   markers (minimised: whether no rank saw one);
//! - per id modulo [`WINDOW`], for ids within `WINDOW` of the rank's newest:
//!   a presence flag, the stamp, and the stamp's complement.
//!
//! For any id between `max_newest - WINDOW + 1` and `min_newest`, every
//! rank's slot refers to that very id, so the minimum of the flags says
//! whether *all* ranks hold it, and the minimum stamp equals the maximum
//! stamp exactly when all copies come from the same attempt. The newest such
//! id is the decision.

pub(crate) use crate::level::{Held, Inventory};

pub(crate) mod aware;
pub(crate) mod cone;
pub(crate) mod copies;
pub(crate) mod erasure;

/// The (id, stamp) pairs any node's markers say a level committed. One
/// marker is enough: every node finished its part of a promotion before
/// any was told to commit it.
fn committed_anywhere<'a>(
    lists: impl IntoIterator<Item = &'a Vec<(u64, u64)>>,
) -> std::collections::BTreeSet<(u64, u64)> {
    lists.into_iter().flatten().copied().collect()
}

pub(crate) use crate::config::MAX_KEEP_LAST;

// Every retained id stays inside the ballot's window (checkpoint ids are
// consecutive: a failed checkpoint's id is reused by the next attempt).
const _: () = assert!(2 * MAX_KEEP_LAST as u64 <= WINDOW);

/// Number of consecutive checkpoint ids a ballot can tell apart.
pub(crate) const WINDOW: u64 = 64;

/// The levels above 1, in the ballot's order.
const HIGHER: [crate::level::Level; 3] = [
    crate::level::Level::L2,
    crate::level::Level::L3,
    crate::level::Level::L4,
];

/// Ballot elements before the per-id slots.
const HEAD: usize = 9;
const W: usize = WINDOW as usize;

/// The agreed outcome of recovery planning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// No checkpoint is held soundly by every rank, nothing is damaged and
    /// no rank knows of a committed checkpoint (none ever committed, or the
    /// job was removing its files at its end): start from the beginning. Leftovers are kept (retention removes them
    /// once newer checkpoints exist); new checkpoints start at `next_id`.
    Fresh {
        /// First id past every file any rank holds.
        next_id: u64,
    },
    /// Every rank restores this checkpoint id.
    Restore(u64),
    /// No checkpoint is restorable by all, and either some ranks hold
    /// damaged checkpoints or some rank has evidence that a checkpoint
    /// committed: data the job saved is lost. Nothing is deleted in this
    /// case.
    Unrecoverable,
}

/// One rank's vote, reduced element-wise with `Min` over all ranks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Ballot {
    values: Vec<u64>,
}

impl Ballot {
    /// Encodes `inventory`, ignoring ids in `excluded` (ids that failed to
    /// load on some rank in an earlier attempt). `random` should be a fresh
    /// random number: the reduced ballot's [`session`](Self::session) is the
    /// smallest one, the same on every rank.
    pub(crate) fn new(inventory: &Inventory, excluded: &[u64], random: u64) -> Self {
        let mut values = vec![0u64; HEAD + 3 * W];
        let newest = inventory.newest(excluded).unwrap_or(0);
        values[0] = newest;
        values[1] = u64::MAX - newest;
        values[2] = u64::from(inventory.damaged.is_empty());
        values[3] = u64::MAX - inventory.largest_id();
        values[4] = random;
        values[5] = u64::MAX - inventory.committed;
        for (i, level) in HIGHER.iter().enumerate() {
            values[6 + i] = u64::from(!inventory.committed_levels.contains(level));
        }
        // Absent ids do not constrain the stamps.
        values[HEAD + W..].fill(u64::MAX);
        for held in inventory.usable(excluded) {
            if held.id + WINDOW > newest {
                let slot = (held.id % WINDOW) as usize;
                values[HEAD + slot] = 1;
                values[HEAD + W + slot] = held.stamp;
                values[HEAD + 2 * W + slot] = u64::MAX - held.stamp;
            }
        }
        Self { values }
    }

    /// The values to reduce with [`ReduceOp::Min`](crate::comm::ReduceOp::Min).
    pub(crate) fn values_mut(&mut self) -> &mut [u64] {
        &mut self.values
    }

    /// The newest id held soundly by any rank (0 if none), from a reduced ballot.
    pub(crate) fn newest_anywhere(&self) -> u64 {
        u64::MAX - self.values[1]
    }

    /// The largest id of any file on any rank, from a reduced ballot.
    pub(crate) fn largest_anywhere(&self) -> u64 {
        u64::MAX - self.values[3]
    }

    /// A number every rank shares after the reduction, random per planning.
    pub(crate) fn session(&self) -> u64 {
        self.values[4]
    }

    /// The levels above 1 whose commit markers some rank saw, from a
    /// reduced ballot.
    pub(crate) fn levels_with_commits(&self) -> Vec<crate::level::Level> {
        HIGHER
            .iter()
            .enumerate()
            .filter(|(i, _)| self.values[6 + i] == 0)
            .map(|(_, l)| *l)
            .collect()
    }

    /// Whether no rank holds a damaged checkpoint, from a reduced ballot.
    pub(crate) fn nothing_damaged(&self) -> bool {
        self.values[2] == 1
    }

    /// The newest id any rank has evidence committed everywhere (0 if
    /// none), from a reduced ballot.
    pub(crate) fn committed_anywhere(&self) -> u64 {
        u64::MAX - self.values[5]
    }

    fn common(&self, id: u64) -> bool {
        let slot = (id % WINDOW) as usize;
        let present = self.values[HEAD + slot] == 1;
        let low = self.values[HEAD + W + slot];
        let high = u64::MAX - self.values[HEAD + 2 * W + slot];
        present && low == high
    }

    /// The decision encoded by a reduced ballot. Every rank holding the same
    /// reduced ballot gets the same answer.
    pub(crate) fn decide(&self) -> Decision {
        let min_newest = self.values[0];
        let max_newest = self.newest_anywhere();
        let clean = self.nothing_damaged();
        if min_newest > 0 {
            let lowest = (max_newest + 1).saturating_sub(WINDOW).max(1);
            if let Some(id) = (lowest..=min_newest).rev().find(|id| self.common(*id)) {
                return Decision::Restore(id);
            }
        }
        if clean && self.committed_anywhere() == 0 {
            Decision::Fresh {
                next_id: self.largest_anywhere() + 1,
            }
        } else {
            Decision::Unrecoverable
        }
    }
}

#[cfg(test)]
mod tests;
