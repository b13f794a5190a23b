//! The root's control loop: membership, barriers, failures, injections.
//!
//! `mod.rs` starts the job and dispatches events; `failover.rs` handles
//! failures (online and redeploy), barrier releases and injections.

mod failover;

use super::daemons::{self, RunDir};
use super::metrics::RecoveryRecord;
use super::{Launch, Outcome, RecoveryMode, RunError};
use crate::comm::net::Endpoint;
use crate::runtime::env::NodeSpec;
use crate::runtime::inject::Trigger;
use crate::runtime::proto::{now_ns, Receiver, Sender, ToDaemon, ToRoot};
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
    /// Background removals of dead nodes' directories.
    cleanup: Vec<tokio::task::JoinHandle<()>>,
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
        cleanup: Vec::new(),
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
}
