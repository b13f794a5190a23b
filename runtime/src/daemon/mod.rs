//! The node daemon: starts and watches the rank processes of one node.
//!
//! A daemon connects to the root, then does what it is told: launch ranks,
//! roll them back and start replacements (`Reinit`), release them from the
//! world barrier (`Go`), let them exit (`Finish`). It learns of a rank's
//! death from the operating system (the rank is its child) and reports it.
//! It also watches the ranks that live: a rank whose heartbeats stop, that
//! does not join the runtime in time after it was started, or that does not
//! roll back in time after a recovery began, is killed (and so replaced); a
//! program that ends without ever joining stops the job with a clear error.
//! It keeps a few *standby* processes: started and connected ahead of time,
//! one of them becomes a failed rank's replacement without a process launch
//! on the recovery's critical path. The daemon dies with the root
//! (parent-death signal) and its processes die with it.

mod exits;
mod governor;
mod helpers;
mod lease;
mod manager;
mod orders;
mod procs;

use super::handoff::{self, Handoff, NodeSpec, Role};
use super::proto::{FromRank, Receiver, Sender, ToDaemon, ToRank, ToRoot};
use exits::{describe, Unjoined};
use frame::comm::net::Endpoint;
use frame::internals::auth::{self, Channel, Secret};
use procs::Proc;
use std::collections::HashMap;
use std::process::{ExitCode, ExitStatus};
use std::time::Duration;
use tokio::net::tcp::OwnedWriteHalf as RootWrite;
use tokio::net::unix::OwnedWriteHalf;
use tokio::sync::mpsc::{unbounded_channel, UnboundedSender};

/// Everything the daemon's main loop reacts to.
enum Event {
    Root(ToDaemon),
    RootGone,
    Hello {
        pid: u32,
        epoch: u64,
        conn: u64,
        tx: Sender<OwnedWriteHalf>,
    },
    Rank(u32, u64, FromRank),
    /// A process's control connection closed.
    Closed(u32, u64),
    Exit {
        pid: u32,
        status: std::io::Result<ExitStatus>,
    },
    /// A process that exited before its hello was seen is still unheard of.
    Unjoined(u32),
    Beat,
    /// The node's manager process ended.
    ManagerExit {
        pid: u32,
        status: std::io::Result<ExitStatus>,
    },
    /// The node's manager answered the daemon's question (or refused it).
    ManagerAnswered {
        pid: u32,
    },
}

/// Entry point of a daemon process (`FRAME_RT_ROLE=daemon`).
pub(crate) fn main() -> u8 {
    // Die with the root, whatever happens to it.
    let _ = rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL));
    // Its own problems are printed as they happen; `RUST_LOG` shows more.
    frame_log::init(frame_log::Style::Plain, "error");
    let started = if Handoff::on_stdin() {
        Handoff::read()
    } else {
        NodeSpec::from_env().and_then(|spec| {
            let secret = handoff::spec_security(&spec)?.secret.clone();
            Ok((spec, handoff::root_addr()?, secret))
        })
    };
    let (spec, root, secret) = match started {
        Ok(x) => x,
        Err(e) => {
            eprintln!("frame daemon: {e}");
            return 2;
        }
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("frame daemon: {e}");
            return 2;
        }
    };
    match rt.block_on(serve(spec, root, secret)) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("frame daemon: {e}");
            1
        }
    }
}

/// Runs the daemon (or the node's manager) if this process was started as
/// one; returns its exit code.
pub fn serve_if_daemon() -> Option<ExitCode> {
    match handoff::role() {
        Role::Daemon => Some(ExitCode::from(main())),
        Role::Manager => Some(crate::manager_process::main()),
        _ => None,
    }
}

struct Daemon {
    spec: NodeSpec,
    epoch: u64,
    procs: HashMap<u32, Proc>,
    events: UnboundedSender<Event>,
    socket: std::path::PathBuf,
    to_root: Sender<RootWrite>,
    /// How long it may go on without hearing from the root.
    lease: lease::Lease,
    /// When the lease was last passed on to the node's processes.
    lease_passed: Option<std::time::Instant>,
    shutting_down: bool,
    finishing: bool,
    /// Set once the program showed that it does not join the runtime: no
    /// more standby processes are started.
    program_broken: bool,
    /// Set at the job's first barrier release: every rank joined, so the
    /// program does join, and a process that does not is a failed one.
    program_joins: bool,
    /// The address table of the last release (see [`crate::proto::Table`]).
    table: Option<std::sync::Arc<Vec<frame::comm::net::Endpoint>>>,
    /// Processes that exited before their hello was seen, by pid.
    unjoined: HashMap<u32, Unjoined>,
    /// Processes that joined for one the daemon started (a program run
    /// under a wrapper: `bash -c`, `strace -f`, `time`): joiner -> started.
    joiners: HashMap<u32, u32>,
    timeout: Duration,
    /// The manager process, and how often it was restarted.
    manager: Option<u32>,
    manager_restarts: u32,
    /// Whether the manager answers.
    manager_watch: manager::Liveness,
    /// The job's secret (to ask the manager, and for the processes it starts).
    secret: Secret,
    /// On a host of its own: the listener managers of other hosts reach
    /// this node's manager on, handed to every manager process it starts.
    peers: Option<std::net::TcpListener>,
    /// The last commit note forwarded to the root (each is sent once).
    committed: Option<Option<u64>>,
    /// Helpers asked for and not made yet: each waits for a standby.
    waiting_help: std::collections::VecDeque<helpers::Helping>,
    /// The CPUs set to `recovery.idle_governor` while the node idles, and
    /// whether a virtual node said it leaves them alone.
    lowered: Option<governor::Lowered>,
    governor_said: bool,
    /// The ranks' CPU group on a crowded machine, when the root made one
    /// (see `crowding::group`).
    group: Option<crate::crowding::group::GroupEntry>,
}

async fn serve(
    mut spec: NodeSpec,
    root: std::net::SocketAddr,
    secret: Secret,
) -> std::io::Result<()> {
    // On a host of its own the node's directory is the configured one,
    // made private to the user here when it is a shared RAM disk.
    spec.node_dir =
        frame::internals::safefs::private_root(&spec.node_dir).map_err(std::io::Error::other)?;
    frame::internals::safefs::Dir::open_or_create(&spec.node_dir).map_err(std::io::Error::other)?;
    let open = || async {
        let s = tokio::net::TcpStream::connect(root).await?;
        s.set_nodelay(true)?;
        Ok(s)
    };
    let patience = spec.control_patience();
    let stream = auth::connect_retrying_within(open, &secret, Channel::Node, patience).await?;
    let (events, mut inbox) = unbounded_channel();
    // On a host of its own, the daemon keeps its sockets in a run directory
    // of its own, and ranks and the manager listen on the interface that
    // reaches the root.
    let (own_run, peers) = match spec.host {
        Some(_) => {
            let ip = stream.local_addr()?.ip();
            spec.bind = ip;
            let run = crate::rundir::make(None).map_err(std::io::Error::other)?;
            spec.run_dir = run.path.clone();
            let peers = std::net::TcpListener::bind((ip, 0))?;
            watch_stdin(events.clone());
            (Some(run), Some(peers))
        }
        None => (None, None),
    };
    let (read, write) = stream.into_split();
    let mut to_root = Sender::new(write);
    // Where other nodes' managers reach this node's: its TCP listener on a
    // host of its own, its socket otherwise.
    let manager = match peers.as_ref().map(std::net::TcpListener::local_addr) {
        Some(addr) => Endpoint::Tcp(addr?),
        None => Endpoint::Unix(manager::socket(&spec)),
    };
    to_root
        .send(&ToRoot::Hello {
            node: spec.node,
            pid: std::process::id(),
            ticket: spec.ticket,
            manager: Some(manager),
        })
        .await?;
    let lease = lease::Lease::new(
        Duration::from_millis(spec.lease_ms.max(1)),
        std::time::Instant::now(),
    );

    let socket = spec.run_dir.join(format!("node-{}.sock", spec.node));
    let listener = frame::comm::net::bind_private(&socket)?;
    let ev = events.clone();
    let manager_secret = secret.clone();
    tokio::spawn(async move {
        let mut next_conn = 0u64;
        let gate = auth::Gate::default();
        while let Ok((stream, _)) = listener.accept().await {
            let pass = gate.admit();
            next_conn += 1;
            tokio::spawn(process_connection(
                stream,
                pass,
                (next_conn, patience),
                ev.clone(),
                secret.clone(),
            ));
        }
    });
    let ev = events.clone();
    tokio::spawn(async move {
        let mut rx = Receiver::new(read);
        while let Ok(Some(msg)) = rx.next::<ToDaemon>().await {
            if ev.send(Event::Root(msg)).is_err() {
                return;
            }
        }
        let _ = ev.send(Event::RootGone);
    });
    let ev = events.clone();
    let period = Duration::from_millis(spec.heartbeat_ms.max(10));
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(period);
        // After a stall, one heartbeat says as much as a burst.
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if ev.send(Event::Beat).is_err() {
                return;
            }
        }
    });

    // Virtual nodes that crowd the machine share the group the root made.
    let group = (spec.cpu_group.as_deref())
        .filter(|_| crate::crowding::crowded(&spec))
        .and_then(|dir| crate::crowding::group::GroupEntry::new(dir).ok());
    let mut d = Daemon {
        group,
        timeout: Duration::from_millis(spec.rank_timeout_ms.max(1)),
        spec,
        epoch: 1,
        procs: HashMap::new(),
        events,
        socket,
        to_root,
        lease,
        lease_passed: None,
        shutting_down: false,
        finishing: false,
        program_broken: false,
        program_joins: false,
        table: None,
        committed: None,
        waiting_help: std::collections::VecDeque::new(),
        lowered: None,
        governor_said: false,
        unjoined: HashMap::new(),
        joiners: HashMap::new(),
        manager: None,
        manager_restarts: 0,
        manager_watch: manager::Liveness::default(),
        secret: manager_secret,
        peers,
    };
    let manager_socket = manager::socket(&d.spec);
    match manager::start(&d, &manager_socket, true) {
        Ok(pid) => d.manager = Some(pid),
        Err(e) => tracing::warn!(error = %e, "cannot start the node's manager"),
    }
    while let Some(event) = inbox.recv().await {
        if !d.handle(event).await? {
            break;
        }
    }
    for (pid, p) in &d.procs {
        p.signal(*pid, rustix::process::Signal::KILL);
    }
    if let Some(pid) = d.manager {
        procs::kill(pid);
    }
    let _ = std::fs::remove_file(&d.socket);
    let _ = std::fs::remove_file(&manager_socket);
    if own_run.is_some() {
        // The node directory goes too if the job left it empty.
        let _ = std::fs::remove_dir(&d.spec.node_dir);
    }
    drop(own_run);
    Ok(())
}

/// Reports the end of standard input (the launcher's connection: ssh or
/// srun ended, or the root closed it) as the root's.
fn watch_stdin(events: UnboundedSender<Event>) {
    let _ = std::thread::Builder::new()
        .name("frame-daemon-stdin".into())
        .spawn(move || {
            use std::io::Read;
            let mut sink = [0u8; 512];
            while matches!(std::io::stdin().read(&mut sink), Ok(n) if n > 0) {}
            let _ = events.send(Event::RootGone);
        });
}

/// What every process a daemon starts gets from the job: the launching
/// user's settings the spec carries, and the job's secret.
fn child_env<'c>(
    cmd: &'c mut tokio::process::Command,
    spec: &NodeSpec,
    secret: &Secret,
) -> &'c mut tokio::process::Command {
    for (k, v) in &spec.env {
        cmd.env(k, v);
    }
    cmd.env(frame::env::SECRET, secret.to_hex())
}

/// Reads one process's control connection: the job's handshake, its hello
/// (which must come from the process it names), then its messages.
async fn process_connection(
    mut stream: tokio::net::UnixStream,
    mut pass: auth::Pass,
    (conn, patience): (u64, Duration),
    ev: UnboundedSender<Event>,
    secret: Secret,
) {
    let Some(proved) = pass
        .hold(auth::accept_within(
            &mut stream,
            &secret,
            Channel::Rank,
            patience,
        ))
        .await
    else {
        return;
    };
    if let Err(e) = proved {
        tracing::warn!(error = %e, "dropping a rank connection that failed the job's handshake");
        return;
    }
    let peer = stream.peer_cred().ok().and_then(|c| c.pid());
    let (read, write) = stream.into_split();
    let mut rx = Receiver::new(read);
    let hello = pass
        .hold(tokio::time::timeout(patience, rx.next::<FromRank>()))
        .await;
    let (pid, epoch) = match hello {
        Some(Ok(Ok(Some(FromRank::Hello { pid, epoch, .. })))) => (pid, epoch),
        _ => return,
    };
    // Proved and introduced: no longer a pending handshake.
    drop(pass);
    if peer != Some(pid as i32) {
        tracing::warn!(claimed = pid, peer = ?peer, "dropping a rank connection that claims another process");
        return;
    }
    let tx = Sender::new(write);
    if ev
        .send(Event::Hello {
            pid,
            epoch,
            conn,
            tx,
        })
        .is_err()
    {
        return;
    }
    while let Ok(Some(msg)) = rx.next::<FromRank>().await {
        if ev.send(Event::Rank(pid, conn, msg)).is_err() {
            return;
        }
    }
    let _ = ev.send(Event::Closed(pid, conn));
}

impl Daemon {
    /// The process the daemon started that `pid` is, or descends from
    /// (recorded as its joiner); `None` for any other process.
    fn started_for(&mut self, pid: u32) -> Option<u32> {
        if self.procs.contains_key(&pid) {
            return Some(pid);
        }
        let started = procs::ancestors(pid).find(|a| {
            self.procs
                .get(a)
                .is_some_and(|p| !p.has_joined() && p.joiner.is_none())
        })?;
        self.joiners.insert(pid, started);
        Some(started)
    }

    /// Reacts to one event; returns `false` when the daemon should stop.
    async fn handle(&mut self, event: Event) -> std::io::Result<bool> {
        match event {
            Event::Root(msg) => return self.on_root_message(msg).await,
            Event::RootGone => {
                self.shutting_down = true;
                return Ok(false);
            }
            Event::Hello {
                pid: joiner,
                epoch,
                conn,
                mut tx,
            } => {
                let Some(pid) = self.started_for(joiner) else {
                    tracing::warn!(pid = joiner, "a process the daemon did not start, nor one of its descendants, tried to join");
                    return Ok(true);
                };
                if pid != joiner {
                    if let Some(p) = self.procs.get_mut(&pid) {
                        p.joiner = Some(joiner);
                    }
                }
                let current = self.epoch;
                if let Some((rank, incarnation, how)) = self.unjoined.remove(&pid) {
                    // It joined, then died: an ordinary failure.
                    self.report_exit(rank, incarnation, how, false).await?;
                }
                if let Some(p) = self.procs.get_mut(&pid) {
                    if p.rank.is_some() && current > epoch {
                        // A recovery began before this rank connected.
                        let _ = tx.send(&ToRank::Reinit { epoch: current }).await;
                    }
                    p.joined(conn, tx);
                    if p.rank.is_none() {
                        tracing::debug!(node = self.spec.node, pid, "standby process ready");
                        self.on_standby_joined(pid).await;
                    }
                }
            }
            Event::Rank(joiner, conn, msg) => {
                let pid = self.joiners.get(&joiner).copied().unwrap_or(joiner);
                let Some(p) = self.procs.get_mut(&pid).filter(|p| p.is_conn(conn)) else {
                    return Ok(true);
                };
                p.heard();
                if let Some(rank) = p.rank {
                    self.on_rank_message(pid, rank, msg).await?;
                } else if let Some(help) = p.helps {
                    self.on_helper_message(pid, help, msg).await?;
                }
            }
            Event::Closed(joiner, conn) => {
                // A program under a wrapper that left without finishing:
                // its wrapper may run on (`bash -c "prog; echo"`), so it
                // goes too, and its exit reports the rank's failure.
                if let Some(pid) = self.joiners.remove(&joiner) {
                    if let Some(p) = self.procs.get_mut(&pid).filter(|p| p.is_conn(conn)) {
                        p.joiner = None;
                        if !p.finishing && p.killed_for.is_none() {
                            p.killed_for = Some(format!(
                                "its program (pid {joiner}) closed its connection without finishing"
                            ));
                            procs::kill(pid);
                        }
                    }
                }
            }
            Event::Exit { pid, status } => {
                if let Some(joiner) = self.procs.get(&pid).and_then(|p| p.joiner) {
                    procs::kill(joiner);
                    self.joiners.remove(&joiner);
                }
                self.on_exit(pid, status).await?
            }
            Event::Unjoined(pid) => {
                if let Some((rank, _, how)) = self.unjoined.remove(&pid) {
                    self.program_broken = true;
                    self.to_root
                        .send(&ToRoot::NeverJoined { rank, how })
                        .await?;
                }
            }
            Event::ManagerExit { pid, status } => {
                if self.manager == Some(pid) {
                    self.manager = None;
                    if !self.shutting_down && self.manager_restarts < manager::MAX_RESTARTS {
                        // One write, so lines of other processes cannot cut it.
                        let line = format!(
                            "frame: node {}'s manager {}; restarting it (its promotions in flight are dropped)\n",
                            self.spec.node,
                            describe(&status)
                        );
                        let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
                        self.manager_restarts += 1;
                        let socket = manager::socket(&self.spec);
                        self.manager = manager::start(self, &socket, false).ok();
                    }
                }
            }
            Event::ManagerAnswered { pid } => self.manager_watch.answered(pid),
            Event::Beat => {
                let now = std::time::Instant::now();
                if let Some(silent) = self.lease.expired(now) {
                    self.lease_ran_out(silent);
                    return Ok(false);
                }
                self.enforce_deadlines();
                self.watch_manager();
                let progress = self
                    .procs
                    .values()
                    .filter(|p| p.rank.is_some())
                    .filter_map(|p| p.progress)
                    .min();
                let beat = self.lease.beat(now);
                self.to_root
                    .send(&ToRoot::Heartbeat { progress, beat })
                    .await?;
                self.pass_lease_on(now).await;
            }
        }
        Ok(true)
    }

    /// The lease ran out: nothing came from the root for `silent`. The
    /// node's processes stop with the daemon (the loop's end kills them),
    /// before the root may start their replacements.
    fn lease_ran_out(&mut self, silent: Duration) {
        if !self.shutting_down {
            // One write, so lines of other processes cannot cut it.
            let line = format!(
                "frame: node {}'s daemon (pid {}) heard nothing from the root for {:.1} s and its lease ran out (the root is gone, cut off, or gave the node up): stopping the node's ranks and manager\n",
                self.spec.node,
                std::process::id(),
                silent.as_secs_f64()
            );
            let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
        }
        self.shutting_down = true;
    }

    /// Gives every joined process of the node the rest of the daemon's
    /// lease, once per rank heartbeat period: a process that hears nothing
    /// more ends itself when it runs out (its daemon stopped, or lost the
    /// root). A process that does not read its connection is not waited
    /// for.
    async fn pass_lease_on(&mut self, now: std::time::Instant) {
        let period = self.spec.rank_heartbeat();
        if self
            .lease_passed
            .is_some_and(|t| now.duration_since(t) < period)
        {
            return;
        }
        self.lease_passed = Some(now);
        let ms = u64::try_from(self.lease.left(now).as_millis()).unwrap_or(u64::MAX);
        let lease = ToRank::Lease { ms };
        for p in self.procs.values_mut() {
            if let Some((_, tx)) = p.conn.as_mut() {
                let _ = tokio::time::timeout(Duration::from_millis(50), tx.send(&lease)).await;
            }
        }
    }

    /// Asks the manager whether it answers; kills one silent past the rank
    /// timeout (its exit restarts it).
    fn watch_manager(&mut self) {
        if self.shutting_down {
            return;
        }
        let Some(pid) = self.manager else { return };
        let socket = manager::socket(&self.spec);
        let silent =
            self.manager_watch
                .beat(pid, &socket, &self.secret, self.timeout, &self.events);
        if let Some(silent) = silent {
            // One write, so lines of other processes cannot cut it.
            let line = format!(
                "frame: node {}'s manager (pid {pid}) has not answered for {:.1} s (stopped or wedged); killing it\n",
                self.spec.node,
                silent.as_secs_f64()
            );
            let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
            procs::kill(pid);
        }
    }

    /// Kills the processes that missed a deadline (their exits report why).
    fn enforce_deadlines(&mut self) {
        if self.shutting_down || self.finishing {
            return;
        }
        let timeout = self.timeout;
        for (pid, p) in self.procs.iter_mut() {
            if let Some(why) = p.overdue(timeout) {
                tracing::warn!(pid, rank = ?p.rank, %why, "killing an unresponsive process");
                p.killed_for = Some(why);
                p.signal(*pid, rustix::process::Signal::KILL);
            }
        }
    }
}
