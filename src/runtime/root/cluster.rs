//! The root's control loop: membership, barriers, failures, injections.

use super::daemons::{self, RunDir};
use super::metrics::RecoveryRecord;
use super::{Launch, Outcome, RecoveryMode, RunError};
use crate::comm::net::Endpoint;
use crate::runtime::env::NodeSpec;
use crate::runtime::inject::{Target, Trigger};
use crate::runtime::placement::{self, NodeSlots};
use crate::runtime::proto::{now_ns, Go, Receiver, Sender, ToDaemon, ToRoot};
use crate::runtime::State;
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpListener;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

/// How long daemons have to connect after being started.
const STARTUP: Duration = Duration::from_secs(30);
/// How long a daemon has to exit after `Shutdown` before it is killed.
const STOP: Duration = Duration::from_secs(2);

enum Event {
    Daemon { node: u32, gen: u64, msg: ToRoot },
    Lost { node: u32, gen: u64 },
    Tick,
    Inject(u32),
    Signal(&'static str),
}

enum Failure {
    Rank {
        rank: u32,
        how: String,
        at_ns: u64,
    },
    Node {
        node: u32,
        why: &'static str,
        at_ns: u64,
    },
}

struct Node {
    alive: bool,
    /// Incremented whenever the node's daemon is replaced; events of older
    /// daemons are ignored.
    gen: u64,
    pid: Option<u32>,
    child: Option<tokio::process::Child>,
    tx: Option<Sender<OwnedWriteHalf>>,
    last_seen: Instant,
    stopping: bool,
    dir: PathBuf,
}

struct Cluster<'a> {
    launch: &'a Launch,
    run: RunDir,
    listener: TcpListener,
    addr: SocketAddr,
    events: UnboundedSender<Event>,
    nodes: Vec<Node>,
    placement: Vec<u32>,
    incarnation: Vec<u64>,
    epoch: u64,
    ready: Vec<Option<Endpoint>>,
    done: Vec<bool>,
    exited: Vec<bool>,
    finishing: bool,
    started: bool,
    open: Vec<RecoveryRecord>,
    outcome: Outcome,
    failures: usize,
    fired: BTreeSet<u32>,
    delayed: Vec<u32>,
    last_failed: (Vec<u32>, Vec<u32>),
    metrics: Option<std::fs::File>,
}

/// Runs a job from start to end.
pub(super) async fn drive(launch: &Launch) -> Result<Outcome, RunError> {
    let run = daemons::run_dir(launch.run_dir.as_deref())?;
    let listener = TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0)).await?;
    let addr = listener.local_addr()?;
    let (events, mut inbox) = unbounded_channel();
    spawn_timers(launch, &events)?;
    let metrics = match &launch.metrics {
        Some(p) => Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .map_err(|e| RunError::Startup(format!("metrics file {}: {e}", p.display())))?,
        ),
        None => None,
    };
    let total = launch.nodes + launch.spare_nodes;
    let size = launch.nodes * launch.ranks_per_node;
    let mut c = Cluster {
        launch,
        run,
        listener,
        addr,
        events,
        nodes: (0..total)
            .map(|n| Node {
                alive: true,
                gen: 0,
                pid: None,
                child: None,
                tx: None,
                last_seen: Instant::now(),
                stopping: false,
                dir: daemons::node_dir(launch, n as u32),
            })
            .collect(),
        placement: (0..size)
            .map(|r| (r / launch.ranks_per_node) as u32)
            .collect(),
        incarnation: vec![1; size],
        epoch: 1,
        ready: vec![None; size],
        done: vec![false; size],
        exited: vec![false; size],
        finishing: false,
        started: false,
        open: Vec::new(),
        outcome: Outcome::default(),
        failures: 0,
        fired: BTreeSet::new(),
        delayed: Vec::new(),
        last_failed: (Vec::new(), Vec::new()),
        metrics,
    };
    let result = c.run(&mut inbox).await;
    c.shutdown().await;
    result
}

/// Starts the tasks that turn time into events: heartbeat checks, timed
/// injections and termination signals.
fn spawn_timers(launch: &Launch, events: &UnboundedSender<Event>) -> Result<(), RunError> {
    let ev = events.clone();
    let period = launch.heartbeat;
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(period);
        loop {
            tick.tick().await;
            if ev.send(Event::Tick).is_err() {
                return;
            }
        }
    });
    for (idx, inj) in launch.injections.iter().enumerate() {
        if let Trigger::After(delay) = inj.trigger {
            let ev = events.clone();
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                let _ = ev.send(Event::Inject(idx as u32));
            });
        }
    }
    use tokio::signal::unix::{signal, SignalKind};
    for (kind, name) in [
        (SignalKind::interrupt(), "SIGINT"),
        (SignalKind::terminate(), "SIGTERM"),
        (SignalKind::hangup(), "SIGHUP"),
    ] {
        let mut sig = signal(kind).map_err(|e| RunError::Startup(e.to_string()))?;
        let ev = events.clone();
        tokio::spawn(async move {
            if sig.recv().await.is_some() {
                let _ = ev.send(Event::Signal(name));
            }
        });
    }
    Ok(())
}

impl Cluster<'_> {
    fn size(&self) -> usize {
        self.placement.len()
    }

    async fn run(&mut self, inbox: &mut UnboundedReceiver<Event>) -> Result<Outcome, RunError> {
        let all: Vec<u32> = (0..self.nodes.len() as u32).collect();
        self.start_daemons(&all).await?;
        self.launch_ranks(State::New).await;
        while let Some(event) = inbox.recv().await {
            if self.handle(event).await? {
                return Ok(std::mem::take(&mut self.outcome));
            }
        }
        Err(RunError::Startup("event loop ended".into()))
    }

    fn spec(&self, node: u32) -> NodeSpec {
        let l = self.launch;
        NodeSpec {
            node,
            size: self.size() as u32,
            run_dir: self.run.path.clone(),
            node_dir: self.nodes[node as usize].dir.clone(),
            program: l.program.clone().into_os_string(),
            args: l.args.clone(),
            transport: l.transport,
            injections: l
                .injections
                .iter()
                .enumerate()
                .filter(|(_, i)| !matches!(i.trigger, Trigger::After(_)))
                .map(|(idx, i)| (idx as u32, i.clone()))
                .collect(),
            heartbeat_ms: l.heartbeat.as_millis() as u64,
            standby: match l.recovery {
                // A job script has no processes waiting to replace others.
                RecoveryMode::Redeploy => 0,
                RecoveryMode::Online if l.standby == 0 => 0,
                RecoveryMode::Online if (node as usize) < l.nodes => l.standby,
                // A spare node may have to take a whole node's ranks at once.
                RecoveryMode::Online => l.ranks_per_node.max(l.standby),
            },
            launcher_pid: std::process::id(),
        }
    }

    /// Starts the daemons of `which` and waits until each has said hello.
    async fn start_daemons(&mut self, which: &[u32]) -> Result<(), RunError> {
        for &n in which {
            let spec = self.spec(n);
            let child = daemons::start(self.launch, &spec, self.addr).map_err(|e| {
                RunError::Startup(format!("cannot start the daemon of node {n}: {e}"))
            })?;
            let node = &mut self.nodes[n as usize];
            node.gen += 1;
            node.pid = child.id();
            node.child = Some(child);
            node.tx = None;
            node.stopping = false;
            node.last_seen = Instant::now();
        }
        let deadline = Instant::now() + STARTUP;
        while which.iter().any(|&n| self.nodes[n as usize].tx.is_none()) {
            let left = deadline.saturating_duration_since(Instant::now());
            let (stream, _) = tokio::time::timeout(left, self.listener.accept())
                .await
                .map_err(|_| RunError::Startup("daemons did not connect in time".into()))??;
            stream.set_nodelay(true)?;
            let (read, write) = stream.into_split();
            let mut rx = Receiver::new(read);
            let Ok(Some(ToRoot::Hello { node, .. })) = rx.next::<ToRoot>().await else {
                continue;
            };
            let Some(slot) = self.nodes.get_mut(node as usize).filter(|s| s.tx.is_none()) else {
                continue;
            };
            slot.tx = Some(Sender::new(write));
            let (gen, ev) = (slot.gen, self.events.clone());
            tokio::spawn(async move {
                while let Ok(Some(msg)) = rx.next::<ToRoot>().await {
                    if ev.send(Event::Daemon { node, gen, msg }).is_err() {
                        return;
                    }
                }
                let _ = ev.send(Event::Lost { node, gen });
            });
        }
        Ok(())
    }

    async fn send(&mut self, node: u32, msg: &ToDaemon) {
        if let Some(tx) = self.nodes[node as usize].tx.as_mut() {
            if let Err(e) = tx.send(msg).await {
                tracing::debug!(node, error = %e, "daemon unreachable");
            }
        }
    }

    async fn broadcast(&mut self, msg: &ToDaemon) {
        for n in 0..self.nodes.len() as u32 {
            if self.nodes[n as usize].alive {
                self.send(n, msg).await;
            }
        }
    }

    fn ranks_on(&self, node: u32) -> Vec<u32> {
        (0..self.size() as u32)
            .filter(|&r| self.placement[r as usize] == node)
            .collect()
    }

    /// Tells every live node to launch its ranks in the current epoch.
    async fn launch_ranks(&mut self, state: State) {
        for n in 0..self.nodes.len() as u32 {
            let ranks = self.ranks_on(n);
            if self.nodes[n as usize].alive && !ranks.is_empty() {
                let msg = ToDaemon::Launch {
                    epoch: self.epoch,
                    size: self.size() as u32,
                    ranks,
                    state,
                };
                self.send(n, &msg).await;
            }
        }
    }

    /// Reacts to one event; returns `true` when the job completed.
    async fn handle(&mut self, event: Event) -> Result<bool, RunError> {
        match event {
            Event::Daemon { node, gen, msg } => {
                if self.nodes[node as usize].gen != gen {
                    return Ok(false);
                }
                return self.on_daemon_message(node, msg).await;
            }
            Event::Lost { node, gen } => {
                let n = &self.nodes[node as usize];
                if n.gen == gen && n.alive && !n.stopping && !self.finishing {
                    self.fail(Failure::Node {
                        node,
                        why: "its daemon's connection broke",
                        at_ns: now_ns(),
                    })
                    .await?;
                }
            }
            Event::Tick => {
                let timeout = self.launch.heartbeat_timeout;
                let silent: Vec<u32> = (0..self.nodes.len() as u32)
                    .filter(|&n| {
                        let x = &self.nodes[n as usize];
                        x.alive && !x.stopping && x.last_seen.elapsed() > timeout
                    })
                    .collect();
                for node in silent {
                    if !self.finishing {
                        self.fail(Failure::Node {
                            node,
                            why: "its daemon stopped sending heartbeats",
                            at_ns: now_ns(),
                        })
                        .await?;
                    }
                }
            }
            Event::Inject(idx) => {
                if self.open.is_empty() && self.started && !self.finishing {
                    self.inject(idx).await;
                } else if !self.finishing {
                    self.delayed.push(idx);
                }
            }
            Event::Signal(name) => return Err(RunError::Signal(name)),
        }
        Ok(false)
    }

    async fn on_daemon_message(&mut self, node: u32, msg: ToRoot) -> Result<bool, RunError> {
        self.nodes[node as usize].last_seen = Instant::now();
        match msg {
            ToRoot::Hello { .. } | ToRoot::Heartbeat => {}
            ToRoot::Spawned { epoch, at_ns, .. } => {
                for rec in self.open.iter_mut().filter(|r| r.epoch == epoch) {
                    rec.replacements_started_ns = rec.replacements_started_ns.max(at_ns);
                }
            }
            ToRoot::Ready {
                rank,
                epoch,
                endpoint,
            } => {
                if epoch == self.epoch && (rank as usize) < self.size() {
                    self.ready[rank as usize] = Some(endpoint);
                    if self.ready.iter().all(Option::is_some) {
                        self.release().await;
                    }
                }
            }
            ToRoot::Done { rank, epoch } => {
                if epoch == self.epoch && (rank as usize) < self.size() {
                    self.done[rank as usize] = true;
                    if self.done.iter().all(|d| *d) && self.open.is_empty() {
                        self.finishing = true;
                        self.broadcast(&ToDaemon::Finish).await;
                    }
                }
            }
            ToRoot::Exited { rank } => {
                if let Some(e) = self.exited.get_mut(rank as usize) {
                    *e = true;
                }
                return Ok(self.finishing && self.exited.iter().all(|e| *e));
            }
            ToRoot::Failed {
                rank,
                incarnation,
                how,
                at_ns,
            } => {
                let current = self.incarnation.get(rank as usize) == Some(&incarnation)
                    && self.placement.get(rank as usize) == Some(&node);
                if current && !self.finishing {
                    self.fail(Failure::Rank { rank, how, at_ns }).await?;
                }
            }
            ToRoot::Aborted { rank, reason } => return Err(RunError::Aborted { rank, reason }),
            ToRoot::Fired { injection } => {
                self.fired.insert(injection);
            }
        }
        Ok(false)
    }

    /// Releases the world barrier of the current epoch.
    async fn release(&mut self) {
        let table = self.ready.iter().flatten().cloned().collect();
        let (failed_ranks, failed_nodes) = std::mem::take(&mut self.last_failed);
        let go = Go {
            epoch: self.epoch,
            table,
            nodes: self.placement.clone(),
            failed_ranks,
            failed_nodes,
            fired: self.fired.iter().copied().collect(),
        };
        self.broadcast(&ToDaemon::Go(go)).await;
        let at = now_ns();
        self.started = true;
        for mut rec in std::mem::take(&mut self.open) {
            rec.close(at);
            if let Some(f) = self.metrics.as_mut() {
                if let Err(e) = rec.write(f) {
                    eprintln!("frame: cannot write metrics: {e}");
                }
            }
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
                if rec.mode == RecoveryMode::Online {
                    "online"
                } else {
                    "redeploy"
                },
                rec.epoch
            );
            self.outcome.recoveries.push(rec);
        }
        for idx in std::mem::take(&mut self.delayed) {
            self.inject(idx).await;
        }
    }

    /// Fires a time-triggered injection.
    async fn inject(&mut self, idx: u32) {
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
                    self.send(node, &ToDaemon::Kill { rank }).await;
                }
            }
            Target::Nodes(nodes) => {
                for n in nodes {
                    let node = &self.nodes[n as usize];
                    if node.alive {
                        if let Some(pid) = node.pid {
                            daemons::kill_group(pid);
                        }
                    }
                }
            }
        }
    }

    /// Handles one failure: new placement, new epoch, REINIT (or relaunch).
    async fn fail(&mut self, failure: Failure) -> Result<(), RunError> {
        self.failures += 1;
        if self.failures > self.launch.max_failures {
            return Err(RunError::TooManyFailures(self.failures));
        }
        let (kind, at_ns, failed_ranks, failed_nodes) = match failure {
            Failure::Rank { rank, how, at_ns } => {
                eprintln!("frame: rank {rank} failed ({how})");
                ("rank", at_ns, vec![rank], vec![])
            }
            Failure::Node { node, why, at_ns } => {
                eprintln!("frame: node {node} failed ({why})");
                let n = &mut self.nodes[node as usize];
                n.alive = false;
                n.tx = None;
                if let Some(pid) = n.pid {
                    daemons::kill_group(pid);
                }
                // A dead node's local storage is gone with it.
                let _ = std::fs::remove_dir_all(&n.dir);
                ("node", at_ns, self.ranks_on(node), vec![node])
            }
        };
        let slots: Vec<NodeSlots> = self
            .nodes
            .iter()
            .enumerate()
            .map(|(id, n)| NodeSlots {
                id: id as u32,
                alive: n.alive,
                slots: self.launch.ranks_per_node,
            })
            .collect();
        let (placement, spawn) =
            placement::place(&slots, &self.placement, &failed_ranks).map_err(|nr| {
                RunError::NoSpare {
                    node: nr.node,
                    ranks: nr.ranks,
                }
            })?;
        self.placement = placement;
        self.epoch += 1;
        let size = self.size();
        self.ready = vec![None; size];
        self.done = vec![false; size];
        self.last_failed.0.extend(&failed_ranks);
        self.last_failed.1.extend(&failed_nodes);
        let mut rec = RecoveryRecord {
            failure: self.failures,
            mode: self.launch.recovery,
            kind: kind.into(),
            epoch: self.epoch,
            failed_ranks: failed_ranks.clone(),
            failed_nodes: failed_nodes.clone(),
            detected_ns: at_ns,
            reinit_sent_ns: 0,
            replacements_started_ns: 0,
            barrier_ns: 0,
            runtime_recovery_ms: 0.0,
        };
        // A recovery still open moves to the new epoch with this one.
        for open in &mut self.open {
            open.epoch = self.epoch;
        }
        match self.launch.recovery {
            RecoveryMode::Online => {
                for ranks in spawn.values() {
                    for &r in ranks {
                        self.incarnation[r as usize] = self.epoch;
                    }
                }
                rec.reinit_sent_ns = now_ns();
                for n in 0..self.nodes.len() as u32 {
                    if self.nodes[n as usize].alive {
                        let msg = ToDaemon::Reinit {
                            epoch: self.epoch,
                            failed_ranks: failed_ranks.clone(),
                            failed_nodes: failed_nodes.clone(),
                            spawn: spawn.get(&n).cloned().unwrap_or_default(),
                        };
                        self.send(n, &msg).await;
                    }
                }
                self.open.push(rec);
            }
            RecoveryMode::Redeploy => {
                rec.reinit_sent_ns = now_ns();
                self.open.push(rec);
                self.redeploy().await?;
            }
        }
        Ok(())
    }

    /// The baseline: stop every daemon and rank, start them all again.
    async fn redeploy(&mut self) -> Result<(), RunError> {
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
    async fn stop(&mut self, n: u32) {
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
        node.tx = None;
    }

    /// Stops every daemon (and so every rank).
    async fn shutdown(&mut self) {
        for n in 0..self.nodes.len() as u32 {
            self.nodes[n as usize].stopping = true;
            self.send(n, &ToDaemon::Shutdown).await;
        }
        for n in 0..self.nodes.len() as u32 {
            self.stop(n).await;
            // Node directories the job left empty go too.
            let _ = std::fs::remove_dir(&self.nodes[n as usize].dir);
        }
    }
}
