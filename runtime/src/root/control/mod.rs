//! The root's control loop: membership, barriers, failures, injections.
//!
//! `mod.rs` starts the job and dispatches events; `join.rs` accepts the
//! daemons' connections (each must prove the job's secret); `link.rs` is
//! the root's end of a joined daemon's connection, and `liveness.rs` how
//! its silence is judged and its leases granted; `failover.rs`
//! handles failures (online and redeploy), barrier releases and injections;
//! `localised.rs` the logged recovery of one rank within an epoch, and
//! `team.rs` the helpers that share a replacement's recomputation.

mod failover;
mod join;
mod link;
mod liveness;
mod localised;
mod messages;
mod roll;
mod team;
mod verdict;

pub(super) use liveness::crowded_floor;

use super::daemons::{self, RunDir};
use super::{Launch, Outcome, RecoveryMode, RunError};
use crate::handoff::NodeSpec;
use crate::inject::Trigger;
use crate::proto::{self, now_ns, ToDaemon, ToRoot};
use crate::State;
use frame::comm::net::Endpoint;
use frame::comm::FailureTopology;
use frame::internals::auth::Secret;
use frame::metrics::{Record, RuntimeRecoveryRecord};
use roll::Roll;
use std::collections::BTreeSet;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

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
        why: String,
        at_ns: u64,
    },
    /// A logged recovery cannot go on: restart globally (not a new failure).
    Fallback {
        reason: String,
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
    /// The connection of its daemon, once it joined.
    link: Option<link::Link>,
    stopping: bool,
    dir: PathBuf,
    /// The slowest of its ranks' iteration, from its last heartbeat.
    progress: Option<u64>,
    /// The host it is, when the job's nodes are hosts.
    host: Option<String>,
    /// The root's ends of the launcher of a daemon on another host.
    remote: Option<super::remote::Link>,
    /// The address that host reaches the root at (found at its first start).
    reach: Option<SocketAddr>,
    /// Where the managers of other nodes reach its manager (its hello).
    manager: Option<Endpoint>,
}

impl Node {
    /// Where it is, for messages: ` on host h` or nothing.
    fn on_host(&self) -> String {
        self.host
            .as_ref()
            .map(|h| format!(" on host {h}"))
            .unwrap_or_default()
    }
}

struct Cluster<'a> {
    launch: &'a Launch,
    run: RunDir,
    secret: Secret,
    addr: SocketAddr,
    joins: UnboundedReceiver<join::Joined>,
    events: UnboundedSender<Event>,
    nodes: Vec<Node>,
    placement: Vec<u32>,
    incarnation: Vec<u64>,
    epoch: u64,
    /// Where every rank listens in this epoch, as far as the root knows:
    /// each rank's endpoint from its last ready message. A recovery clears
    /// the ranks that start again (new processes, new endpoints); the
    /// survivors keep theirs, so the world barrier is released once the
    /// restarted ranks are ready (see `failover`).
    ready: Roll<Endpoint>,
    /// The last epoch whose world barrier was released (0: none yet).
    released: u64,
    /// The ranks that finished this epoch's run.
    done: Roll<()>,
    /// The rank processes that exited at the job's end.
    exited: Roll<()>,
    finishing: bool,
    started: bool,
    open: Vec<RuntimeRecoveryRecord>,
    /// Messages read from the daemons so far.
    messages: u64,
    /// The root's CPU time (nanoseconds) and `messages` when the oldest
    /// recovery in `open` began.
    recovery_began: Option<(u64, u64)>,
    outcome: Outcome,
    failures: usize,
    fired: BTreeSet<u32>,
    delayed: Vec<u32>,
    /// Nodes this root killed (an injection): dead for certain, failed as
    /// one event once the injection fired (see `Cluster::take_down`).
    killed: Vec<u32>,
    /// Ranks and nodes failed since the last barrier release (each once).
    last_failed: FailureTopology,
    metrics: Option<std::fs::File>,
    /// Background removals of dead nodes' directories.
    cleanup: Vec<tokio::task::JoinHandle<()>>,
    /// When the job started, and when progress was last printed (with what).
    began: Instant,
    last_progress: (Instant, Option<u64>),
    /// The newest checkpoint the ranks reported committed (the job's
    /// evidence of progress that outlives every node's storage).
    committed: Option<u64>,
    /// Logged recoveries: see `localised.rs`.
    logged: localised::Logged,
    /// What decides that nodes are dead: see `verdict.rs`.
    verdicts: verdict::Verdicts,
    /// When the run was launched (what, with the epoch, fences the job's
    /// shared storage: see `frame::comm::RecoveryContext::launch`).
    launched_ns: u64,
    /// The CPU group of the ranks of virtual nodes crowding this machine
    /// (see `crate::crowding::group`).
    rank_group: Option<crate::crowding::group::RankGroup>,
}

/// A CPU group for the ranks when the job's virtual nodes crowd this
/// machine and the machine lets the root make one.
fn rank_group(launch: &Launch, size: usize) -> Option<crate::crowding::group::RankGroup> {
    if !launch.hosts.is_empty() || !crate::crowding::crowds(size) {
        return None;
    }
    match crate::crowding::group::RankGroup::create() {
        Ok(g) => Some(g),
        Err(e) => {
            tracing::debug!("the ranks share the launcher's CPU group: {e}");
            None
        }
    }
}

/// Runs a job from start to end.
pub(super) async fn drive(launch: &Launch) -> Result<Outcome, RunError> {
    let began = Instant::now();
    let total = launch.nodes + launch.spare_nodes;
    let size = launch.nodes * launch.ranks_per_node;
    let dirs = daemons::node_dirs(launch, total)?;
    let run = daemons::run_dir(launch.run_dir.as_deref())?;
    let secret = Secret::generate()?;
    // Daemons on other hosts cannot reach loopback: listen on every
    // interface, and tell each daemon the one on its route.
    let bind = match launch.bind {
        ip if ip.is_loopback() && !launch.hosts.is_empty() => {
            std::net::Ipv4Addr::UNSPECIFIED.into()
        }
        ip => ip,
    };
    let listener = TcpListener::bind((bind, 0))
        .await
        .map_err(|e| RunError::Startup(format!("cannot listen on {bind}: {e}")))?;
    let addr = listener.local_addr()?;
    let patience = liveness::first_lease(launch.heartbeat_timeout);
    let joins = join::accept_daemons(listener, secret.clone(), patience);
    let (events, mut inbox) = unbounded_channel();
    spawn_timers(launch, &events)?;
    let metrics = match &launch.metrics {
        Some(p) => Some(daemons::metrics_file(p)?),
        None => None,
    };
    let mut c = Cluster {
        launch,
        run,
        secret,
        addr,
        joins,
        events,
        nodes: (0..total)
            .map(|n| Node {
                alive: true,
                gen: 0,
                pid: None,
                child: None,
                link: None,
                stopping: false,
                dir: dirs[n].clone(),
                progress: None,
                host: launch.hosts.get(n).cloned(),
                remote: None,
                reach: None,
                manager: None,
            })
            .collect(),
        placement: (0..size)
            .map(|r| (r / launch.ranks_per_node) as u32)
            .collect(),
        incarnation: vec![1; size],
        epoch: 1,
        ready: Roll::new(size),
        released: 0,
        done: Roll::new(size),
        exited: Roll::new(size),
        finishing: false,
        started: false,
        open: Vec::new(),
        messages: 0,
        recovery_began: None,
        outcome: Outcome::default(),
        failures: 0,
        fired: BTreeSet::new(),
        delayed: Vec::new(),
        killed: Vec::new(),
        last_failed: FailureTopology::default(),
        metrics,
        cleanup: Vec::new(),
        began,
        last_progress: (began, None),
        committed: None,
        logged: localised::Logged::default(),
        verdicts: verdict::Verdicts::default(),
        launched_ns: now_ns(),
        rank_group: rank_group(launch, size),
    };
    let result = c.run(&mut inbox).await;
    c.shutdown().await;
    if let Some(group) = c.rank_group.take() {
        let _ = tokio::task::spawn_blocking(move || group.remove()).await;
    }
    if let Ok(outcome) = &result {
        // A logged recovery that fell back has two records.
        let n = outcome
            .recoveries
            .iter()
            .map(|r| r.failure)
            .collect::<BTreeSet<_>>()
            .len();
        eprintln!(
            "frame: job finished: {size} rank(s) on {} node(s){}, {n} failure(s) recovered, {:.2} s",
            launch.nodes,
            if launch.spare_nodes > 0 {
                format!(" + {} spare", launch.spare_nodes)
            } else {
                String::new()
            },
            began.elapsed().as_secs_f64()
        );
    }
    result
}

/// What a daemon on another host sets for its processes: the launching
/// user's `FRAME_*` settings, its log filter and the configuration file
/// (no launcher carries the environment over).
fn forwarded_env(launch: &Launch) -> Vec<(String, String)> {
    let mut vars: Vec<(String, String)> = frame::env::vars()
        .filter(|(k, _)| {
            (k.starts_with(frame::env::PREFIX) && !frame::env::RUNTIME.contains(&k.as_str()))
                || k == frame::env::LOG
        })
        .collect();
    if let Some(config) = launch.config.as_ref().and_then(|c| c.to_str()) {
        vars.retain(|(k, _)| k != frame::env::CONFIG);
        vars.push((frame::env::CONFIG.to_string(), config.to_string()));
    }
    vars
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
    /// Appends one line to the metrics file, if there is one.
    fn record(&mut self, record: Record) {
        if let Some(f) = self.metrics.as_mut() {
            if let Err(e) = f.write_all(&record.to_line()).and_then(|()| f.flush()) {
                eprintln!("frame: cannot write metrics: {e}");
            }
        }
    }

    fn size(&self) -> usize {
        self.placement.len()
    }

    /// Prints a progress line when it is due and the job moved on.
    fn report_progress(&mut self) {
        let every = self.launch.progress_every;
        if every.is_zero() || self.last_progress.0.elapsed() < every || self.finishing {
            return;
        }
        let slowest = self
            .nodes
            .iter()
            .enumerate()
            .filter(|(n, x)| x.alive && self.placement.contains(&(*n as u32)))
            .map(|(_, x)| x.progress)
            .min()
            .flatten();
        if slowest.is_some() && slowest != self.last_progress.1 {
            eprintln!(
                "frame: progress: iteration {} (slowest rank), {:.0} s",
                slowest.unwrap_or(0),
                self.began.elapsed().as_secs_f64()
            );
        }
        self.last_progress = (Instant::now(), slowest);
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
        let n = &self.nodes[node as usize];
        NodeSpec {
            node,
            size: self.size() as u32,
            ranks_per_node: u32::try_from(l.ranks_per_node).unwrap_or(u32::MAX),
            run_dir: self.run.path.clone(),
            node_dir: n.dir.clone(),
            host: n.host.clone(),
            env: match n.host {
                Some(_) => forwarded_env(l),
                None => Vec::new(),
            },
            ticket: n.gen + 1,
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
            rank_heartbeat_ms: liveness::rank_heartbeat(
                l.heartbeat,
                l.heartbeat_timeout,
                l.rank_timeout,
            )
            .as_millis() as u64,
            rank_timeout_ms: l.rank_timeout.as_millis() as u64,
            bind: l.bind,
            max_message: l.limits.max_message,
            max_queued: l.limits.max_queued,
            standby: match l.recovery {
                // A job script has no processes waiting to replace others.
                RecoveryMode::Redeploy => 0,
                _ if l.standby == 0 => 0,
                _ if (node as usize) < l.nodes => l.standby,
                // A spare node may have to take a whole node's ranks at once.
                RecoveryMode::Online | RecoveryMode::Logged | RecoveryMode::Cone => {
                    l.ranks_per_node.max(l.standby)
                }
            },
            log_limit: (l.recovery == RecoveryMode::Logged).then_some(l.log_limit),
            idle_governor: match l.recovery {
                RecoveryMode::Logged => l.idle_governor.clone(),
                _ => String::new(),
            },
            recovery_mode: match l.recovery {
                RecoveryMode::Logged => frame::config::RecoveryMode::Logged,
                RecoveryMode::Cone => frame::config::RecoveryMode::Cone,
                RecoveryMode::Online | RecoveryMode::Redeploy => {
                    frame::config::RecoveryMode::Global
                }
            }
            .name()
            .into(),
            restart_from: l.restart_from,
            launcher_pid: std::process::id(),
            lease_ms: liveness::first_lease(l.heartbeat_timeout).as_millis() as u64,
            launched_ns: self.launched_ns,
            // Twice the heartbeat timeout: a blip the heartbeats ride out
            // costs no connection either.
            lost_after_ms: 2 * l.heartbeat_timeout.as_millis() as u64,
            cpu_group: (self.rank_group.as_ref()).map(|g| g.dir().to_path_buf()),
        }
    }

    async fn send(&mut self, node: u32, msg: &ToDaemon) {
        match proto::encode(msg) {
            Ok(bytes) => self.send_encoded(node, bytes),
            Err(e) => tracing::warn!(node, error = %e, "cannot encode an order"),
        }
    }

    fn send_encoded(&mut self, node: u32, bytes: bytes::Bytes) {
        if let Some(link) = self.nodes[node as usize].link.as_ref() {
            if !link.send(bytes) {
                tracing::debug!(node, "daemon unreachable");
            }
        }
    }

    /// Sends `msg` to every live node, encoded once.
    async fn broadcast(&mut self, msg: &ToDaemon) {
        let bytes = match proto::encode(msg) {
            Ok(bytes) => bytes,
            Err(e) => return tracing::warn!(error = %e, "cannot encode an order"),
        };
        for n in 0..self.nodes.len() as u32 {
            if self.nodes[n as usize].alive {
                self.send_encoded(n, bytes.clone());
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

    /// Handles one event, then fails the nodes it killed (as one event);
    /// returns `true` when the job completed.
    async fn handle(&mut self, event: Event) -> Result<bool, RunError> {
        let ended = self.react(event).await?;
        for node in std::mem::take(&mut self.killed) {
            if self.nodes[node as usize].alive && !self.finishing {
                self.fail(Failure::Node {
                    node,
                    why: "the root killed it (an injection)".into(),
                    at_ns: now_ns(),
                })
                .await?;
            }
        }
        Ok(ended)
    }

    /// Reacts to one event; returns `true` when the job completed.
    async fn react(&mut self, event: Event) -> Result<bool, RunError> {
        match event {
            Event::Daemon { node, gen, msg } => {
                if self.nodes[node as usize].gen != gen {
                    return Ok(false);
                }
                self.messages += 1;
                return self.on_daemon_message(node, msg).await;
            }
            Event::Lost { node, gen } => self.on_lost(node, gen).await?,
            Event::Tick => {
                self.report_progress();
                self.judge().await?;
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
}
