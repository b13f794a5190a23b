//! What one rank holds at level 1: the sound copies, the damaged ones and
//! the leftovers, and its evidence that the job committed a checkpoint.
//! Level 1 takes the inventory ([`L1Store::inventory`](super::L1Store));
//! the recovery planner decides from every rank's.

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
    /// The newest checkpoint id this rank has evidence of having committed
    /// on every rank (0: none): its node's `LATEST` pointer, a commit
    /// marker of a level above 1, or the runtime's record. Evidence never
    /// picks what is restored; it turns "nothing restorable" from a fresh
    /// start into an error.
    pub committed: u64,
    /// The levels above 1 whose commit markers this rank saw.
    pub committed_levels: Vec<super::Level>,
}

impl Inventory {
    /// The newest valid id not in `excluded`.
    pub fn newest(&self, excluded: &[u64]) -> Option<u64> {
        self.usable(excluded).map(|h| h.id).max()
    }

    pub(crate) fn usable<'a>(&'a self, excluded: &'a [u64]) -> impl Iterator<Item = Held> + 'a {
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
            (true, None) if self.committed > 0 => format!(
                "holds no checkpoint, although checkpoint {} is recorded as committed",
                self.committed
            ),
            (true, None) => "no checkpoint found".to_string(),
            (true, Some((i, why))) => format!("no sound checkpoint (checkpoint {i}: {why})"),
            (false, _) => format!("holds sound copies of checkpoints {ids:?}"),
        }
    }
}
