//! Logged (localised) recovery at the root. In `logged` mode a rank
//! failure starts no new epoch: the failed rank's node replaces it (a
//! standby, or a new process), and once the replacement listens the root
//! releases it alone, telling it to rejoin. The replacement restores its
//! own level-1 checkpoint and asks the other ranks for the messages it
//! lost; they serve it from their logs without rolling back (see
//! `frame::comm::net`). One such recovery per checkpoint interval: what
//! it cannot handle restarts globally, and the output and the metrics say
//! why:
//! - a node failure (its ranks' level-1 checkpoints went with it);
//! - a failure while a recovery is under way;
//! - a second failure before the next checkpoint committed, and any
//!   failure in an epoch before its first checkpoint committed (the
//!   replacement starts from a checkpoint of the epoch: its message counts
//!   number that epoch's messages);
//! - a rank that cannot replay what the replacement asks for (its log
//!   outgrew `recovery.log_limit`, or a message crossed the checkpoint):
//!   it asks the root to restart globally.

use super::{Cluster, Failure};
use crate::proto::{now_ns, Go, ToDaemon};
use crate::root::RunError;
use frame::metrics::{IdleRecord, Record, RuntimeRecoveryRecord};
use std::collections::BTreeSet;

/// Why a failure before an epoch's first checkpoint restarts globally.
const NO_CHECKPOINT: &str =
    "no checkpoint committed yet in this epoch (a replacement starts from one)";

/// The root's record of logged recoveries.
#[derive(Debug)]
pub(super) struct Logged {
    /// Replacements started and not released yet.
    pub(super) rejoining: BTreeSet<u32>,
    /// Ranks replaced by logged recoveries since the last global restart
    /// (the failed ranks of a fallback).
    replaced: BTreeSet<u32>,
    /// The checkpoint interval (the newest committed id, 0 for none) in
    /// which no logged recovery may start, and why.
    closed: Option<(u64, &'static str)>,
    /// The logged recovery the other ranks idle for: the interval it
    /// happened in, and the rank replaced.
    idling: Option<(u64, u32)>,
    /// The last logged recovery's failure number (for the idle and help
    /// records).
    pub(super) last_failure: usize,
    /// Teams being formed for replacements, by failed rank (see `team.rs`).
    pub(super) teams: std::collections::BTreeMap<u32, super::team::Forming>,
}

impl Default for Logged {
    fn default() -> Self {
        Self {
            rejoining: BTreeSet::new(),
            replaced: BTreeSet::new(),
            closed: Some((0, NO_CHECKPOINT)),
            idling: None,
            last_failure: 0,
            teams: std::collections::BTreeMap::new(),
        }
    }
}

impl Logged {
    /// The ranks a fallback restarts globally for.
    pub(super) fn replaced_ranks(&self) -> Vec<u32> {
        self.replaced.iter().copied().collect()
    }

    /// A global restart to the newest checkpoint began (`committed`).
    pub(super) fn restarted(&mut self, committed: Option<u64>) {
        // The REINIT ends every rank's idling.
        self.idling = None;
        self.rejoining.clear();
        self.replaced.clear();
        self.teams.clear();
        // The checkpoints' message counts are of the epoch they were
        // written in: the first checkpoint of the new one opens the logs.
        self.closed = Some((committed.unwrap_or(0), NO_CHECKPOINT));
    }
}

impl Cluster<'_> {
    /// Why `failure` cannot be a logged recovery, if it cannot.
    pub(super) fn logged_refusal(&self, failure: &Failure) -> Option<String> {
        let interval = self.committed.unwrap_or(0);
        match failure {
            Failure::Node { .. } => Some(
                "a node failed (a logged recovery replaces one rank from its node's level-1 checkpoint)"
                    .into(),
            ),
            Failure::Fallback { reason, .. } => Some(reason.clone()),
            Failure::Rank { .. } if !self.started => {
                Some("the job had not started when the rank failed".into())
            }
            Failure::Rank { .. } if !self.open.is_empty() || !self.logged.rejoining.is_empty() => {
                Some("a recovery was still under way".into())
            }
            Failure::Rank { .. } => match self.logged.closed {
                Some((at, why)) if at == interval => Some(why.into()),
                _ => None,
            },
        }
    }

    /// Starts the logged recovery of a failed rank: its node replaces it
    /// in the current epoch; nobody else hears of it.
    pub(super) async fn replace_logged(&mut self, failure: Failure) -> Result<(), RunError> {
        let Failure::Rank { rank, how, at_ns } = failure else {
            return Ok(());
        };
        eprintln!(
            "frame: rank {rank} died ({how}); only its replacement goes back (logged recovery)"
        );
        let r = rank as usize;
        self.ready[r] = None;
        self.done[r] = false;
        self.logged.rejoining.insert(rank);
        self.logged.replaced.insert(rank);
        self.logged.closed = Some((
            self.committed.unwrap_or(0),
            "a second failure before the next checkpoint committed (one logged recovery per checkpoint interval)",
        ));
        self.open.push(RuntimeRecoveryRecord {
            failure: self.failures,
            mode: "logged".into(),
            kind: "rank".into(),
            epoch: self.epoch,
            failed_ranks: vec![rank],
            failed_nodes: vec![],
            detected_ns: at_ns,
            reinit_sent_ns: now_ns(),
            replacements_started_ns: 0,
            barrier_ns: 0,
            runtime_recovery_ms: 0.0,
            fallback: None,
        });
        let node = self.placement[r];
        let epoch = self.epoch;
        let helpers = self.launch.spares.saturating_sub(1);
        if helpers > 0 {
            self.logged
                .teams
                .insert(rank, super::team::Forming::new(helpers + 1));
        }
        self.send(
            node,
            &ToDaemon::Replace {
                epoch,
                rank,
                helpers,
            },
        )
        .await;
        // The others wait for it until the next checkpoint commits.
        self.logged.idling = Some((self.committed.unwrap_or(0), rank));
        self.logged.last_failure = self.failures;
        self.broadcast(&ToDaemon::Idle { on: true, rank }).await;
        Ok(())
    }

    /// Checkpoint `id` committed: a logged recovery before it is over, and
    /// the ranks that waited for it stop idling.
    pub(super) async fn end_idling(&mut self, id: u64) {
        if let Some((interval, rank)) = self.logged.idling {
            if id > interval {
                self.logged.idling = None;
                self.broadcast(&ToDaemon::Idle { on: false, rank }).await;
            }
        }
    }

    /// A rank reported how long it waited: one metrics record.
    pub(super) fn record_idle(&mut self, rank: u32, wall_ms: f64, cpu_ms: f64) {
        self.record(Record::Idle(IdleRecord {
            failure: self.logged.last_failure,
            rank,
            wall_ms,
            cpu_ms,
        }));
    }

    /// The replacement of `rank` listens: release it alone, as a rank
    /// that rejoins the others.
    pub(super) async fn release_rejoining(&mut self, rank: u32) {
        let go = Go {
            epoch: self.epoch,
            table: self.ready.iter().flatten().cloned().collect(),
            nodes: self.placement.clone(),
            failed_ranks: vec![rank],
            failed_nodes: vec![],
            fired: self.fired.iter().copied().collect(),
            committed: self.committed,
            rejoin: true,
            helpers: self.helpers_of(rank),
        };
        let node = self.placement[rank as usize];
        self.send(node, &ToDaemon::Release { rank, go }).await;
        let (done, open): (Vec<_>, Vec<_>) = std::mem::take(&mut self.open)
            .into_iter()
            .partition(|r| r.mode == "logged" && r.failed_ranks == [rank]);
        self.open = open;
        self.close_records(done).await;
    }

    /// A rank cannot feed a replacement: restart globally (once per epoch).
    pub(super) async fn on_fallback(
        &mut self,
        rank: u32,
        epoch: u64,
        reason: String,
    ) -> Result<(), RunError> {
        if epoch != self.epoch || self.logged.replaced.is_empty() || self.finishing {
            return Ok(());
        }
        let reason = format!("rank {rank}: {reason}");
        self.fail(Failure::Fallback {
            reason,
            at_ns: now_ns(),
        })
        .await
    }
}
