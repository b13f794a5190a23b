//! Which checkpoint a restart goes back to when it is not simply the
//! newest: the one the configuration names (`recovery.restart_from`), and
//! an older one when the newest (or the one named) cannot be restored on
//! some rank.
//!
//! Either way nothing is deleted: the newer checkpoints stay on every
//! level, and the job numbers its next checkpoints past every id any rank
//! holds, so that no new checkpoint ever shares an id with one on disk.
//! Retention removes the newer ones once enough newer checkpoints exist;
//! `frame drop` removes one at once.
//!
//! The choice holds while the job has not committed a newer checkpoint:
//! under `frame run` the runtime's record of the job's commits says so
//! ([`RecoveryContext::committed`](crate::comm::RecoveryContext::committed)), so a
//! failure before the first new checkpoint goes back to the named one
//! again, and one after it to the newest.

use super::Checkpointer;
use crate::comm::agree_on_problems;
use crate::config::Config;
use crate::error::{problems, Result};
use crate::recovery::{Ballot, Inventory};

/// The newest id a planning may restore: `recovery.restart_from` while the
/// job has committed nothing newer (`committed`: the runtime's record of
/// this job's commits).
pub(super) fn ceiling(cfg: &Config, committed: Option<u64>) -> Option<u64> {
    let named = cfg.recovery.restart_from;
    (named > 0 && committed.is_none_or(|c| c <= named)).then_some(named)
}

impl Checkpointer<'_> {
    /// The ids this rank holds above the ceiling: a planning passes over
    /// them as if they failed to load.
    pub(super) fn above_ceiling(&self, inventory: &Inventory) -> Vec<u64> {
        match self.ceiling {
            Some(top) => inventory
                .valid
                .iter()
                .map(|h| h.id)
                .filter(|id| *id > top)
                .collect(),
            None => Vec::new(),
        }
    }

    /// After the ballot decided to restore `id`: says so when it is not the
    /// checkpoint wanted (the named one, or the newest any rank holds or
    /// that failed to load), with each rank's reason. Collective (every
    /// rank holds the same reduced ballot).
    pub(super) fn tell_planned(
        &self,
        id: u64,
        ballot: &Ballot,
        inventory: &Inventory,
        excluded: &[u64],
    ) -> Result<()> {
        let failed = excluded.iter().copied().filter(|e| *e > id).max();
        let wanted = match (self.ceiling, failed) {
            (Some(top), _) => top,
            (None, Some(f)) => f.max(ballot.newest_anywhere()),
            (None, None) => ballot.newest_anywhere(),
        };
        if wanted == id && self.ceiling.is_none() {
            return Ok(());
        }
        let why = match failed {
            // Each rank's reason was said when the load failed.
            Some(_) => Vec::new(),
            None => {
                let held = inventory.valid.iter().any(|h| h.id == wanted);
                let here = (wanted != id && !held).then(|| inventory.explain(Some(wanted)));
                problems(agree_on_problems(self.comm, here.as_deref())?)
            }
        };
        self.tell_choice(id, wanted, &why);
        Ok(())
    }

    /// The checkpoint the configuration names to restart from, as the
    /// messages say it: the key, its value and where the value came from.
    pub(super) fn named_ceiling(&self) -> Option<String> {
        self.ceiling.map(|c| {
            format!(
                "`recovery.restart_from` = {c} ({})",
                self.cfg.source_of("recovery.restart_from")
            )
        })
    }

    /// Says, on rank 0, which checkpoint recovery restores when it is not
    /// the one wanted (the one named by `restart_from`, or else the newest
    /// any rank holds), with `why` for each rank that cannot restore the
    /// wanted one, and says it when the named one is restored.
    pub(super) fn tell_choice(&self, restored: u64, wanted: u64, why: &[crate::RankProblem]) {
        if self.comm.rank() != 0 {
            return;
        }
        let named = self.named_ceiling();
        let line = if restored == wanted {
            match named {
                Some(named) => format!(
                    "restarting from checkpoint {restored} as asked by {named}; newer checkpoints are kept, \
                     and new ones are numbered from {}",
                    self.next_id_after(restored)
                ),
                None => return,
            }
        } else {
            let reasons: Vec<String> = why
                .iter()
                .map(|p| format!("rank {}: {}", p.rank, p.reason))
                .collect();
            let reasons = if reasons.is_empty() {
                String::new()
            } else {
                format!(" ({})", reasons.join("; "))
            };
            let asked = named
                .map(|n| format!(" (asked by {n})"))
                .unwrap_or_default();
            format!(
                "checkpoint {wanted}{asked} cannot be restored on every rank{reasons}; restoring checkpoint \
                 {restored}, the newest older one every rank can restore. Nothing was deleted; new checkpoints \
                 are numbered from {}",
                self.next_id_after(restored)
            )
        };
        tracing::warn!("{line}");
        eprintln!("frame: {line}");
    }

    /// The id the first checkpoint after restoring `id` takes: past every
    /// id any rank holds.
    pub(super) fn next_id_after(&self, id: u64) -> u64 {
        id.max(self.resume_past) + 1
    }
}

#[cfg(test)]
mod tests;
