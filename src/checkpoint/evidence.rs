//! Evidence that the job checkpointed, and what a refusal tells the user.
//!
//! A job that committed a checkpoint must never start over silently: when
//! no checkpoint can be restored by every rank, the planner refuses instead
//! of starting fresh as soon as any rank has evidence of a commit (see
//! [`crate::recovery::Inventory::committed`]). Each rank collects it here
//! from what it can see without reading data: its node's `LATEST` pointer
//! (read with the level-1 inventory), the commit markers of levels 2 and 3
//! on its node (the node's lowest rank) and of level 4 (rank 0), and the
//! runtime's record of the commits the ranks reported
//! ([`RuntimeLink::recovery`](crate::comm::RuntimeLink::recovery)).
//!
//! The refusal names the ranks that cannot restore, the levels tried, and
//! what would have survived the loss.

use super::Checkpointer;
use crate::config::Config;
use crate::level::erasure::ErasureStore;
use crate::level::{CopyStore, Level};
use crate::recovery::Inventory;

impl Checkpointer<'_> {
    /// What this rank holds at level 1, with every evidence of commits it
    /// can see.
    pub(super) fn inventory(&mut self) -> Inventory {
        let mut inventory = self.store.inventory();
        self.add_evidence(&mut inventory);
        inventory
    }

    /// Adds the evidence of commits this rank can see beyond its level-1
    /// pointer to `inventory`.
    fn add_evidence(&self, inventory: &mut Inventory) {
        let mut newest = inventory.committed;
        if let Some(id) = self.comm.link().recovery().committed {
            newest = newest.max(id);
        }
        if self.levels.is_some() {
            for (level, ids) in self.level_commits() {
                if let Some(id) = ids.into_iter().max() {
                    newest = newest.max(id);
                    inventory.committed_levels.push(level);
                }
            }
        }
        inventory.committed = newest;
    }

    /// The checkpoints the commit markers of levels 2 to 4 name, as far as
    /// this rank reads them (a node's lowest rank its node's levels 2 and
    /// 3, rank 0 level 4).
    fn level_commits(&self) -> Vec<(Level, Vec<u64>)> {
        let cfg = &self.cfg;
        let (dir, job) = (&cfg.storage.local_dir, &cfg.job.id);
        let mut out = Vec::new();
        if self.is_node_leader() {
            if let Ok(Some(s)) = CopyStore::open_existing(dir, job, Level::L2) {
                out.push((Level::L2, s.committed()));
            }
            if let Ok(Some(s)) = ErasureStore::open_existing(dir, job) {
                out.push((Level::L3, s.copies().committed()));
            }
        }
        if self.comm.rank() == 0 {
            if let Some(s) = self.global_store() {
                out.push((Level::L4, s.committed()));
            }
        }
        out
    }
}

/// The levels a refused recovery tried (those configured, and those whose
/// commits it found) and, when some ranks lost what others hold (`lost`),
/// what would have survived.
pub(super) fn refusal_note(
    cfg: &Config,
    committed: u64,
    lost: bool,
    with_commits: &[Level],
) -> String {
    let higher = [Level::L2, Level::L3, Level::L4];
    let tried: Vec<String> = std::iter::once(Level::L1)
        .chain(
            higher
                .into_iter()
                .filter(|l| with_commits.contains(l) || !cfg.level_interval(*l).is_zero()),
        )
        .map(|l| {
            if l == Level::L1 || with_commits.contains(&l) {
                l.to_string()
            } else {
                format!("{l} (nothing committed)")
            }
        })
        .collect();
    let mut note = format!("levels tried: {}", tried.join(", "));
    if committed > 0 {
        note = format!("checkpoint {committed} is recorded as committed; {note}");
    }
    if !lost {
        return note;
    }
    if with_commits.is_empty() {
        note.push_str(
            ". Level 1 keeps no copy off a node: the checkpoints of a lost node's ranks are gone with it. \
             Promote checkpoints to level 2 (partner copies), 3 (Reed-Solomon groups) or 4 (the global \
             directory) to survive the loss of a node",
        );
    } else if !with_commits.contains(&Level::L4) {
        note.push_str(
            ". Only level 4 (the global directory) survives the loss of more nodes than the \
             other levels protect against",
        );
    }
    note
}
