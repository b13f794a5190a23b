//! Level-1 files left on a node by a rank that a failure moved elsewhere.
//!
//! When a rank's process dies but its node lives on, its replacement may
//! start on another node (a spare process under ULFM, with spares at the
//! end of the job), while the rank's level-1 files stay where they were.
//! Before recovery is planned, a rank of that node streams them to the
//! replacement, piece by piece, and the replacement installs them into its
//! own level 1 (every piece checked): the job restores from level 1, as it
//! would had the rank been restarted on its node, whether or not levels 2
//! to 4 have committed the checkpoint yet. With level 1 only, this is
//! what keeps such a failure recoverable at all.
//!
//! It costs nothing without a failure. After one (the runtime names the
//! failed ranks) it costs a gather of a few bytes per rank at rank 0 and
//! its answer (who needs files) sent to all, and when a replacement holds
//! nothing, a second gather of what each node keeps of it with rank 0's
//! plan of moves sent back, the transfers, and one agreement on their
//! outcome. Only rank 0 decodes one message per rank.

use super::Checkpointer;
use crate::comm::agree_on_problems;
use crate::error::Result;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What a rank says first: where it is and whether it needs its files.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
struct Need {
    node: u32,
    /// A replacement of a failed rank holding no level-1 checkpoint.
    needs: bool,
}

/// The level-1 files of needing ranks a rank's node keeps: (rank, id,
/// stamp).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(super) struct Kept {
    files: Vec<(u32, u64, u64)>,
}

/// One file to move: `rank`'s checkpoint `id`, sent by rank `from`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Move {
    rank: u32,
    id: u64,
    from: u32,
}

/// The moves for the offers of every rank (in rank order): each needing
/// rank's every checkpoint offered, sent by the lowest rank offering it;
/// ordered by rank, then id, which both ends follow.
pub(super) fn moves(offers: &[Kept]) -> Vec<Move> {
    let mut chosen: BTreeMap<(u32, u64), u32> = BTreeMap::new();
    for (from, offer) in offers.iter().enumerate() {
        for &(rank, id, _) in &offer.files {
            chosen.entry((rank, id)).or_insert(from as u32);
        }
    }
    chosen
        .into_iter()
        .map(|((rank, id), from)| Move { rank, id, from })
        .collect()
}

impl Checkpointer<'_> {
    /// Brings the level-1 files of failed ranks whose replacements started
    /// on another node from the node that keeps them (see the module
    /// documentation). Collective; problems are warnings (recovery then
    /// plans without those files).
    pub(super) fn relocate_moved(&mut self) -> Result<()> {
        let failed = self.comm.link().recovery().failed.ranks;
        if failed.is_empty() {
            return Ok(());
        }
        let me = self.comm.rank() as u32;
        let node = self.comm.node();
        let needs = failed.contains(&me) && self.store.inventory().valid.is_empty();
        // Rank 0 reads every rank's answer and tells all who needs files:
        // nobody else decodes one answer per rank.
        let needy = self.gather_at_root(&Need { node, needs })?.map(|asks| {
            (asks.iter().enumerate())
                .filter(|(_, a)| a.needs)
                .map(|(r, a)| (r as u32, a.node))
                .collect::<Vec<(u32, u32)>>()
        });
        let needy: Vec<(u32, u32)> =
            self.broadcast_from_root(needy.as_ref(), "list of ranks needing files")?;
        if needy.is_empty() {
            return Ok(());
        }
        let started = std::time::Instant::now();
        // The node a rank left keeps its files; its own node has nothing.
        let offer = Kept {
            files: needy
                .iter()
                .filter(|(_, at)| *at != node)
                .flat_map(|&(rank, _)| {
                    self.store
                        .kept_of(rank)
                        .into_iter()
                        .map(move |(id, stamp)| (rank, id, stamp))
                })
                .collect(),
        };
        let plan = self.gather_at_root(&offer)?.map(|offers| moves(&offers));
        let plan: Vec<Move> = self.broadcast_from_root(plan.as_ref(), "plan of level-1 moves")?;
        // Eager sends first, then receives: no rank waits on another's send.
        for m in plan.iter().filter(|m| m.from == me) {
            let read = self
                .store
                .open_kept(m.id, m.rank)
                .map_err(|e| e.to_string());
            self.send_file(m.rank as usize, read)?;
        }
        let mut local = Vec::new();
        for m in plan.iter().filter(|m| m.rank == me) {
            match self.receive_and_install(m.from as usize)? {
                Ok(()) => tracing::info!(
                    checkpoint = m.id,
                    from = m.from,
                    "level-1 file brought from the node this rank ran on"
                ),
                Err(e) => local.push(format!("checkpoint {}: {e}", m.id)),
            }
        }
        let local = (!local.is_empty()).then(|| local.join("; "));
        let trouble = agree_on_problems(self.comm, local.as_deref())?;
        for (rank, reason) in &trouble {
            tracing::warn!(rank, reason = %reason, "could not bring level-1 files from the node a rank ran on");
        }
        self.stats.fetch_time += started.elapsed();
        Ok(())
    }
}

#[cfg(test)]
mod tests;
