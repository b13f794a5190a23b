//! The node daemon: starts and watches the ranks of one node.
//!
//! A daemon connects to the root, then does what it is told: launch ranks,
//! roll them back and start replacements (`Reinit`), release them from the
//! world barrier (`Go`), let them exit (`Finish`). It learns of a rank's
//! death from the operating system (the rank is its child) and reports it.
//! It dies with the root (parent-death signal) and its ranks die with it.

use super::env::{self, NodeSpec, Role};
use super::proto::{now_ns, FromRank, Receiver, Sender, ToDaemon, ToRank, ToRoot};
use super::State;
use std::collections::HashMap;
use std::process::{ExitCode, ExitStatus};
use std::time::Duration;
use tokio::net::unix::OwnedWriteHalf;
use tokio::sync::mpsc::{unbounded_channel, UnboundedSender};

/// Everything the daemon's main loop reacts to.
enum Event {
    Root(ToDaemon),
    RootGone,
    RankHello {
        rank: u32,
        pid: u32,
        epoch: u64,
        conn: u64,
        tx: Sender<OwnedWriteHalf>,
    },
    Rank(u32, u64, FromRank),
    Exit {
        rank: u32,
        pid: u32,
        incarnation: u64,
        status: std::io::Result<ExitStatus>,
    },
    Beat,
}

/// One rank process of this node.
struct Child {
    pid: u32,
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
    let spec = match NodeSpec::from_env() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("frame daemon: {e}");
            return ExitCode::from(2);
        }
    };
    let root = match env::root_addr() {
        Ok(r) => r,
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

struct Daemon {
    spec: NodeSpec,
    epoch: u64,
    children: HashMap<u32, Child>,
    events: UnboundedSender<Event>,
    socket: std::path::PathBuf,
    shutting_down: bool,
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
            tokio::spawn(rank_connection(stream, next_conn, ev.clone()));
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
        children: HashMap::new(),
        events,
        socket,
        shutting_down: false,
    };
    while let Some(event) = inbox.recv().await {
        if !d.handle(event, &mut to_root).await? {
            break;
        }
    }
    d.kill_all();
    let _ = std::fs::remove_file(&d.socket);
    Ok(())
}

/// Reads one rank's control connection: its hello, then its messages.
async fn rank_connection(stream: tokio::net::UnixStream, conn: u64, ev: UnboundedSender<Event>) {
    let (read, write) = stream.into_split();
    let mut rx = Receiver::new(read);
    let (rank, pid, epoch) = match rx.next::<FromRank>().await {
        Ok(Some(FromRank::Hello { rank, pid, epoch })) => (rank, pid, epoch),
        _ => return,
    };
    let tx = Sender::new(write);
    if ev
        .send(Event::RankHello {
            rank,
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
        if ev.send(Event::Rank(rank, conn, msg)).is_err() {
            return;
        }
    }
}

impl Daemon {
    /// Reacts to one event; returns `false` when the daemon should stop.
    async fn handle(
        &mut self,
        event: Event,
        to_root: &mut Sender<tokio::net::tcp::OwnedWriteHalf>,
    ) -> std::io::Result<bool> {
        match event {
            Event::Root(ToDaemon::Launch {
                epoch,
                size: _,
                ranks,
                state,
            }) => {
                self.epoch = epoch;
                for rank in ranks {
                    self.spawn(rank, epoch, state, to_root).await?;
                }
            }
            Event::Root(ToDaemon::Reinit { epoch, spawn, .. }) => {
                self.epoch = epoch;
                for child in self.children.values_mut() {
                    if let Some((_, tx)) = child.conn.as_mut() {
                        let _ = tx.send(&ToRank::Reinit { epoch }).await;
                    }
                }
                for rank in spawn {
                    self.spawn(rank, epoch, State::Restarted, to_root).await?;
                }
            }
            Event::Root(ToDaemon::Go(go)) => {
                for child in self.children.values_mut() {
                    if let Some((_, tx)) = child.conn.as_mut() {
                        let _ = tx.send(&ToRank::Go { go: go.clone() }).await;
                    }
                }
            }
            Event::Root(ToDaemon::Kill { rank }) => {
                if let Some(c) = self.children.get(&rank) {
                    kill(c.pid);
                }
            }
            Event::Root(ToDaemon::Finish) => {
                for child in self.children.values_mut() {
                    child.finishing = true;
                    if let Some((_, tx)) = child.conn.as_mut() {
                        let _ = tx.send(&ToRank::Finish).await;
                    }
                }
            }
            Event::Root(ToDaemon::Shutdown) | Event::RootGone => {
                self.shutting_down = true;
                return Ok(false);
            }
            Event::RankHello {
                rank,
                pid,
                epoch,
                conn,
                mut tx,
            } => {
                if let Some(child) = self.children.get_mut(&rank).filter(|c| c.pid == pid) {
                    if self.epoch > epoch {
                        // A recovery began before this rank connected.
                        let _ = tx.send(&ToRank::Reinit { epoch: self.epoch }).await;
                    }
                    child.conn = Some((conn, tx));
                }
            }
            Event::Rank(rank, conn, msg) => {
                let current = self
                    .children
                    .get(&rank)
                    .is_some_and(|c| c.conn.as_ref().is_some_and(|(id, _)| *id == conn));
                if current {
                    self.on_rank_message(rank, msg, to_root).await?;
                }
            }
            Event::Exit {
                rank,
                pid,
                incarnation,
                status,
            } => {
                let Some(child) = self.children.get(&rank).filter(|c| c.pid == pid) else {
                    return Ok(true);
                };
                let clean = child.finishing && status.as_ref().is_ok_and(|s| s.success());
                self.children.remove(&rank);
                if clean {
                    to_root.send(&ToRoot::Exited { rank }).await?;
                } else if !self.shutting_down {
                    to_root
                        .send(&ToRoot::Failed {
                            rank,
                            incarnation,
                            how: describe(&status),
                            at_ns: now_ns(),
                        })
                        .await?;
                }
            }
            Event::Beat => to_root.send(&ToRoot::Heartbeat).await?,
        }
        Ok(true)
    }

    async fn on_rank_message(
        &mut self,
        rank: u32,
        msg: FromRank,
        to_root: &mut Sender<tokio::net::tcp::OwnedWriteHalf>,
    ) -> std::io::Result<()> {
        let flush = matches!(msg, FromRank::Fired { .. } | FromRank::Abort { .. });
        match msg {
            FromRank::Hello { .. } => {}
            FromRank::Ready { epoch, endpoint } => {
                to_root
                    .send(&ToRoot::Ready {
                        rank,
                        epoch,
                        endpoint,
                    })
                    .await?
            }
            FromRank::Done { epoch } => to_root.send(&ToRoot::Done { rank, epoch }).await?,
            FromRank::Fired { injection } => to_root.send(&ToRoot::Fired { injection }).await?,
            FromRank::Abort { reason } => to_root.send(&ToRoot::Aborted { rank, reason }).await?,
        }
        if flush {
            if let Some((_, tx)) = self.children.get_mut(&rank).and_then(|c| c.conn.as_mut()) {
                let _ = tx.send(&ToRank::Flushed).await;
            }
        }
        Ok(())
    }

    /// Starts rank `rank` as a child process, in this node's process group.
    async fn spawn(
        &mut self,
        rank: u32,
        epoch: u64,
        state: State,
        to_root: &mut Sender<tokio::net::tcp::OwnedWriteHalf>,
    ) -> std::io::Result<()> {
        let mut cmd = tokio::process::Command::new(&self.spec.program);
        cmd.args(&self.spec.args)
            .env(env::ROLE, "rank")
            .env(env::RANK, rank.to_string())
            .env(env::SIZE, self.spec.size.to_string())
            .env(env::NODE, self.spec.node.to_string())
            .env(env::EPOCH, epoch.to_string())
            .env(
                env::STATE,
                if state == State::Restarted {
                    "restarted"
                } else {
                    "new"
                },
            )
            .env(env::DAEMON, &self.socket)
            .env(env::SPEC, self.spec.to_env())
            .env(env::NODE_DIR, &self.spec.node_dir)
            .env(env::LOCAL_DIR_KEY, &self.spec.node_dir)
            .env_remove(env::ROOT)
            .stdin(std::process::Stdio::null());
        // SAFETY: only an async-signal-safe prctl between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                rustix::process::set_parent_process_death_signal(Some(
                    rustix::process::Signal::KILL,
                ))
                .map_err(std::io::Error::from)
            });
        }
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                let reason = format!(
                    "cannot start {}: {e}",
                    std::path::Path::new(&self.spec.program).display()
                );
                to_root.send(&ToRoot::Aborted { rank, reason }).await?;
                return Ok(());
            }
        };
        let pid = child.id().unwrap_or(0);
        let at_ns = now_ns();
        self.children.insert(
            rank,
            Child {
                pid,
                conn: None,
                finishing: false,
            },
        );
        let ev = self.events.clone();
        tokio::spawn(async move {
            let status = child.wait().await;
            let _ = ev.send(Event::Exit {
                rank,
                pid,
                incarnation: epoch,
                status,
            });
        });
        to_root.send(&ToRoot::Spawned { rank, epoch, at_ns }).await
    }

    fn kill_all(&mut self) {
        for c in self.children.values() {
            kill(c.pid);
        }
    }
}

fn kill(pid: u32) {
    if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
    }
}

/// Runs the daemon if this process was started as one; returns its exit code.
pub fn serve_if_daemon() -> Option<ExitCode> {
    (env::role() == Role::Daemon).then(main)
}
