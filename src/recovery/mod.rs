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
//! id left by different runs are never mixed. Nothing else matters: no
//! pointer file, no commit marker. Kills at any step leave either a
//! checkpoint every rank holds, or leftovers some ranks lack, which are
//! simply not restorable.
//!
//! The ballot holds:
//! - the newest restorable-here id (minimised) and its complement
//!   (minimised, i.e. the maximum newest id);
//! - whether the rank holds no damaged checkpoint (minimised);
//! - the complement of the largest id of any file the rank holds, damaged
//!   or incomplete included (minimised: the largest id anywhere), so that a
//!   fresh start numbers its checkpoints past every leftover;
//! - a random value (minimised: a number all ranks share, the session's);
//! - per id modulo [`WINDOW`], for ids within `WINDOW` of the rank's newest:
//!   a presence flag, the stamp, and the stamp's complement.
//!
//! For any id between `max_newest - WINDOW + 1` and `min_newest`, every
//! rank's slot refers to that very id, so the minimum of the flags says
//! whether *all* ranks hold it, and the minimum stamp equals the maximum
//! stamp exactly when all copies come from the same attempt. The newest such
//! id is the decision.

pub mod aware;
pub mod copies;
pub mod erasure;

/// Largest `retention.keep_last` accepted; keeps every retained id inside the
/// ballot's window (checkpoint ids are consecutive: a failed checkpoint's id
/// is reused by the next attempt).
pub const MAX_KEEP_LAST: u32 = 32;

/// Number of consecutive checkpoint ids a ballot can tell apart.
pub const WINDOW: u64 = 64;

/// Ballot elements before the per-id slots.
const HEAD: usize = 5;
const W: usize = WINDOW as usize;

/// A sound copy of a checkpoint held by one rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Held {
    /// Checkpoint id.
    pub id: u64,
    /// Stamp of the attempt that wrote it.
    pub stamp: u64,
}

/// What one rank holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Inventory {
    /// Checkpoints this rank holds sound copies of (any order).
    pub valid: Vec<Held>,
    /// Checkpoints whose copy here is damaged, misplaced or unsafe, each with
    /// the reason. They block a fresh start: data that was there is lost.
    pub damaged: Vec<(u64, String)>,
    /// Leftovers of interrupted writes or removals (a data file without its
    /// record), each with the reason. They never block anything.
    pub incomplete: Vec<(u64, String)>,
}

impl Inventory {
    /// The newest valid id not in `excluded`.
    pub fn newest(&self, excluded: &[u64]) -> Option<u64> {
        self.usable(excluded).map(|h| h.id).max()
    }

    fn usable<'a>(&'a self, excluded: &'a [u64]) -> impl Iterator<Item = Held> + 'a {
        self.valid
            .iter()
            .copied()
            .filter(move |h| h.id > 0 && !excluded.contains(&h.id))
    }

    /// The largest id of anything this rank holds (0 if nothing).
    pub fn largest_id(&self) -> u64 {
        let valid = self.valid.iter().map(|h| h.id);
        let damaged = self.damaged.iter().map(|(id, _)| *id);
        let incomplete = self.incomplete.iter().map(|(id, _)| *id);
        valid.chain(damaged).chain(incomplete).max().unwrap_or(0)
    }

    /// One line describing why this rank cannot restore checkpoint `id`
    /// (or what it holds, when `id` is `None`).
    pub fn explain(&self, id: Option<u64>) -> String {
        if let Some(id) = id {
            if let Some((_, why)) = self.damaged.iter().find(|(i, _)| *i == id) {
                return format!("checkpoint {id} is unusable: {why}");
            }
            if let Some((_, why)) = self.incomplete.iter().find(|(i, _)| *i == id) {
                return format!("checkpoint {id} is incomplete here: {why}");
            }
            if !self.valid.iter().any(|h| h.id == id) {
                return format!("holds no files of checkpoint {id}");
            }
        }
        let ids: Vec<u64> = self.valid.iter().map(|h| h.id).collect();
        match (ids.is_empty(), self.damaged.first()) {
            (true, None) => "no checkpoint found".to_string(),
            (true, Some((i, why))) => format!("no sound checkpoint (checkpoint {i}: {why})"),
            (false, _) => format!("holds sound copies of checkpoints {ids:?}"),
        }
    }
}

/// The agreed outcome of recovery planning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// No checkpoint is held soundly by every rank and nothing is damaged:
    /// start from the beginning. Leftovers are kept (retention removes them
    /// once newer checkpoints exist); new checkpoints start at `next_id`.
    Fresh {
        /// First id past every file any rank holds.
        next_id: u64,
    },
    /// Every rank restores this checkpoint id.
    Restore(u64),
    /// Some ranks hold damaged checkpoints and no checkpoint is restorable
    /// by all. Nothing is deleted in this case.
    Unrecoverable,
}

/// One rank's vote, reduced element-wise with `Min` over all ranks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ballot {
    values: Vec<u64>,
}

impl Ballot {
    /// Encodes `inventory`, ignoring ids in `excluded` (ids that failed to
    /// load on some rank in an earlier attempt). `random` should be a fresh
    /// random number: the reduced ballot's [`session`](Self::session) is the
    /// smallest one, the same on every rank.
    pub fn new(inventory: &Inventory, excluded: &[u64], random: u64) -> Self {
        let mut values = vec![0u64; HEAD + 3 * W];
        let newest = inventory.newest(excluded).unwrap_or(0);
        values[0] = newest;
        values[1] = u64::MAX - newest;
        values[2] = u64::from(inventory.damaged.is_empty());
        values[3] = u64::MAX - inventory.largest_id();
        values[4] = random;
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
    pub fn values_mut(&mut self) -> &mut [u64] {
        &mut self.values
    }

    /// The newest id held soundly by any rank (0 if none), from a reduced ballot.
    pub fn newest_anywhere(&self) -> u64 {
        u64::MAX - self.values[1]
    }

    /// The newest id every rank holds some sound checkpoint at or above (0
    /// when some rank holds none), from a reduced ballot.
    pub fn newest_everywhere(&self) -> u64 {
        self.values[0]
    }

    /// The largest id of any file on any rank, from a reduced ballot.
    pub fn largest_anywhere(&self) -> u64 {
        u64::MAX - self.values[3]
    }

    /// A number every rank shares after the reduction, random per planning.
    pub fn session(&self) -> u64 {
        self.values[4]
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
    pub fn decide(&self) -> Decision {
        let min_newest = self.values[0];
        let max_newest = self.newest_anywhere();
        let clean = self.values[2] == 1;
        if min_newest > 0 {
            let lowest = (max_newest + 1).saturating_sub(WINDOW).max(1);
            if let Some(id) = (lowest..=min_newest).rev().find(|id| self.common(*id)) {
                return Decision::Restore(id);
            }
        }
        if clean {
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
