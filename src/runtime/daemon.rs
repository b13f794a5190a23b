//! The node daemon: starts and watches the rank processes of one node.
//!
//! A daemon connects to the root, then does what it is told: launch ranks,
//! roll them back and start replacements (`Reinit`), release them from the
//! world barrier (`Go`), let them exit (`Finish`). It learns of a rank's
//! death from the operating system (the rank is its child) and reports it.
//! It keeps a few *standby* processes: started and connected ahead of time,
//! one of them becomes a failed rank's replacement without a process launch
//! on the recovery's critical path. The daemon dies with the root
//! (parent-death signal) and its processes die with it.

use super::env::{self, NodeSpec, Role};
use super::proto::{now_ns, FromRank, Receiver, Sender, ToDaemon, ToRank, ToRoot};
use super::State;
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
    Exit {
        pid: u32,
        status: std::io::Result<ExitStatus>,
    },
    Beat,
}

/// One process of this node: a rank, or a standby (no rank yet).
struct Proc {
    rank: Option<u32>,
    /// Epoch in which it became its rank.
    incarnation: u64,
    conn: Option<(u64, Sender<OwnedWriteHalf>)>,
    finishing: bool,
}

fn describe(status: &std::io::Result<ExitStatus>) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status {
        Ok(s) => match (s.code(), s.signal()) {
            (Some(c), _) => format!("exited with status {c}"),
            (_, Some(sig)) => format!("killed by signal {sig}"),
            _ => "ended".into(),
        },
        Err(e) => format!("could not be waited for: {e}"),
    }
}

/// Entry point of a daemon process (`FRAME_RT_ROLE=daemon`).
pub(crate) fn main() -> ExitCode {
    // Die with the root, whatever happens to it.
    let _ = rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL));
    let started = NodeSpec::from_env().and_then(|spec| Ok((spec, env::root_addr()?)));
    let (spec, root) = match started {
        Ok(x) => x,
        Err(e) => {
            eprintln!("frame daemon: {e}");
            return ExitCode::from(2);
        }
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("frame daemon: {e}");
            return ExitCode::from(2);
        }
    };
    match rt.block_on(serve(spec, root)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("frame daemon: {e}");
            ExitCode::from(1)
        }
    }
}

/// Runs the daemon if this process was started as one; returns its exit code.
pub fn serve_if_daemon() -> Option<ExitCode> {
    (env::role() == Role::Daemon).then(main)
}

struct Daemon {
    spec: NodeSpec,
    epoch: u64,
    procs: HashMap<u32, Proc>,
    events: UnboundedSender<Event>,
    socket: std::path::PathBuf,
    to_root: Sender<RootWrite>,
    shutting_down: bool,
    finishing: bool,
}

async fn serve(spec: NodeSpec, root: std::net::SocketAddr) -> std::io::Result<()> {
    std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
        .create(&spec.node_dir)?;
    let stream = tokio::net::TcpStream::connect(root).await?;
    stream.set_nodelay(true)?;
    let (read, write) = stream.into_split();
    let mut to_root = Sender::new(write);
    to_root
        .send(&ToRoot::Hello {
            node: spec.node,
            pid: std::process::id(),
        })
        .await?;
    let (events, mut inbox) = unbounded_channel();

    let socket = spec.run_dir.join(format!("node-{}.sock", spec.node));
    let _ = std::fs::remove_file(&socket);
    let listener = tokio::net::UnixListener::bind(&socket)?;
    let ev = events.clone();
    tokio::spawn(async move {
        let mut next_conn = 0u64;
        while let Ok((stream, _)) = listener.accept().await {
            next_conn += 1;
            tokio::spawn(process_connection(stream, next_conn, ev.clone()));
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
        loop {
            tick.tick().await;
            if ev.send(Event::Beat).is_err() {
                return;
            }
        }
    });

    let mut d = Daemon {
        spec,
        epoch: 1,
        procs: HashMap::new(),
        events,
        socket,
        to_root,
        shutting_down: false,
        finishing: false,
    };
    while let Some(event) = inbox.recv().await {
        if !d.handle(event).await? {
            break;
        }
    }
    for pid in d.procs.keys() {
        kill(*pid);
    }
    let _ = std::fs::remove_file(&d.socket);
    Ok(())
}

/// Reads one process's control connection: its hello, then its messages.
async fn process_connection(stream: tokio::net::UnixStream, conn: u64, ev: UnboundedSender<Event>) {
    let (read, write) = stream.into_split();
    let mut rx = Receiver::new(read);
    let (pid, epoch) = match rx.next::<FromRank>().await {
        Ok(Some(FromRank::Hello { pid, epoch, .. })) => (pid, epoch),
        _ => return,
    };
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
}

impl Daemon {
    /// Reacts to one event; returns `false` when the daemon should stop.
    async fn handle(&mut self, event: Event) -> std::io::Result<bool> {
        match event {
            Event::Root(msg) => return self.on_root_message(msg).await,
            Event::RootGone => {
                self.shutting_down = true;
                return Ok(false);
            }
            Event::Hello {
                pid,
                epoch,
                conn,
                mut tx,
            } => {
                let current = self.epoch;
                if let Some(p) = self.procs.get_mut(&pid) {
                    if p.rank.is_some() && current > epoch {
                        // A recovery began before this rank connected.
                        let _ = tx.send(&ToRank::Reinit { epoch: current }).await;
                    }
                    p.conn = Some((conn, tx));
                }
            }
            Event::Rank(pid, conn, msg) => {
                let rank = self
                    .procs
                    .get(&pid)
                    .filter(|p| p.conn.as_ref().is_some_and(|(id, _)| *id == conn))
                    .and_then(|p| p.rank);
                if let Some(rank) = rank {
                    self.on_rank_message(pid, rank, msg).await?;
                }
            }
            Event::Exit { pid, status } => {
                let Some(p) = self.procs.remove(&pid) else {
                    return Ok(true);
                };
                match p.rank {
                    Some(rank) if p.finishing && status.as_ref().is_ok_and(|s| s.success()) => {
                        self.to_root.send(&ToRoot::Exited { rank }).await?;
                    }
                    Some(rank) if !self.shutting_down => {
                        let failed = ToRoot::Failed {
                            rank,
                            incarnation: p.incarnation,
                            how: describe(&status),
                            at_ns: now_ns(),
                        };
                        self.to_root.send(&failed).await?;
                    }
                    // A standby died: start another one.
                    None if !self.shutting_down && !self.finishing => self.fill_standby(),
                    _ => {}
                }
            }
            Event::Beat => self.to_root.send(&ToRoot::Heartbeat).await?,
        }
        Ok(true)
    }

    async fn on_root_message(&mut self, msg: ToDaemon) -> std::io::Result<bool> {
        match msg {
            ToDaemon::Launch {
                epoch,
                ranks,
                state,
            } => {
                self.epoch = epoch;
                for rank in ranks {
                    self.start(Some(rank), epoch, state).await?;
                }
                self.fill_standby();
            }
            ToDaemon::Reinit { epoch, spawn, .. } => {
                self.epoch = epoch;
                for p in self.procs.values_mut().filter(|p| p.rank.is_some()) {
                    if let Some((_, tx)) = p.conn.as_mut() {
                        let _ = tx.send(&ToRank::Reinit { epoch }).await;
                    }
                }
                for rank in spawn {
                    self.replace(rank, epoch).await?;
                }
            }
            ToDaemon::Go(go) => {
                for p in self.procs.values_mut().filter(|p| p.rank.is_some()) {
                    if let Some((_, tx)) = p.conn.as_mut() {
                        let _ = tx.send(&ToRank::Go { go: go.clone() }).await;
                    }
                }
                // Recovery is over: restock standbys off the critical path.
                self.fill_standby();
            }
            ToDaemon::Kill { rank } => {
                for (pid, _) in self.procs.iter().filter(|(_, p)| p.rank == Some(rank)) {
                    kill(*pid);
                }
            }
            ToDaemon::Finish => {
                self.finishing = true;
                for p in self.procs.values_mut() {
                    p.finishing = true;
                    if let Some((_, tx)) = p.conn.as_mut() {
                        let _ = tx.send(&ToRank::Finish).await;
                    }
                }
            }
            ToDaemon::Shutdown => {
                self.shutting_down = true;
                return Ok(false);
            }
        }
        Ok(true)
    }

    async fn on_rank_message(&mut self, pid: u32, rank: u32, msg: FromRank) -> std::io::Result<()> {
        let flush = matches!(msg, FromRank::Fired { .. } | FromRank::Abort { .. });
        let forward = match msg {
            FromRank::Hello { .. } => None,
            FromRank::Ready { epoch, endpoint } => Some(ToRoot::Ready {
                rank,
                epoch,
                endpoint,
            }),
            FromRank::Done { epoch } => Some(ToRoot::Done { rank, epoch }),
            FromRank::Fired { injection } => Some(ToRoot::Fired { injection }),
            FromRank::Abort { reason } => Some(ToRoot::Aborted { rank, reason }),
        };
        if let Some(m) = forward {
            self.to_root.send(&m).await?;
        }
        if flush {
            if let Some((_, tx)) = self.procs.get_mut(&pid).and_then(|p| p.conn.as_mut()) {
                let _ = tx.send(&ToRank::Flushed).await;
            }
        }
        Ok(())
    }

    /// Makes an idle standby rank `rank` in `epoch`, or starts a new process.
    async fn replace(&mut self, rank: u32, epoch: u64) -> std::io::Result<()> {
        let idle = self
            .procs
            .iter_mut()
            .find(|(_, p)| p.rank.is_none() && p.conn.is_some());
        if let Some((pid, p)) = idle {
            let pid = *pid;
            let sent = match p.conn.as_mut() {
                Some((_, tx)) => tx.send(&ToRank::Assign { rank, epoch }).await.is_ok(),
                None => false,
            };
            if sent {
                p.rank = Some(rank);
                p.incarnation = epoch;
                let at_ns = now_ns();
                return self
                    .to_root
                    .send(&ToRoot::Spawned { rank, epoch, at_ns })
                    .await;
            }
            // An unreachable standby is useless: drop it (its exit is ignored).
            kill(pid);
            self.procs.remove(&pid);
        }
        self.start(Some(rank), epoch, State::Restarted).await
    }

    /// Starts enough standby processes to have `spec.standby` of them.
    fn fill_standby(&mut self) {
        let have = self.procs.values().filter(|p| p.rank.is_none()).count();
        for _ in have..self.spec.standby {
            if let Err(e) = self.spawn_process(None, 0, State::Restarted) {
                eprintln!("frame daemon: cannot start a standby process: {e}");
                return;
            }
        }
    }

    /// Starts a rank process and reports it, or reports why it could not start.
    async fn start(&mut self, rank: Option<u32>, epoch: u64, state: State) -> std::io::Result<()> {
        let Some(r) = rank else { return Ok(()) };
        match self.spawn_process(rank, epoch, state) {
            Ok(()) => {
                let at_ns = now_ns();
                self.to_root
                    .send(&ToRoot::Spawned {
                        rank: r,
                        epoch,
                        at_ns,
                    })
                    .await
            }
            Err(e) => {
                let reason = format!(
                    "cannot start {}: {e}",
                    std::path::Path::new(&self.spec.program).display()
                );
                self.to_root
                    .send(&ToRoot::Aborted { rank: r, reason })
                    .await
            }
        }
    }

    /// Starts one process of the program in this node's process group: rank
    /// `rank`, or a standby when `rank` is `None`.
    fn spawn_process(
        &mut self,
        rank: Option<u32>,
        epoch: u64,
        state: State,
    ) -> std::io::Result<()> {
        let mut cmd = tokio::process::Command::new(&self.spec.program);
        let state_name = match (rank, state) {
            (None, _) => "standby",
            (Some(_), State::Restarted) => "restarted",
            _ => "new",
        };
        cmd.args(&self.spec.args)
            .env(env::ROLE, "rank")
            .env(env::SIZE, self.spec.size.to_string())
            .env(env::NODE, self.spec.node.to_string())
            .env(env::STATE, state_name)
            .env(env::DAEMON, &self.socket)
            .env(env::SPEC, self.spec.to_env())
            .env(env::NODE_DIR, &self.spec.node_dir)
            .env(env::LOCAL_DIR_KEY, &self.spec.node_dir)
            .env_remove(env::ROOT)
            .stdin(std::process::Stdio::null());
        match rank {
            Some(r) => cmd
                .env(env::RANK, r.to_string())
                .env(env::EPOCH, epoch.to_string()),
            None => cmd.env_remove(env::RANK).env_remove(env::EPOCH),
        };
        // SAFETY: only an async-signal-safe prctl between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                rustix::process::set_parent_process_death_signal(Some(
                    rustix::process::Signal::KILL,
                ))
                .map_err(std::io::Error::from)
            });
        }
        let mut child = cmd.spawn()?;
        let pid = child.id().unwrap_or(0);
        self.procs.insert(
            pid,
            Proc {
                rank,
                incarnation: epoch,
                conn: None,
                finishing: false,
            },
        );
        let ev = self.events.clone();
        tokio::spawn(async move {
            let status = child.wait().await;
            let _ = ev.send(Event::Exit { pid, status });
        });
        Ok(())
    }
}

fn kill(pid: u32) {
    if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
    }
}
