//! The failure-aware planner: from the failure topology, the layout each
//! checkpoint was protected under and what each level committed, the
//! newest checkpoint that can still be restored and the lowest level that
//! restores it. A pure function: rank 0 computes it from every rank's
//! report and sends the ranks its answer (`checkpoint/aware.rs`).
//!
//! A level is usable for a checkpoint when its layout survives the failed
//! nodes F:
//! - level 1: no node of the layout failed (a failed rank alone leaves its
//!   node's files);
//! - level 2: no failed node's partner failed too (each node's copy lives
//!   on its partner);
//! - level 3: no group lost more nodes than it has parity;
//! - level 4: always (it depends on the global file system only).
//!
//! Whether the files are sound is not the planner's business: it is found
//! while loading, and the caller then excludes that level's checkpoint and
//! plans again.
//!
//! (`tests.rs` opens with the example of four nodes in one group.)

use crate::level::Level;
use crate::topology::Topology;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// The failure topology: the nodes whose storage is gone, and the ranks
/// whose processes died (on nodes that may have survived).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Failure {
    /// Failed nodes.
    pub nodes: BTreeSet<u32>,
    /// Failed ranks.
    pub ranks: BTreeSet<u32>,
}

impl Failure {
    /// A failure of the given nodes (no soft failures).
    #[cfg(test)]
    pub(crate) fn nodes(nodes: impl IntoIterator<Item = u32>) -> Self {
        Self {
            nodes: nodes.into_iter().collect(),
            ranks: BTreeSet::new(),
        }
    }

    /// The failed nodes among `layout`'s.
    pub(crate) fn lost_in(&self, layout: &Topology) -> Vec<u32> {
        layout
            .nodes()
            .iter()
            .copied()
            .filter(|n| self.nodes.contains(n))
            .collect()
    }
}

/// A checkpoint committed at a level, with the layout it was protected
/// under.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Committed {
    /// The level.
    pub level: Level,
    /// Checkpoint id.
    pub id: u64,
    /// The checkpoint's stamp.
    pub stamp: u64,
    /// Placement, partners and groups when the checkpoint was written.
    pub layout: Topology,
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

/// Whether `level`'s data of a checkpoint laid out as `layout` survives
/// the failed nodes of `failure`.
pub(crate) fn usable(level: Level, layout: &Topology, failure: &Failure) -> bool {
    let lost = failure.lost_in(layout);
    match level {
        Level::L1 => lost.is_empty(),
        Level::L2 => lost.iter().all(|n| {
            layout
                .partner(*n)
                .is_some_and(|p| !failure.nodes.contains(&p))
        }),
        Level::L3 => layout.groups().iter().all(|g| {
            let gone = g.nodes.iter().filter(|n| failure.nodes.contains(n)).count();
            gone <= g.parity as usize
        }),
        Level::L4 => true,
    }
}

/// The newest checkpoint that some level can restore despite `failure`,
/// and the lowest such level for it; `None` when nothing committed
/// survives. Entries in `excluded` (a level's copy of a checkpoint found
/// damaged while loading) are passed over.
pub(crate) fn plan(
    failure: &Failure,
    committed: &[Committed],
    excluded: &[(Level, u64)],
) -> Option<Choice> {
    committed
        .iter()
        .filter(|c| !excluded.contains(&(c.level, c.id)))
        .filter(|c| usable(c.level, &c.layout, failure))
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
