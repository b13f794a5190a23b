//! Failures, barrier releases and fault injections.

use super::super::daemons;
use super::roll::Roll;
use super::{Cluster, Failure, STOP};
use crate::inject::Target;
use crate::placement::{self, NodeSlots};
use crate::proto::{now_ns, Go, Table, ToDaemon};
use crate::root::{RecoveryMode, RunError};
use crate::State;
use frame::comm::FailureTopology;
use frame::metrics::{process_cpu_ns, Record, RuntimeRecoveryRecord, RuntimeStartRecord};

impl Cluster<'_> {
    /// Releases the world barrier of the current epoch.
    pub(super) async fn release(&mut self) {
        let Some(endpoints) = self.ready.every() else {
            tracing::error!(
                epoch = self.epoch,
                "a release with ranks not ready: held back"
            );
            return;
        };
        let table = Table::Full(endpoints);
        let failed = std::mem::take(&mut self.last_failed);
        let go = Go {
            epoch: self.epoch,
            table,
            nodes: self.placement.clone(),
            failed,
            fired: self.fired.iter().copied().collect(),
            committed: self.committed,
            rejoin: false,
            helpers: Vec::new(),
            stand_in: None,
            stood_in: self.logged.stood_in.clone(),
        };
        self.broadcast(&ToDaemon::Go(go)).await;
        self.released = self.epoch;
        if !self.started {
            let at = now_ns();
            self.record(Record::RuntimeStart(RuntimeStartRecord {
                ranks: u32::try_from(self.size()).unwrap_or(u32::MAX),
                nodes: u32::try_from(self.launch.nodes).unwrap_or(u32::MAX),
                launched_ns: self.launched_ns,
                released_ns: at,
                startup_ms: at.saturating_sub(self.launched_ns) as f64 / 1e6,
                root_messages: self.messages,
            }));
        }
        self.started = true;
        // Every rank joined: the nodes' thresholds follow their rhythm.
        for link in self.nodes.iter().filter_map(|n| n.link.as_ref()) {
            link.liveness.settle();
        }
        // The ranks' promotions know them where they are now.
        self.logged.began(self.placement.clone());
        let open = std::mem::take(&mut self.open);
        self.close_records(open).await;
    }

    /// Opens the record of a recovery that began (the first one open
    /// starts the count of the root's CPU time and messages).
    pub(super) fn open_record(&mut self, rec: RuntimeRecoveryRecord) {
        if self.open.is_empty() {
            self.recovery_began = Some((process_cpu_ns(), self.messages));
        }
        self.open.push(rec);
    }

    /// Closes the records of recoveries that just completed (writes them
    /// to the metrics file, prints them), then fires the injections that
    /// waited for them.
    pub(super) async fn close_records(&mut self, records: Vec<RuntimeRecoveryRecord>) {
        let at = now_ns();
        let (cpu, messages) = match self.recovery_began {
            Some((cpu, messages)) => (
                process_cpu_ns().saturating_sub(cpu),
                self.messages - messages,
            ),
            None => (0, 0),
        };
        if self.open.is_empty() {
            self.recovery_began = None;
        }
        for mut rec in records {
            rec.close(at);
            rec.root_cpu_ms = cpu as f64 / 1e6;
            rec.root_messages = messages;
            self.record(Record::RuntimeRecovery(rec.clone()));
            eprintln!(
                "frame: recovered from failure {} ({} {:?}) in {:.2} ms ({} recovery, epoch {})",
                rec.failure,
                rec.kind,
                if rec.kind == "node" {
                    &rec.failed_nodes
                } else {
                    &rec.failed_ranks
                },
                rec.runtime_recovery_ms,
                rec.mode,
                rec.epoch
            );
            self.outcome.recoveries.push(rec);
        }
        if self.open.is_empty() {
            for idx in std::mem::take(&mut self.delayed) {
                self.inject(idx).await;
            }
        }
    }

    /// Fires a time-triggered injection.
    pub(super) async fn inject(&mut self, idx: u32) {
        if !self.fired.insert(idx) {
            return;
        }
        let Some(inj) = self.launch.injections.get(idx as usize) else {
            return;
        };
        eprintln!("frame: injecting {inj}");
        match inj.target.clone() {
            Target::Ranks(ranks) => {
                for rank in ranks {
                    let node = self.placement[rank as usize];
                    let action = inj.action;
                    self.send(node, &ToDaemon::Kill { rank, action }).await;
                }
            }
            Target::Nodes(nodes) => self.take_down_injected(nodes, inj.action).await,
        }
    }

    /// Takes down the nodes an injection names; those this root killed
    /// fail together once the event that fired it is handled.
    async fn take_down_injected(&mut self, nodes: Vec<u32>, action: crate::inject::Action) {
        for n in nodes {
            if self.take_down(n, action).await {
                self.killed.push(n);
            }
        }
    }

    /// Kills (or stops) node `n`: its daemon's process group here, or, on
    /// another host, everything its daemon runs there. True when the node
    /// is dead for certain: this root killed its process group (the nodes
    /// an injection kills together then fail as one event, whichever
    /// connection's end this root would read first).
    pub(super) async fn take_down(&mut self, n: u32, action: crate::inject::Action) -> bool {
        let node = &self.nodes[n as usize];
        if !node.alive {
            return false;
        }
        match (&node.host, node.pid) {
            (Some(_), _) => {
                self.send(n, &ToDaemon::Die { action }).await;
                false
            }
            (None, Some(pid)) => {
                daemons::signal_group(pid, action.signal());
                action == crate::inject::Action::Kill
            }
            (None, None) => false,
        }
    }

    /// A node injection fired by a rank at an iteration names one event:
    /// the rank took its own node down; the root takes the other nodes it
    /// names at once, rather than leaving each to its own ranks' timing.
    pub(super) async fn fire_other_nodes(&mut self, idx: u32) {
        let Some(inj) = self.launch.injections.get(idx as usize) else {
            return;
        };
        if let Target::Nodes(nodes) = inj.target.clone() {
            self.take_down_injected(nodes, inj.action).await;
        }
    }

    /// Handles one failure: new placement, new epoch, REINIT (or relaunch).
    pub(super) async fn fail(&mut self, failure: Failure) -> Result<(), RunError> {
        if let Failure::Node { node, why, .. } = &failure {
            if self.ranks_on(*node).is_empty() {
                // A spare node that ran nothing yet: one spare fewer.
                eprintln!("frame: spare node {node} died ({why}); it ran no ranks");
                self.bury(*node);
                return Ok(());
            }
        }
        if !matches!(failure, Failure::Fallback { .. }) {
            self.failures += 1;
            if self.failures > self.launch.max_failures {
                return Err(RunError::TooManyFailures(self.failures));
            }
        }
        let fallback = match (&failure, self.launch.recovery) {
            (Failure::Fallback { reason, .. }, _) => Some(reason.clone()),
            (_, RecoveryMode::Logged) => match self.logged_refusal(&failure) {
                None => return self.replace_logged(failure).await,
                Some(why) => Some(why),
            },
            _ => None,
        };
        let replaced_already = matches!(failure, Failure::Fallback { .. });
        let (kind, at_ns, failed_ranks, failed_nodes) = match failure {
            Failure::Fallback { at_ns, .. } => {
                let (ranks, nodes) = self.logged.replaced();
                let kind = if nodes.is_empty() { "rank" } else { "node" };
                (kind, at_ns, ranks, nodes)
            }
            Failure::Rank { rank, how, at_ns } => {
                eprintln!("frame: rank {rank} died ({how})");
                ("rank", at_ns, vec![rank], vec![])
            }
            Failure::Node { node, why, at_ns } => {
                eprintln!("frame: node {node} died ({why})");
                self.bury(node);
                ("node", at_ns, self.ranks_on(node), vec![node])
            }
        };
        // A fallback's ranks were replaced already: nobody to start.
        let dead: &[u32] = if replaced_already { &[] } else { &failed_ranks };
        let (placement, spawn) = self.place(dead, None)?;
        self.placement = placement;
        self.epoch += 1;
        let size = self.size();
        // The ranks that start again get new endpoints; the survivors keep
        // theirs, and the release does not wait for them to roll back: the
        // order to roll back reaches each before the release, on the same
        // connection, and a survivor reads the release once it is back at
        // the barrier (its new peers' messages wait for it there). A
        // redeployed job starts every process again.
        if self.launch.recovery == RecoveryMode::Redeploy {
            self.ready = Roll::new(size);
        }
        for &r in &failed_ranks {
            self.ready.clear(r as usize);
        }
        self.done = Roll::new(size);
        self.last_failed.ranks.extend(&failed_ranks);
        self.last_failed.nodes.extend(&failed_nodes);
        if let Some(why) = &fallback {
            eprintln!("frame: restarting globally: {why}");
        }
        // Logged recoveries start again after the next checkpoint.
        self.logged.restarted(self.committed);
        let mode = match self.launch.recovery {
            RecoveryMode::Logged => RecoveryMode::Online,
            other => other,
        };
        let mut rec = RuntimeRecoveryRecord {
            failure: self.failures,
            mode: mode.name().into(),
            kind: kind.into(),
            epoch: self.epoch,
            failed_ranks: failed_ranks.clone(),
            failed_nodes: failed_nodes.clone(),
            detected_ns: at_ns,
            fallback,
            ..RuntimeRecoveryRecord::default()
        };
        self.note_silence(&mut rec);
        // A recovery still open moves to the new epoch with this one.
        for open in &mut self.open {
            open.epoch = self.epoch;
        }
        match mode {
            RecoveryMode::Online | RecoveryMode::Logged | RecoveryMode::Cone => {
                for ranks in spawn.values() {
                    for &r in ranks {
                        self.incarnation[r as usize] = self.epoch;
                    }
                }
                rec.reinit_sent_ns = now_ns();
                // The nodes that start replacements first: the release
                // waits for those alone.
                let (first, then): (Vec<u32>, Vec<u32>) =
                    (0..self.nodes.len() as u32).partition(|n| spawn.contains_key(n));
                for n in first.into_iter().chain(then) {
                    if self.nodes[n as usize].alive {
                        let msg = ToDaemon::Reinit {
                            epoch: self.epoch,
                            failed: FailureTopology {
                                ranks: failed_ranks.iter().copied().collect(),
                                nodes: failed_nodes.iter().copied().collect(),
                            },
                            spawn: spawn.get(&n).cloned().unwrap_or_default(),
                        };
                        self.send(n, &msg).await;
                    }
                }
                self.open_record(rec);
            }
            RecoveryMode::Redeploy => {
                rec.reinit_sent_ns = now_ns();
                self.open_record(rec);
                self.redeploy().await?;
            }
        }
        Ok(())
    }

    /// Node `node` died: it is marked so, whatever of it still runs is
    /// killed, and its local storage removed.
    pub(super) fn bury(&mut self, node: u32) {
        let n = &mut self.nodes[node as usize];
        n.alive = false;
        n.link = None;
        // On another host, the end of its standard input stops whatever of
        // the node still runs.
        n.remote = None;
        if let Some(pid) = n.pid {
            daemons::kill_group(pid);
        }
        // A dead node's local storage is gone with it (removed in the
        // background: it is not on the recovery's critical path; another
        // host's is out of reach, and gone with the host).
        if n.host.is_none() {
            let dir = n.dir.clone();
            self.cleanup.push(tokio::task::spawn_blocking(move || {
                let _ = std::fs::remove_dir_all(dir);
            }));
        }
    }

    /// Where every rank runs once `dead` ranks start again (`dying`: a
    /// node to count as dead already), and which node starts which.
    pub(super) fn place(
        &self,
        dead: &[u32],
        dying: Option<u32>,
    ) -> Result<(Vec<u32>, placement::Spawns), RunError> {
        let slots: Vec<NodeSlots> = self
            .nodes
            .iter()
            .enumerate()
            .map(|(id, n)| NodeSlots {
                id: id as u32,
                alive: n.alive && dying != Some(id as u32),
                slots: self.launch.ranks_per_node,
            })
            .collect();
        placement::place(&slots, &self.placement, dead).map_err(|nr| RunError::NoSpare {
            node: nr.node,
            ranks: nr.ranks,
        })
    }

    /// The baseline: stop every daemon and rank, start them all again.
    pub(super) async fn redeploy(&mut self) -> Result<(), RunError> {
        let alive: Vec<u32> = (0..self.nodes.len() as u32)
            .filter(|&n| self.nodes[n as usize].alive)
            .collect();
        for &n in &alive {
            self.nodes[n as usize].stopping = true;
            self.send(n, &ToDaemon::Shutdown).await;
        }
        for &n in &alive {
            self.stop(n).await;
        }
        self.incarnation = vec![self.epoch; self.size()];
        self.start_daemons(&alive).await?;
        self.launch_ranks(State::New).await;
        Ok(())
    }

    /// Waits for node `n`'s daemon to exit, killing its group if it lingers.
    pub(super) async fn stop(&mut self, n: u32) {
        let node = &mut self.nodes[n as usize];
        if let Some(mut child) = node.child.take() {
            if tokio::time::timeout(STOP, child.wait()).await.is_err() {
                if let Some(pid) = node.pid {
                    daemons::kill_group(pid);
                }
                let _ = child.wait().await;
            }
        }
        if let Some(pid) = node.pid {
            daemons::kill_group(pid);
        }
        node.link = None;
        node.remote = None;
    }

    /// Stops every daemon (and so every rank).
    pub(super) async fn shutdown(&mut self) {
        for task in std::mem::take(&mut self.cleanup) {
            let _ = task.await;
        }
        for n in 0..self.nodes.len() as u32 {
            self.nodes[n as usize].stopping = true;
            self.send(n, &ToDaemon::Shutdown).await;
        }
        for n in 0..self.nodes.len() as u32 {
            self.stop(n).await;
            // Node directories the job left empty go too (a daemon on
            // another host removes its own).
            if self.nodes[n as usize].host.is_none() {
                let _ = std::fs::remove_dir(&self.nodes[n as usize].dir);
            }
        }
    }
}
