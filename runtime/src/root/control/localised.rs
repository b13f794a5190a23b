//! Logged (localised) recovery at the root. In `logged` mode a rank
//! failure starts no new epoch: the failed rank's node replaces it (a
//! standby, or a new process), and once the replacement listens the root
//! releases it alone, telling it to rejoin. The replacement restores its
//! own level-1 checkpoint and asks the other ranks for the messages it
//! lost; they serve it from their logs without rolling back (see
//! `frame::comm::net`). A node failure is one too: its ranks start again
//! on a spare node, which takes the failed node's place among the ranks'
//! promotions; they are released together, each told what it stands in
//! for ([`StandIn`]), and take their checkpoint from the failed node's
//! partner (level 2). One such recovery per checkpoint interval: what it
//! cannot handle restarts globally, and the output and the metrics say
//! why:
//! - a failure while a recovery is under way;
//! - a second failure before the next checkpoint committed, and any
//!   failure in an epoch before its first checkpoint committed (the
//!   replacement starts from a checkpoint of the epoch: its message counts
//!   number that epoch's messages);
//! - a node failure without a spare node to take all its ranks;
//! - a rank that cannot replay what the replacement asks for (its log
//!   outgrew `recovery.log_limit`, or a message crossed the checkpoint),
//!   or a replacement that cannot restore its checkpoint (a node's without
//!   level 2, or whose copy had not reached the partner): it asks the root
//!   to restart globally.

use super::{Cluster, Failure};
use crate::proto::{now_ns, Go, ToDaemon};
use crate::root::RunError;
use frame::comm::{FailureTopology, StandIn};
use frame::metrics::{IdleRecord, Record, RuntimeRecoveryRecord};
use std::collections::{BTreeMap, BTreeSet};

/// Why a failure before an epoch's first checkpoint restarts globally.
const NO_CHECKPOINT: &str =
    "no checkpoint committed yet in this epoch (a replacement starts from one)";

/// The root's record of logged recoveries.
#[derive(Debug)]
pub(super) struct Logged {
    /// Replacements started and not ready to rejoin yet.
    pub(super) rejoining: BTreeSet<u32>,
    /// Replacements ready, waiting for the others of their recovery (a
    /// node's ranks are released together).
    waiting: BTreeSet<u32>,
    /// Ranks replaced by logged recoveries since the last global restart
    /// (the failed ranks of a fallback), and the nodes lost with them.
    replaced: BTreeSet<u32>,
    lost_nodes: BTreeSet<u32>,
    /// The checkpoint interval (the newest committed id, 0 for none) in
    /// which no logged recovery may start, and why.
    closed: Option<(u64, &'static str)>,
    /// The logged recovery the other ranks idle for: the interval it
    /// happened in, and the ranks replaced.
    idling: Option<(u64, Vec<u32>)>,
    /// The last logged recovery's failure number (for the idle and help
    /// records).
    pub(super) last_failure: usize,
    /// Teams being formed for replacements, by failed rank (see `team.rs`).
    pub(super) teams: BTreeMap<u32, super::team::Forming>,
    /// Every rank's node as the ranks' promotions know them: the
    /// placement at the epoch's start.
    known: Vec<u32>,
    /// Nodes (as the ranks know them) now run by a spare node.
    moved: BTreeMap<u32, u32>,
    /// Every node a spare node stood in for, and the spare, for the whole
    /// job: the checkpoints promoted meanwhile name the failed node, and
    /// the spare keeps their copies (a later global restart looks there).
    pub(super) stood_in: BTreeMap<u32, u32>,
}

impl Default for Logged {
    fn default() -> Self {
        Self {
            rejoining: BTreeSet::new(),
            waiting: BTreeSet::new(),
            replaced: BTreeSet::new(),
            lost_nodes: BTreeSet::new(),
            closed: Some((0, NO_CHECKPOINT)),
            idling: None,
            last_failure: 0,
            teams: BTreeMap::new(),
            known: Vec::new(),
            moved: BTreeMap::new(),
            stood_in: BTreeMap::new(),
        }
    }
}

impl Logged {
    /// The ranks and nodes a fallback restarts globally for.
    pub(super) fn replaced(&self) -> (Vec<u32>, Vec<u32>) {
        (
            self.replaced.iter().copied().collect(),
            self.lost_nodes.iter().copied().collect(),
        )
    }

    /// A global restart to the newest checkpoint began (`committed`).
    pub(super) fn restarted(&mut self, committed: Option<u64>) {
        // The REINIT ends every rank's idling.
        self.idling = None;
        self.rejoining.clear();
        self.waiting.clear();
        self.replaced.clear();
        self.lost_nodes.clear();
        self.teams.clear();
        // The checkpoints' message counts are of the epoch they were
        // written in: the first checkpoint of the new one opens the logs.
        self.closed = Some((committed.unwrap_or(0), NO_CHECKPOINT));
    }

    /// An epoch's ranks were released, placed so.
    pub(super) fn began(&mut self, placement: Vec<u32>) {
        self.known = placement;
        self.moved.clear();
    }
}

impl Cluster<'_> {
    /// Why `failure` cannot be a logged recovery, if it cannot.
    pub(super) fn logged_refusal(&self, failure: &Failure) -> Option<String> {
        let interval = self.committed.unwrap_or(0);
        match failure {
            Failure::Fallback { reason, .. } => return Some(reason.clone()),
            _ if !self.started => {
                return Some("the job had not started when it failed".into());
            }
            _ if !self.open.is_empty() || !self.logged.rejoining.is_empty() => {
                return Some("a recovery was still under way".into());
            }
            _ => {}
        }
        if let Some((at, why)) = self.logged.closed {
            if at == interval {
                return Some(why.into());
            }
        }
        let Failure::Node { node, .. } = failure else {
            return None;
        };
        match self.place(&self.ranks_on(*node), Some(*node)) {
            Ok((_, spawn)) if spawn.len() == 1 => None,
            Ok(_) => Some(format!(
                "no spare node can take all of node {node}'s ranks (a logged recovery runs them on one)"
            )),
            Err(e) => Some(e.to_string()),
        }
    }

    /// Starts the logged recovery of a failed rank, or of a failed node's
    /// ranks on a spare node, in the current epoch; nobody else hears of
    /// it but that they idle.
    pub(super) async fn replace_logged(&mut self, failure: Failure) -> Result<(), RunError> {
        let (ranks, nodes, at_ns) = match failure {
            Failure::Rank { rank, how, at_ns } => {
                eprintln!(
                    "frame: rank {rank} died ({how}); only its replacement goes back (logged recovery)"
                );
                (vec![rank], vec![], at_ns)
            }
            Failure::Node { node, why, at_ns } => {
                let ranks = self.ranks_on(node);
                let (placement, spawn) = self.place(&ranks, Some(node))?;
                self.bury(node);
                let spare = spawn.keys().next().copied().unwrap_or(node);
                eprintln!(
                    "frame: node {node} died ({why}); only its ranks {ranks:?} go back, on node {spare} (logged recovery)"
                );
                self.placement = placement;
                // The ranks' promotions know the spare by the failed
                // node's id (a spare that fails again moves on).
                if let Some(&known) = ranks
                    .first()
                    .and_then(|r| self.logged.known.get(*r as usize))
                {
                    self.logged.moved.insert(known, spare);
                    self.logged.stood_in.insert(known, spare);
                }
                self.logged.lost_nodes.insert(node);
                (ranks, vec![node], at_ns)
            }
            Failure::Fallback { .. } => return Ok(()),
        };
        for &rank in &ranks {
            let r = rank as usize;
            self.ready.clear(r);
            self.done.clear(r);
            self.incarnation[r] = self.epoch;
            self.logged.rejoining.insert(rank);
            self.logged.replaced.insert(rank);
        }
        self.logged.closed = Some((
            self.committed.unwrap_or(0),
            "a second failure before the next checkpoint committed (one logged recovery per checkpoint interval)",
        ));
        let mut rec = RuntimeRecoveryRecord {
            failure: self.failures,
            mode: "logged".into(),
            kind: if nodes.is_empty() { "rank" } else { "node" }.into(),
            epoch: self.epoch,
            failed_ranks: ranks.clone(),
            failed_nodes: nodes,
            detected_ns: at_ns,
            reinit_sent_ns: now_ns(),
            fallback: None,
            ..RuntimeRecoveryRecord::default()
        };
        self.note_silence(&mut rec);
        self.open_record(rec);
        let epoch = self.epoch;
        let helpers = self.launch.spares.saturating_sub(1);
        for &rank in &ranks {
            if helpers > 0 {
                self.logged
                    .teams
                    .insert(rank, super::team::Forming::new(helpers + 1));
            }
            let node = self.placement[rank as usize];
            let replace = ToDaemon::Replace {
                epoch,
                rank,
                helpers,
            };
            self.send(node, &replace).await;
        }
        // The others wait for them until the next checkpoint commits.
        self.logged.idling = Some((self.committed.unwrap_or(0), ranks.clone()));
        self.logged.last_failure = self.failures;
        self.broadcast(&ToDaemon::Idle { on: true, ranks }).await;
        Ok(())
    }

    /// Checkpoint `id` committed: a logged recovery before it is over, and
    /// the ranks that waited for it stop idling.
    pub(super) async fn end_idling(&mut self, id: u64) {
        if let Some((interval, ranks)) = self.logged.idling.clone() {
            if id > interval {
                self.logged.idling = None;
                self.broadcast(&ToDaemon::Idle { on: false, ranks }).await;
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

    /// The replacement of `rank` (with its team, if any) is ready to
    /// rejoin: once every replacement of its recovery is, release them.
    pub(super) async fn ready_to_rejoin(&mut self, rank: u32) {
        if !self.logged.rejoining.remove(&rank) {
            return;
        }
        self.logged.waiting.insert(rank);
        if !self.logged.rejoining.is_empty() {
            return;
        }
        for rank in std::mem::take(&mut self.logged.waiting) {
            self.release_rejoining(rank).await;
        }
        let (done, open): (Vec<_>, Vec<_>) = std::mem::take(&mut self.open)
            .into_iter()
            .partition(|r| r.mode == "logged");
        self.open = open;
        self.close_records(done).await;
    }

    /// Releases the replacement of `rank` alone, as a rank that rejoins
    /// the others.
    async fn release_rejoining(&mut self, rank: u32) {
        // What failed in this recovery: the rank, or its node's ranks.
        let failed = (self.open.iter())
            .find(|r| r.mode == "logged" && r.failed_ranks.contains(&rank))
            .map_or(
                FailureTopology {
                    ranks: [rank].into(),
                    nodes: Default::default(),
                },
                |r| FailureTopology {
                    ranks: r.failed_ranks.iter().copied().collect(),
                    nodes: r.failed_nodes.iter().copied().collect(),
                },
            );
        let Some(endpoints) = self.ready.every() else {
            tracing::error!(
                rank,
                "a rejoining rank's release before every rank was ready: held back"
            );
            return;
        };
        let go = Go {
            epoch: self.epoch,
            table: crate::proto::Table::Full(endpoints),
            nodes: self.placement.clone(),
            failed,
            fired: self.fired.iter().copied().collect(),
            committed: self.committed,
            rejoin: true,
            helpers: self.helpers_of(rank),
            stand_in: self.stand_in(rank).map(Box::new),
            stood_in: self.logged.stood_in.clone(),
        };
        let node = self.placement[rank as usize];
        self.send(node, &ToDaemon::Release { rank, go }).await;
    }

    /// What the replacement of `rank` stands in for, if it runs on a
    /// spare node: its node as the ranks know it, and where each node's
    /// manager listens now.
    fn stand_in(&self, rank: u32) -> Option<StandIn> {
        let known = *self.logged.known.get(rank as usize)?;
        self.logged.moved.get(&known)?;
        let mut managers = BTreeMap::new();
        for &node in self.logged.known.iter().collect::<BTreeSet<_>>() {
            let runs = self.logged.moved.get(&node).copied().unwrap_or(node);
            if let Some(m) = self
                .nodes
                .get(runs as usize)
                .and_then(|n| n.manager.clone())
            {
                managers.insert(node, m);
            }
        }
        Some(StandIn {
            node: known,
            placement: self.logged.known.clone(),
            managers,
        })
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
        // A replacement's own reason names it already.
        let reason = match reason.starts_with(&format!("rank {rank} ")) {
            true => reason,
            false => format!("rank {rank}: {reason}"),
        };
        self.fail(Failure::Fallback {
            reason,
            at_ns: now_ns(),
        })
        .await
    }
}
