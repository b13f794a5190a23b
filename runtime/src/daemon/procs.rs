//! The daemon's processes: starting ranks and standbys, assigning a standby
//! to a failed rank, and the deadlines each process must meet.

use super::{Daemon, Event};
use crate::proto::{now_ns, Sender, ToRank, ToRoot};
use crate::State;
use frame::env;
use std::time::{Duration, Instant};
use tokio::net::unix::OwnedWriteHalf;

/// One process of this node: a rank, or a standby (no rank yet).
pub(super) struct Proc {
    pub(super) rank: Option<u32>,
    /// Epoch in which it became its rank.
    pub(super) incarnation: u64,
    pub(super) conn: Option<(u64, Sender<OwnedWriteHalf>)>,
    pub(super) finishing: bool,
    /// When the process was started.
    started: Instant,
    /// When it was last heard from.
    last_seen: Instant,
    /// It must be ready in this epoch by then (after a recovery began, or
    /// after a standby was assigned a rank).
    pub(super) rejoin_by: Option<(Instant, u64)>,
    /// Why the daemon killed it, if it did.
    pub(super) killed_for: Option<String>,
    /// The last iteration its program reported.
    pub(super) progress: Option<u64>,
    /// The descendant that joined for it, when it is a wrapper.
    pub(super) joiner: Option<u32>,
    /// The team it helps, when it is a helper.
    pub(super) helps: Option<super::helpers::Helping>,
    /// It holds the address table the daemon was last released with (so
    /// the next release sends it only the changes).
    pub(super) holds_table: bool,
    /// A standby on a crowded machine, still at the daemon's priority:
    /// lowered once released as a rank or made a helper
    /// ([`Daemon::demote`]).
    pub(super) prompt: bool,
    /// Where this process told the root it listens, and whether the root
    /// holds it (see [`Reported`]).
    pub(super) reported: Reported,
}

/// What the root knows of where a process listens. A ready message it
/// reads in an older epoch than its own is dropped, so the daemon counts
/// an endpoint as held only once a release follows it: the root released
/// an epoch only when it held every rank's endpoint, and forgets a rank's
/// only when the rank fails (then its daemon hears of it in the order to
/// roll back).
#[derive(Debug, Default)]
pub(super) enum Reported {
    /// Nothing, or the root forgot it.
    #[default]
    Nothing,
    /// Sent, not confirmed by a release yet.
    Sent(frame::comm::net::Endpoint),
    /// Held by the root: a ready message with it again says nothing new.
    Held(frame::comm::net::Endpoint),
}

impl Reported {
    /// Whether the root holds `endpoint` as this process's.
    pub(super) fn holds(&self, endpoint: &frame::comm::net::Endpoint) -> bool {
        matches!(self, Self::Held(e) if e == endpoint)
    }

    /// A release followed: what was sent is held.
    pub(super) fn released(&mut self) {
        *self = match std::mem::take(self) {
            Self::Sent(e) | Self::Held(e) => Self::Held(e),
            Self::Nothing => Self::Nothing,
        };
    }
}

impl Proc {
    fn new(rank: Option<u32>, incarnation: u64) -> Self {
        let now = Instant::now();
        Self {
            rank,
            incarnation,
            conn: None,
            finishing: false,
            started: now,
            last_seen: now,
            rejoin_by: None,
            killed_for: None,
            progress: None,
            joiner: None,
            helps: None,
            holds_table: false,
            prompt: false,
            reported: Reported::Nothing,
        }
    }

    /// Sends `sig` to the process started as `pid` and to the descendant
    /// that joined for it.
    pub(super) fn signal(&self, pid: u32, sig: rustix::process::Signal) {
        if let Some(j) = self.joiner {
            signal(j, sig);
        }
        signal(pid, sig);
    }

    /// The process connected and said hello on connection `conn`.
    pub(super) fn joined(&mut self, conn: u64, tx: Sender<OwnedWriteHalf>) {
        self.conn = Some((conn, tx));
        self.heard();
    }

    /// Whether it ever joined the runtime.
    pub(super) fn has_joined(&self) -> bool {
        self.conn.is_some()
    }

    /// Whether `conn` is its current connection.
    pub(super) fn is_conn(&self, conn: u64) -> bool {
        self.conn.as_ref().is_some_and(|(id, _)| *id == conn)
    }

    /// Something arrived from it.
    pub(super) fn heard(&mut self) {
        self.last_seen = Instant::now();
    }

    /// It is ready in `epoch`.
    pub(super) fn rolled_back(&mut self, epoch: u64) {
        if self.rejoin_by.is_some_and(|(_, e)| epoch >= e) {
            self.rejoin_by = None;
        }
    }

    /// Why it must be killed now, if it missed a deadline.
    pub(super) fn overdue(&self, timeout: Duration) -> Option<String> {
        if self.killed_for.is_some() || self.finishing {
            return None;
        }
        let secs = humantime::format_duration(timeout);
        if !self.has_joined() {
            return (self.started.elapsed() > timeout)
                .then(|| format!("did not join the runtime within {secs} of its start"));
        }
        if self.last_seen.elapsed() > timeout {
            return Some(format!("stopped responding (no heartbeat for {secs})"));
        }
        if self.rejoin_by.is_some_and(|(by, _)| Instant::now() > by) {
            return Some(format!(
                "did not roll back within {secs} after the recovery began (a long stretch without calls into the runtime?)"
            ));
        }
        None
    }
}

/// Most ancestors looked at for a joining process.
const MAX_DEPTH: usize = 32;

/// The ancestors of `pid`, nearest first (from `/proc`; at most
/// [`MAX_DEPTH`], stopping at the first this user does not own).
pub(super) fn ancestors(pid: u32) -> impl Iterator<Item = u32> {
    let me = frame::internals::safefs::my_uid();
    std::iter::successors(parent(pid, me), move |p| parent(*p, me)).take(MAX_DEPTH)
}

/// The parent of `pid`, if `pid` is owned by `uid` and has one.
fn parent(pid: u32, uid: u32) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let dir = format!("/proc/{pid}");
    if std::fs::metadata(&dir).ok()?.uid() != uid {
        return None;
    }
    let stat = std::fs::read_to_string(format!("{dir}/stat")).ok()?;
    // The name in parentheses may hold anything: the fields follow the last ')'.
    let ppid: u32 = stat
        .rsplit(')')
        .next()?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    (ppid > 1).then_some(ppid)
}

/// SIGKILLs process `pid`.
pub(super) fn kill(pid: u32) {
    signal(pid, rustix::process::Signal::KILL);
}

/// Sends `sig` to process `pid`.
pub(super) fn signal(pid: u32, sig: rustix::process::Signal) {
    if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
        let _ = rustix::process::kill_process(pid, sig);
    }
}

impl Daemon {
    /// Makes an idle standby rank `rank` in `epoch`, or starts a new process.
    pub(super) async fn replace(&mut self, rank: u32, epoch: u64) -> std::io::Result<()> {
        let by = Instant::now() + self.timeout;
        let idle = self.procs.iter_mut().find(|(_, p)| {
            p.rank.is_none() && p.helps.is_none() && p.has_joined() && p.killed_for.is_none()
        });
        if let Some((pid, p)) = idle {
            let pid = *pid;
            let sent = match p.conn.as_mut() {
                Some((_, tx)) => tx.send(&ToRank::Assign { rank, epoch }).await.is_ok(),
                None => false,
            };
            if sent {
                p.rank = Some(rank);
                p.incarnation = epoch;
                p.rejoin_by = Some((by, epoch));
                let at_ns = now_ns();
                return self
                    .to_root
                    .send(&ToRoot::Spawned { rank, epoch, at_ns })
                    .await;
            }
            // An unreachable standby is useless: drop it (its exit is ignored).
            p.signal(pid, rustix::process::Signal::KILL);
            self.procs.remove(&pid);
        }
        self.start(Some(rank), epoch, State::Restarted).await
    }

    /// Starts enough standby processes to have `spec.standby` of them.
    pub(super) fn fill_standby(&mut self) {
        if self.program_broken || self.shutting_down || self.finishing {
            return;
        }
        let have = self
            .procs
            .values()
            .filter(|p| p.rank.is_none() && p.helps.is_none())
            .count();
        for _ in have..self.spec.standby {
            if let Err(e) = self.spawn_standby() {
                eprintln!("frame daemon: cannot start a standby process: {e}");
                return;
            }
        }
    }

    /// Starts one standby process.
    pub(super) fn spawn_standby(&mut self) -> std::io::Result<()> {
        self.spawn_process(None, 0, State::Restarted)
    }

    /// Starts a rank process and reports it, or reports why it could not start.
    pub(super) async fn start(
        &mut self,
        rank: Option<u32>,
        epoch: u64,
        state: State,
    ) -> std::io::Result<()> {
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
        super::child_env(&mut cmd, &self.spec, &self.secret);
        if let Some(addr) = self.peers.as_ref().and_then(|l| l.local_addr().ok()) {
            cmd.env(env::MANAGER_PEER, addr.to_string());
        } else {
            cmd.env_remove(env::MANAGER_PEER);
        }
        cmd.args(&self.spec.args)
            .env(env::ROLE, "rank")
            .env(env::SIZE, self.spec.size.to_string())
            .env(env::NODE, self.spec.node.to_string())
            .env(env::STATE, state_name)
            .env(env::DAEMON, &self.socket)
            .env(env::SPEC, self.spec.to_env())
            .env(env::NODE_DIR, &self.spec.node_dir)
            .env(env::config_var("storage.local_dir"), &self.spec.node_dir)
            .env(env::MANAGER, super::manager::socket(&self.spec))
            .env_remove(env::ROOT)
            .stdin(std::process::Stdio::null());
        if !self.spec.recovery_mode.is_empty() {
            cmd.env(env::config_var("recovery.mode"), &self.spec.recovery_mode);
        }
        if self.spec.restart_from > 0 {
            cmd.env(
                env::config_var("recovery.restart_from"),
                self.spec.restart_from.to_string(),
            );
        }
        match rank {
            Some(r) => cmd
                .env(env::RANK, r.to_string())
                .env(env::EPOCH, epoch.to_string()),
            None => cmd.env_remove(env::RANK).env_remove(env::EPOCH),
        };
        // A standby waits outside the ranks' group, at the daemon's
        // priority: it takes a rank as promptly as the daemon assigns it
        // (`crowding::demote` makes it a rank like the others at its
        // release).
        let crowded = crate::crowding::crowded(&self.spec);
        let group = self.group.clone();
        // SAFETY: only async-signal-safe system calls (a prctl, a
        // get/setpriority or sched_setscheduler, an open/write/close of
        // the ranks' CPU group) between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                rustix::process::set_parent_process_death_signal(Some(
                    rustix::process::Signal::KILL,
                ))
                .map_err(std::io::Error::from)?;
                if crowded && rank.is_none() {
                    crate::crowding::wait_as_standby();
                } else if crowded {
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
        let mut proc = Proc::new(rank, epoch);
        proc.prompt = rank.is_none() && crowded;
        self.procs.insert(pid, proc);
        let ev = self.events.clone();
        tokio::spawn(async move {
            let status = child.wait().await;
            let _ = ev.send(Event::Exit { pid, status });
        });
        Ok(())
    }

    /// Lowers process `pid`, a standby that took a rank or became a
    /// helper, to the ranks' priority and group (see `crowding`).
    pub(super) fn demote(&mut self, pid: u32) {
        let Some(p) = self.procs.get_mut(&pid) else {
            return;
        };
        if std::mem::take(&mut p.prompt) {
            crate::crowding::demote(pid, self.group.as_ref());
            if let Some(joined) = p.joiner {
                crate::crowding::demote(joined, self.group.as_ref());
            }
        }
    }
}
