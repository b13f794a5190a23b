//! Planning a restore from level 3: which checkpoint, which ranks get their
//! file straight from their (surviving) node, and which groups must decode
//! lost nodes' data, by whom.
//!
//! The lowest rank of each node offers what its node keeps at level 3; after
//! one all-gather every rank runs [`plan`] on the same offers (failure-aware
//! recovery runs it on rank 0 alone and sends the plan). What a node
//! keeps of a checkpoint counts only when some node's marker says the level
//! committed it ([`retain_committed`]; see [`super::copies`] for why one
//! marker is enough).

use crate::level::erasure::{GroupManifest, ParityKey};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// What a node keeps of one checkpoint's level 3.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Kept {
    /// The group's manifest.
    pub manifest: GroupManifest,
    /// Ranks whose files the node keeps soundly.
    pub files: Vec<u32>,
    /// Parity shards it keeps.
    pub parity: Vec<ParityKey>,
}

/// What one rank offers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Offer {
    /// Its own sound level-1 checkpoints: (id, stamp).
    pub own: Vec<(u64, u64)>,
    /// Its node (meaningful with `kept`).
    pub node: u32,
    /// The failed nodes whose place its node took (a spare that stood in
    /// during a logged recovery): the groups promoted meanwhile name it by
    /// their ids.
    #[serde(default)]
    pub stood_in_for: Vec<u32>,
    /// What its node keeps (offered by the node's lowest rank only),
    /// committed or not.
    pub kept: Vec<Kept>,
    /// The (id, stamp) pairs its node's markers say level 3 committed.
    #[serde(default)]
    pub committed: Vec<(u64, u64)>,
}

/// Drops from `offers` what nodes keep of checkpoints no node's marker says
/// level 3 committed.
pub(crate) fn retain_committed(offers: &mut [Offer]) {
    let committed = super::committed_anywhere(offers.iter().map(|o| &o.committed));
    for o in offers {
        o.kept
            .retain(|k| committed.contains(&(k.manifest.checkpoint_id, k.manifest.stamp)));
    }
}

/// A group whose lost members' data must be decoded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Decode {
    /// The group.
    pub manifest: GroupManifest,
    /// The rank that decodes.
    pub decoder: u32,
    /// Positions whose shards are available, with the rank that sends them.
    pub present: Vec<(usize, u32)>,
    /// Positions whose data is decoded.
    pub missing: Vec<usize>,
    /// Ranks (of missing positions) the decoder sends their file.
    pub targets: Vec<u32>,
}

/// The agreed level-3 restore.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ErasurePlan {
    /// Checkpoint id.
    pub id: u64,
    /// Its stamp.
    pub stamp: u64,
    /// `(rank, from)`: the file is kept whole on `from`'s node.
    pub direct: Vec<(u32, u32)>,
    /// Groups to decode.
    pub decode: Vec<Decode>,
}

/// Whether the node of `offer` keeps position `pos` of `m` whole: every
/// file of its blob and all its parity shards.
fn whole(k: &Kept, pos: usize) -> bool {
    let (g, p) = (k.manifest.nodes.len(), k.manifest.parity as usize);
    let s = crate::level::erasure::Stripes { g, p };
    let files = k
        .manifest
        .blobs
        .get(pos)
        .is_some_and(|b| b.iter().all(|e| k.files.contains(&e.rank)));
    let parity = (0..g).all(|t| match s.parity_index(t, pos) {
        Some(j) => k.parity.contains(&ParityKey {
            stripe: t as u32,
            index: j as u32,
        }),
        None => true,
    });
    files && parity
}

/// The newest checkpoint not in `excluded` (ids whose rebuild failed) that
/// every rank can restore from level 3, or `None`.
pub(crate) fn plan(offers: &[Offer], excluded: &[u64]) -> Option<ErasurePlan> {
    let world = offers.len() as u32;
    let candidates: BTreeSet<(u64, u64)> = offers
        .iter()
        .flat_map(|o| {
            o.kept
                .iter()
                .map(|k| (k.manifest.checkpoint_id, k.manifest.stamp))
        })
        .collect();
    'next: for &(id, stamp) in candidates.iter().rev() {
        if excluded.contains(&id) {
            continue;
        }
        // Every group of the checkpoint, and who keeps which position whole.
        let mut groups: Vec<(GroupManifest, Vec<(usize, u32)>)> = Vec::new();
        for (rank, o) in offers.iter().enumerate() {
            for k in o
                .kept
                .iter()
                .filter(|k| k.manifest.checkpoint_id == id && k.manifest.stamp == stamp)
            {
                let named = |n: &u32| *n == o.node || o.stood_in_for.contains(n);
                let Some(pos) = k.manifest.nodes.iter().position(named) else {
                    continue;
                };
                let i = match groups.iter().position(|(m, _)| m.nodes == k.manifest.nodes) {
                    Some(i) => i,
                    None => {
                        groups.push((k.manifest.clone(), Vec::new()));
                        groups.len() - 1
                    }
                };
                if whole(k, pos) && !groups[i].1.iter().any(|(p, _)| *p == pos) {
                    groups[i].1.push((pos, rank as u32));
                }
            }
        }
        let mut plan = ErasurePlan {
            id,
            stamp,
            direct: Vec::new(),
            decode: Vec::new(),
        };
        for r in 0..world {
            if offers[r as usize].own.contains(&(id, stamp)) {
                continue;
            }
            // Every group holding r's file (a checkpoint promoted again
            // after a failure may have an older group beside the new one):
            // the first that has it whole, else the first that can decode it.
            let holding: Vec<(usize, usize)> = groups
                .iter()
                .enumerate()
                .filter_map(|(gi, (m, _))| {
                    m.blobs
                        .iter()
                        .position(|b| b.iter().any(|e| e.rank == r))
                        .map(|pos| (gi, pos))
                })
                .collect();
            if let Some(from) = holding.iter().find_map(|&(gi, pos)| {
                groups[gi]
                    .1
                    .iter()
                    .find(|(p, _)| *p == pos)
                    .map(|(_, from)| *from)
            }) {
                plan.direct.push((r, from));
                continue;
            }
            let decodable = holding.iter().find(|&&(gi, _)| {
                let (m, present) = &groups[gi];
                present.len() >= m.nodes.len() - m.parity as usize
            });
            let Some(&(gi, _)) = decodable else {
                continue 'next;
            };
            let (m, present) = &groups[gi];
            let d = match plan.decode.iter().position(|d| d.manifest.nodes == m.nodes) {
                Some(d) => d,
                None => {
                    let mut present = present.clone();
                    present.sort_unstable();
                    plan.decode.push(Decode {
                        manifest: m.clone(),
                        decoder: present.iter().map(|(_, r)| *r).min().unwrap_or(0),
                        missing: (0..m.nodes.len())
                            .filter(|p| !present.iter().any(|(q, _)| q == p))
                            .collect(),
                        present,
                        targets: Vec::new(),
                    });
                    plan.decode.len() - 1
                }
            };
            plan.decode[d].targets.push(r);
        }
        return Some(plan);
    }
    None
}

#[cfg(test)]
mod tests;
