//! Planning a restore from copies held on other nodes (level 2): which
//! checkpoint, and which rank sends which rank its file.
//!
//! Every rank offers what it can read: its own level-1 checkpoints, and, on
//! the lowest rank of each node, the copies its node keeps. After one
//! all-gather every rank runs [`plan`] on the same offers and gets the same
//! answer: the newest checkpoint (with one stamp) that every rank holds
//! itself or can be sent. (Failure-aware recovery runs it on rank 0 alone
//! and sends the ranks the plan.)
//!
//! A copy counts only for a checkpoint the level committed, and it did when
//! *any* node's marker says so: every node finished its part before any was
//! told to commit, so a node whose own marker a failure left unwritten
//! still holds whole copies ([`retain_committed`]).

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// A copy of `rank`'s file of checkpoint `id` (stamp `stamp`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub(crate) struct Copy {
    /// Checkpoint id.
    pub id: u64,
    /// Whose file.
    pub rank: u32,
    /// Stamp of the attempt that wrote it.
    pub stamp: u64,
}

/// What one rank can provide.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Offer {
    /// Its node.
    pub node: u32,
    /// Its own sound level-1 checkpoints: (id, stamp).
    pub own: Vec<(u64, u64)>,
    /// Copies of any rank's files it can read and send, committed or not.
    pub copies: Vec<Copy>,
    /// The (id, stamp) pairs its node's markers say the level committed.
    #[serde(default)]
    pub committed: Vec<(u64, u64)>,
}

/// Drops from `offers` every copy of a checkpoint no node's marker says
/// the level committed (a promotion cut short may be partial anywhere).
pub(crate) fn retain_committed(offers: &mut [Offer]) {
    let committed = super::committed_anywhere(offers.iter().map(|o| &o.committed));
    for o in offers {
        o.copies.retain(|c| committed.contains(&(c.id, c.stamp)));
    }
}

/// The agreed restore.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct CopyPlan {
    /// Checkpoint id.
    pub id: u64,
    /// Its stamp.
    pub stamp: u64,
    /// `(rank, from)`: `from` sends `rank` its file (ranks that hold their
    /// own copy are not listed).
    pub fetch: Vec<(u32, u32)>,
}

/// The newest checkpoint not in `excluded` (ids whose transfer failed)
/// that every rank can restore from `offers` (indexed by rank), or `None`.
///
/// A copy kept on another node than the rank's is preferred: a node keeps
/// its own ranks' copies as second names of their level-1 files, so a
/// level-1 file found damaged is damaged there too. The ranks of the node
/// that keeps the copies take turns sending them (any rank of a node can
/// read its storage), so a lost node's files move in parallel.
pub(crate) fn plan(offers: &[Offer], excluded: &[u64]) -> Option<CopyPlan> {
    let candidates: BTreeSet<(u64, u64)> = offers
        .iter()
        .flat_map(|o| {
            o.own
                .iter()
                .copied()
                .chain(o.copies.iter().map(|c| (c.id, c.stamp)))
        })
        .collect();
    // The ranks of every node, in order (the holder is one of them).
    let mut ranks_on: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    for (rank, o) in offers.iter().enumerate() {
        ranks_on.entry(o.node).or_default().push(rank);
    }
    'next: for &(id, stamp) in candidates.iter().rev() {
        if excluded.contains(&id) {
            continue;
        }
        let mut fetch = Vec::new();
        // Sends assigned so far per holding node: its ranks take turns.
        let mut turns: BTreeMap<u32, usize> = BTreeMap::new();
        for (rank, offer) in offers.iter().enumerate() {
            if offer.own.contains(&(id, stamp)) {
                continue;
            }
            let wanted = Copy {
                id,
                rank: rank as u32,
                stamp,
            };
            let holds = |o: &&Offer| o.copies.contains(&wanted);
            let elsewhere = offers
                .iter()
                .position(|o| holds(&o) && o.node != offer.node);
            let Some(holder) = elsewhere.or_else(|| offers.iter().position(|o| holds(&o))) else {
                continue 'next;
            };
            let node = offers[holder].node;
            let turn = turns.entry(node).or_default();
            let from = ranks_on[&node][*turn % ranks_on[&node].len()];
            *turn += 1;
            fetch.push((rank as u32, from as u32));
        }
        return Some(CopyPlan { id, stamp, fetch });
    }
    None
}

#[cfg(test)]
mod tests;
