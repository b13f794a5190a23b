//! The failure-aware planner: from the failure topology, the layout each
//! checkpoint was protected under and what each level committed, the
//! newest checkpoint that can still be restored and the lowest level that
//! restores it. A pure function: rank 0 computes it from every rank's
//! report and sends the ranks its answer (`checkpoint/aware.rs`).
//!
//! A level is usable for a checkpoint when its data survives the failed
//! nodes F:
//! - level 1: no node of the layout failed (a failed rank alone leaves its
//!   node's files);
//! - levels 2 to 4: the scheme the checkpoint was protected with, under
//!   the rule recorded with its commit, survives F (partner copies: every
//!   failed node has a living holder; Reed-Solomon groups: no group lost
//!   more nodes than its parity; the global directory: always). See
//!   `scheme/`.
//!
//! Whether the files are sound is not the planner's business: it is found
//! while loading, and the caller then excludes that level's checkpoint and
//! plans again.
//!
//! (`tests.rs` opens with the example of four nodes in one group.)

use crate::level::Level;
use crate::scheme::Protection;
use crate::topology::{FailureTopology, Topology};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// A checkpoint committed at a level, with the layout it was protected
/// under.
#[derive(Clone, Debug)]
pub(crate) struct Committed {
    /// The level.
    pub level: Level,
    /// Checkpoint id.
    pub id: u64,
    /// The checkpoint's stamp.
    pub stamp: u64,
    /// Where the ranks were when the checkpoint was written.
    pub layout: Topology,
    /// How the level protected it, under the rule recorded with the
    /// commit (`None` at level 1, which keeps each node's own files).
    pub protection: Option<Arc<dyn Protection>>,
}

/// What to restore.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Choice {
    /// The lowest level that restores [`id`](Self::id).
    pub level: Level,
    /// Checkpoint id.
    pub id: u64,
    /// Its stamp.
    pub stamp: u64,
}

/// Whether the data of `committed` survives the failed nodes of
/// `failure`: nothing of its layout lost, or its protection survives the
/// loss.
pub(crate) fn usable(committed: &Committed, failure: &FailureTopology) -> bool {
    failure.lost_in(&committed.layout).is_empty()
        || (committed.protection.as_ref()).is_some_and(|p| p.survives(&failure.nodes))
}

/// The newest checkpoint that some level can restore despite `failure`,
/// and the lowest such level for it; `None` when nothing committed
/// survives. Entries in `excluded` (a level's copy of a checkpoint found
/// damaged while loading) are passed over.
pub(crate) fn plan(
    failure: &FailureTopology,
    committed: &[Committed],
    excluded: &[(Level, u64)],
) -> Option<Choice> {
    committed
        .iter()
        .filter(|c| !excluded.contains(&(c.level, c.id)))
        .filter(|c| usable(c, failure))
        // Newest id first, then the lowest level.
        .max_by(|a, b| a.id.cmp(&b.id).then(b.level.cmp(&a.level)))
        .map(|c| Choice {
            level: c.level,
            id: c.id,
            stamp: c.stamp,
        })
}

#[cfg(test)]
mod tests;
