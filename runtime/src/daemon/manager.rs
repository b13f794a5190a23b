//! The node's checkpoint manager, as a child process of the daemon: started
//! with the node, restarted if it dies or stops answering (promotions in
//! flight are then lost and reported failed to the ranks; the levels keep
//! their previous checkpoints), and killed with the node. The daemon only
//! starts and watches it; what it does is the [`manager`](frame::internals::manager)
//! module's.
//!
//! Watching: every [`PING_EVERY`] the daemon asks the manager where no
//! promotion is (a status query, answered by its listener whatever its
//! worker is doing); a manager that has not answered within the rank
//! timeout (stopped, wedged) is killed, and restarted as if it had died.

use super::Event;
use crate::handoff::NodeSpec;
use frame::comm::net::Endpoint;
use frame::env;
use frame::internals::auth::Secret;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::sync::mpsc::UnboundedSender;

/// How often the daemon asks its manager whether it answers.
pub(super) const PING_EVERY: Duration = Duration::from_secs(1);

/// The daemon's watch on its manager: the question in flight, if any.
#[derive(Default)]
pub(super) struct Liveness {
    asked: Option<(u32, Instant)>,
    last: Option<Instant>,
}

impl Liveness {
    /// Called on every heartbeat with the manager's pid: asks it again
    /// when due; returns how long it has been silent when that is past
    /// `deadline` (the caller kills it).
    pub(super) fn beat(
        &mut self,
        pid: u32,
        socket: &Path,
        secret: &Secret,
        deadline: Duration,
        events: &UnboundedSender<Event>,
    ) -> Option<Duration> {
        let now = Instant::now();
        match self.asked {
            Some((asked, since)) if asked == pid => {
                let silent = now.duration_since(since);
                return (silent > deadline).then(|| {
                    self.asked = None;
                    silent
                });
            }
            _ => {}
        }
        if self
            .last
            .is_some_and(|l| now.duration_since(l) < PING_EVERY)
        {
            return None;
        }
        self.asked = Some((pid, now));
        self.last = Some(now);
        ping(pid, socket.to_path_buf(), secret.clone(), events.clone());
        None
    }

    /// The manager `pid` answered (or refused the connection: not
    /// listening yet, or gone, which its exit tells).
    pub(super) fn answered(&mut self, pid: u32) {
        if self.asked.is_some_and(|(a, _)| a == pid) {
            self.asked = None;
        }
    }
}

/// Asks the manager at `socket` a status question on a thread of its own
/// (a stopped manager never answers; the thread ends when the daemon
/// kills it and the connection breaks), and reports any answer.
fn ping(pid: u32, socket: PathBuf, secret: Secret, events: UnboundedSender<Event>) {
    let _ = std::thread::Builder::new()
        .name("frame-manager-ping".into())
        .spawn(move || {
            let asked =
                frame::internals::manager::Client::connect(&Endpoint::Unix(socket), &secret)
                    .and_then(|mut c| {
                        c.call(&frame::internals::manager::Request::Status {
                            job_id: String::new(),
                            keys: Vec::new(),
                        })
                    });
            if asked.is_ok() || asked.is_err_and(|e| e.kind() != std::io::ErrorKind::TimedOut) {
                let _ = events.send(Event::ManagerAnswered { pid });
            }
        });
}

/// Restarts allowed over a job (a manager that cannot start is not retried forever).
pub(super) const MAX_RESTARTS: u32 = 100;

/// The socket of the node's manager.
pub(super) fn socket(spec: &NodeSpec) -> PathBuf {
    spec.run_dir.join(format!("manager-{}.sock", spec.node))
}

/// Starts the manager process; its exit comes back as [`Event::ManagerExit`].
pub(super) fn start(daemon: &super::Daemon, socket: &Path, first: bool) -> std::io::Result<u32> {
    use std::os::fd::AsRawFd;
    let (spec, events, peers) = (&daemon.spec, &daemon.events, daemon.peers.as_ref());
    let exe = std::env::current_exe()?;
    let mut cmd = tokio::process::Command::new(exe);
    super::child_env(&mut cmd, spec, &daemon.secret)
        .env(env::ROLE, "manager")
        .env(env::NODE, spec.node.to_string())
        .env(env::NODE_DIR, &spec.node_dir)
        .env(env::MANAGER, socket)
        .env_remove(env::ROOT)
        .env_remove(env::CRASH_AT)
        .env_remove(env::MANAGER_FD)
        .stdin(std::process::Stdio::null());
    // Test hook: the first manager process kills or stops itself at a
    // crash point (on another host, the hook comes in the spec).
    let hook = env::var_os(env::MANAGER_CRASH_AT).or_else(|| {
        spec.env
            .iter()
            .find(|(k, _)| k == env::MANAGER_CRASH_AT)
            .map(|(_, v)| v.into())
    });
    if let (true, Some(at)) = (first, hook) {
        cmd.env(env::CRASH_AT, at);
    }
    let inherit = peers.map(|l| l.as_raw_fd());
    // The manager shares a crowded machine like a rank.
    let crowded = crate::crowding::crowded(spec);
    let group = daemon.group.clone();
    if let Some(fd) = inherit {
        cmd.env(env::MANAGER_FD, fd.to_string());
    }
    // SAFETY: only async-signal-safe calls between fork and exec (a prctl,
    // an fcntl on a descriptor the daemon keeps open meanwhile, a
    // get/setpriority, an open/write/close of the ranks' CPU group).
    unsafe {
        cmd.pre_exec(move || {
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
                .map_err(std::io::Error::from)?;
            if let Some(fd) = inherit {
                // The manager (and only it) inherits the peers' listener.
                let fd = std::os::fd::BorrowedFd::borrow_raw(fd);
                rustix::io::fcntl_setfd(fd, rustix::io::FdFlags::empty())
                    .map_err(std::io::Error::from)?;
            }
            if crowded {
                crate::crowding::lower_priority();
                if let Some(g) = &group {
                    let _ = g.join_self();
                }
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn()?;
    let pid = child.id().unwrap_or(0);
    let ev = events.clone();
    tokio::spawn(async move {
        let status = child.wait().await;
        let _ = ev.send(Event::ManagerExit { pid, status });
    });
    Ok(pid)
}
