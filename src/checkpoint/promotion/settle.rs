//! Ending promotions: which promotions in flight committed or failed (one
//! all-reduce of the managers' answers), the commits the managers are told
//! about, waiting for every node's queue, and removing a job's files.

use super::state::Sample;
use super::{InFlight, Promotions};
use crate::comm::{Comm, ReduceOp};
use crate::error::Result;
use crate::level::Level;
use crate::manager::{CommitOrder, Progress, RemoveOrder, Reply, Request};
use crate::scheme;
use crate::topology::Layout;

/// Rounds of asking the managers before [`Promotions::drain`] gives up on a
/// promotion (about a minute in all).
const DRAIN_ROUNDS: u64 = 1200;

impl Promotions {
    /// What the node's manager says of the promotions in flight (the
    /// lowest rank of each node asks; the others answer "committed", which
    /// the all-reduce in [`settle`](Self::settle) does not count).
    fn ask(&mut self) -> Sample {
        let keys: Vec<(u64, Level)> = self.in_flight.iter().map(|f| (f.id, f.level)).collect();
        let mut codes = vec![0u64; keys.len()];
        let mut reasons = vec![String::new(); keys.len()];
        let status = Request::Status {
            job_id: self.cfg.job.id.clone(),
            keys: keys.clone(),
        };
        if let Some(asked) = self.call(&status) {
            match asked {
                Ok(Reply::Status(p)) if p.len() == keys.len() => {
                    for ((c, r), p) in codes.iter_mut().zip(&mut reasons).zip(&p) {
                        *c = p.code();
                        *r = match p {
                            Progress::Failed(why) => why.clone(),
                            Progress::Unknown => "a node's manager has no record of it (it was restarted, or skipped the promotion)".into(),
                            _ => String::new(),
                        };
                    }
                }
                // Given up for a recovery: nothing is known, and the rank
                // rolls back at its next collective call.
                Err(e) if self.interruption(&e).is_some() => {
                    codes.iter_mut().for_each(|c| *c = 1);
                }
                _ => {
                    codes.iter_mut().for_each(|c| *c = 2);
                    reasons
                        .iter_mut()
                        .for_each(|r| *r = "a node's manager could not be asked".into());
                }
            }
        }
        Sample { codes, reasons }
    }

    /// Asks the node's manager now, for the next [`settle`](Self::settle)
    /// (before a checkpoint is written: its answers are saved with the
    /// checkpoint, so a replacement that goes through the commit again
    /// gives the same ones).
    pub(crate) fn sample_status(&mut self) {
        self.sample = (!self.in_flight.is_empty()).then(|| self.ask());
    }

    /// Learns, with every rank, which promotions in flight committed or
    /// failed (from the answers sampled before the checkpoint, else asked
    /// now); tells the managers about the committed ones. Collective.
    pub(crate) fn settle(&mut self, comm: &dyn Comm) -> Result<()> {
        let sample = self.sample.take();
        if self.in_flight.is_empty() {
            return Ok(());
        }
        let Sample { mut codes, reasons } = match sample {
            Some(s) if s.codes.len() == self.in_flight.len() => s,
            _ => self.ask(),
        };
        comm.all_reduce_u64(&mut codes, ReduceOp::Max)?;
        let failed: Vec<usize> = (0..codes.len()).filter(|i| codes[*i] >= 2).collect();
        if !failed.is_empty() {
            self.report_failures(comm, &failed, &reasons)?;
        }
        let mut still = Vec::new();
        for (f, code) in self.in_flight.clone().into_iter().zip(codes) {
            match code {
                0 => self.commit(f),
                1 => still.push(f),
                _ => {}
            }
        }
        // A promotion still pending when a newer one of its level committed
        // can no longer matter (and may never finish: a node skipped it).
        still.retain(|f| {
            !self
                .newest_committed
                .iter()
                .any(|(l, id)| *l == f.level && *id > f.id)
        });
        self.in_flight = still;
        Ok(())
    }

    /// Says once for the job (on rank 0) why each promotion in flight at
    /// `failed` did not commit, with the distinct reasons the nodes'
    /// managers gave (a lost node's manager not answering, as every
    /// survivor sees it, is one reason). Collective; every rank has the
    /// same `failed`.
    fn report_failures(&self, comm: &dyn Comm, failed: &[usize], reasons: &[String]) -> Result<()> {
        /// Bytes of one reason sent to rank 0.
        const MAX_REASON: usize = 400;
        let mine: Vec<String> = failed
            .iter()
            .map(|i| {
                let r = reasons.get(*i).map_or("", String::as_str);
                let end = (0..=r.len().min(MAX_REASON))
                    .rev()
                    .find(|e| r.is_char_boundary(*e))
                    .unwrap_or(0);
                r[..end].to_string()
            })
            .collect();
        let bytes = serde_json::to_vec(&mine).unwrap_or_default();
        let all = comm.all_gather(&bytes)?;
        if self.rank != 0 {
            return Ok(());
        }
        let all: Vec<Vec<String>> = all
            .iter()
            .map(|b| serde_json::from_slice(b).unwrap_or_default())
            .collect();
        for (k, i) in failed.iter().enumerate() {
            let Some(f) = self.in_flight.get(*i) else {
                continue;
            };
            let mut why: Vec<&str> = Vec::new();
            for r in all.iter().filter_map(|rank| rank.get(k)) {
                if !r.is_empty() && !why.contains(&r.as_str()) {
                    why.push(r);
                }
            }
            let why = if why.is_empty() {
                "no node gave a reason".to_string()
            } else {
                why.join("; ")
            };
            tracing::warn!(checkpoint = f.id, level = %f.level, reason = %why, "promotion did not commit; the level keeps its previous checkpoint");
        }
        Ok(())
    }

    fn commit(&mut self, f: InFlight) {
        let newest = self.newest_committed.entry(f.level).or_insert(0);
        *newest = (*newest).max(f.id);
        if self.rank == 0 {
            tracing::info!(checkpoint = f.id, level = %f.level, "level committed");
        }
        let Some(topology) = self.topology() else {
            return;
        };
        if self.client.is_none() {
            return;
        }
        let keep_last = match f.level {
            Level::L2 => self.cfg.l2.keep_last,
            Level::L3 => self.cfg.l3.keep_last,
            Level::L4 => self.cfg.l4.keep_last,
            Level::L1 => self.cfg.retention.keep_last,
        };
        let node = topology.node_of(self.rank).unwrap_or(0);
        let order = CommitOrder {
            job_id: self.cfg.job.id.clone(),
            id: f.id,
            stamp: f.stamp,
            level: f.level,
            keep_last,
            ranks: topology.ranks_on(node),
            world: self.placement.len() as u32,
            marker: self.rank == 0,
            global_dir: self.cfg.storage.global_dir.clone(),
            layout: scheme::configured(&self.cfg, f.level).map(|r| Layout::new(&topology, r)),
            archive: f.level == Level::L4 && self.cfg.l4.archive,
            fence: self.fence,
            retire: self.retired(),
        };
        match self.call(&Request::Commit { commit: order }) {
            // The rank rolls back at its next collective call.
            Some(Err(e)) if self.interruption(&e).is_some() => {}
            Some(Err(e)) => {
                tracing::warn!(checkpoint = f.id, error = %e, "the node's manager is unreachable")
            }
            _ => {}
        }
    }

    /// For each of levels 2 and 3, the newest checkpoint committed at a
    /// level whose commits retire its older ones (`retention.levels`):
    /// everything older there goes, including a commit of its own that
    /// arrived after a newer one elsewhere.
    fn retired(&self) -> Vec<(Level, u64)> {
        let policy = self.cfg.retention.levels;
        [Level::L2, Level::L3]
            .into_iter()
            .filter_map(|level| {
                let floor = self
                    .newest_committed
                    .iter()
                    .filter(|(by, _)| policy.retired_by(**by).contains(&level))
                    .map(|(_, id)| *id)
                    .max()?;
                Some((level, floor))
            })
            .collect()
    }

    /// Waits for every node's queued promotions, then records the last
    /// commits. Collective.
    ///
    /// Several rounds: level 3 on one node also waits for the others'
    /// terms, and a partner's copy may still be on its way when the
    /// sender's queue is empty, so the managers are asked again until no
    /// promotion is pending (or [`DRAIN_ROUNDS`] passed).
    pub(crate) fn drain(&mut self, comm: &dyn Comm) -> Result<()> {
        // Every rank holds the same promotions in flight and gets the same
        // codes, so every rank leaves this loop at the same round. A
        // partner's copy may still be on its way when the sender's queue
        // is empty: ask again, a little later, until none is pending.
        for round in 0..DRAIN_ROUNDS {
            if let Some(Err(e)) = self.call(&Request::Drain) {
                if let Some(stop) = self.interruption(&e) {
                    return Err(stop);
                }
                tracing::warn!(error = %e, "the node's manager is unreachable");
            }
            self.settle(comm)?;
            if self.in_flight.is_empty() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(2 + round.min(50)));
        }
        if !self.in_flight.is_empty() && self.rank == 0 {
            tracing::warn!(
                pending = self.in_flight.len(),
                "promotions still pending after waiting; they will be committed at a later checkpoint"
            );
        }
        // The commits just ordered are written before this returns.
        if let Some(Err(e)) = self.call(&Request::Drain) {
            if let Some(stop) = self.interruption(&e) {
                return Err(stop);
            }
            tracing::warn!(error = %e, "the node's manager is unreachable");
        }
        Ok(())
    }

    /// Removes the job's higher-level files (each node's manager its own,
    /// rank 0's also the shared level-4 markers), waiting until done.
    pub(crate) fn remove_all(&mut self) -> std::result::Result<(), String> {
        self.remove(false)
    }

    /// Removes the job's node-local higher-level files (levels 2 and 3),
    /// keeping level 4, waiting until done.
    pub(crate) fn remove_local(&mut self) -> std::result::Result<(), String> {
        self.remove(true)
    }

    fn remove(&mut self, keep_global: bool) -> std::result::Result<(), String> {
        let ranks: Vec<u32> = (0..self.placement.len() as u32)
            .filter(|r| self.placement[*r as usize] == self.placement[self.rank as usize])
            .collect();
        let order = RemoveOrder {
            job_id: self.cfg.job.id.clone(),
            ranks,
            marker: self.rank == 0,
            global_dir: self.cfg.storage.global_dir.clone(),
            keep_global,
        };
        let removed = self.call(&Request::Remove { order });
        let drained = self.call(&Request::Drain);
        match (removed, drained) {
            (Some(Err(e)), _) | (_, Some(Err(e))) => Err(e.to_string()),
            _ => Ok(()),
        }
    }
}
