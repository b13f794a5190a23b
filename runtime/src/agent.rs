//! A rank process's link to its daemon, and its message listener.
//!
//! The agent owns a small tokio runtime on a background thread. It serves the
//! rank's listener (see [`frame::comm::net`]) and the control connection to
//! the daemon: a `Reinit` from the daemon interrupts the hub at once, so any
//! communication call of the rank fails or wakes up; the other control
//! messages wait in a queue for the rank's main thread. It also sends the
//! daemon a heartbeat every period, whatever the program is doing, with the
//! last iteration the program reported: a rank whose heartbeats stop (a
//! stopped or wedged process) is killed and replaced. And it holds the
//! rank's lease: the daemon passes on the rest of its own lease from the
//! root with every beat; a rank that gets none in time (its daemon stopped,
//! or lost the root) ends itself, so it never runs beside a replacement.

use super::handoff::{RankEnv, Transport};
use super::idle::Idle;
use super::proto::{FromRank, Receiver, Sender, ToRank};
use super::RuntimeError;
use frame::comm::net::{listen, Bind, Endpoint, Hub};
use frame::internals::auth::{self, Channel};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The value of [`Agent::progress`] before the program reported any.
pub(crate) const NO_PROGRESS: u64 = u64::MAX;

/// How long a rank waits for its daemon to confirm a message before dying.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

pub(crate) struct Agent {
    /// Runs the listener, the readers and the control connection.
    rt: tokio::runtime::Runtime,
    pub(crate) hub: Arc<Hub>,
    pub(crate) endpoint: Endpoint,
    /// The hubs of its teams' communicators (see `team.rs`), interrupted
    /// with the rank's own.
    team_hubs: Arc<Mutex<Vec<Arc<Hub>>>>,
    /// The last iteration the program passed to `fault_point`.
    pub(crate) progress: Arc<AtomicU64>,
    /// Written by the rank's own thread: no hand-off on the recovery path.
    to_daemon: Arc<tokio::sync::Mutex<Sender<tokio::net::unix::OwnedWriteHalf>>>,
    from_daemon: mpsc::Receiver<ToRank>,
    flushed: Arc<Mutex<Option<mpsc::Sender<()>>>>,
    /// Where the root's answer to `Ending` goes.
    end_waiter: EndWaiter,
    /// How long a rank waits for that answer.
    end_wait: Duration,
    /// When the newest order to roll back came (see [`Began`]).
    began: Arc<Mutex<Option<Began>>>,
}

/// When a process learned of a recovery: the epoch it leads to, the
/// wall clock (nanoseconds since the Unix epoch) and the process's CPU
/// time (nanoseconds) then.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Began {
    pub(crate) epoch: u64,
    pub(crate) at_ns: u64,
    pub(crate) cpu_ns: u64,
}

impl Began {
    /// Now, for `epoch`.
    pub(crate) fn now(epoch: u64) -> Self {
        Self {
            epoch,
            at_ns: crate::proto::now_ns(),
            cpu_ns: frame::metrics::process_cpu_ns(),
        }
    }
}

/// The waiter for the root's answer to a rank's end.
type EndWaiter = Arc<Mutex<Option<mpsc::Sender<Option<String>>>>>;

impl Agent {
    /// Starts listening, connects to the daemon and says hello.
    pub(crate) fn start(env: &RankEnv) -> Result<Self, RuntimeError> {
        frame::comm::net::quiet_broken_pipes();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("frame-agent")
            .enable_all()
            .build()
            .map_err(RuntimeError::Io)?;
        let hub = Hub::new();
        let bind = match env.spec.transport {
            Transport::Unix => Bind::Unix(env.spec.run_dir.join(format!(
                "n{}-p{}.sock",
                env.spec.node,
                std::process::id()
            ))),
            Transport::Tcp => Bind::Tcp(env.spec.bind),
        };
        let endpoint = rt
            .block_on(listen(bind, Arc::clone(&hub), Arc::clone(&env.security)))
            .map_err(RuntimeError::Io)?;
        let stream = rt
            .block_on(async {
                let open = || tokio::net::UnixStream::connect(&env.daemon);
                let patience = env.spec.control_patience();
                auth::connect_retrying_within(open, &env.security.secret, Channel::Rank, patience)
                    .await
            })
            .map_err(|e| {
                RuntimeError::Daemon(format!("cannot reach {}: {e}", env.daemon.display()))
            })?;
        let (read, write) = stream.into_split();
        let progress = Arc::new(AtomicU64::new(NO_PROGRESS));
        let (inbox, from_daemon) = mpsc::channel();
        let flushed: Arc<Mutex<Option<mpsc::Sender<()>>>> = Arc::new(Mutex::new(None));
        let (interrupt, waiter) = (Arc::clone(&hub), Arc::clone(&flushed));
        let team_hubs: Arc<Mutex<Vec<Arc<Hub>>>> = Arc::default();
        // Until the daemon's first lease: the first lease a daemon holds
        // (see `root::control::liveness`).
        let lease = Arc::new(Lease::new(Duration::from_millis(env.spec.lease_ms.max(1))));
        let renewed = Arc::clone(&lease);
        let end_waiter: EndWaiter = Arc::default();
        let ended = Arc::clone(&end_waiter);
        let teams = Arc::clone(&team_hubs);
        let began: Arc<Mutex<Option<Began>>> = Arc::default();
        let reinit_began = Arc::clone(&began);
        let to_daemon = Arc::new(tokio::sync::Mutex::new(Sender::new(write)));
        let report = Arc::clone(&to_daemon);
        rt.spawn(async move {
            let mut rx = Receiver::new(read);
            let mut idle = Idle::default();
            loop {
                let msg = rx.next::<ToRank>().await;
                // A recovery or an order to idle ends or starts an idle period.
                let idling = match &msg {
                    Ok(Some(ToRank::Idle { on })) => Some(*on),
                    Ok(Some(ToRank::Reinit { .. } | ToRank::Finish)) => Some(false),
                    _ => None,
                };
                if let Some(period) = idling.and_then(|on| idle.set(on)) {
                    let ms = |d: Duration| d.as_secs_f64() * 1e3;
                    let msg = FromRank::Idled {
                        wall_ms: ms(period.wall),
                        cpu_ms: ms(period.cpu),
                    };
                    let _ = report.lock().await.send(&msg).await;
                }
                match msg {
                    Ok(Some(ToRank::Idle { .. })) => {}
                    Ok(Some(ToRank::Reinit { epoch })) => {
                        if let Ok(mut b) = reinit_began.lock() {
                            *b = Some(Began::now(epoch));
                        }
                        interrupt.interrupt(epoch);
                        for h in teams.lock().map(|t| t.clone()).unwrap_or_default() {
                            h.interrupt(epoch);
                        }
                        let _ = inbox.send(ToRank::Reinit { epoch });
                    }
                    Ok(Some(ToRank::Lease { ms })) => renewed.renew(ms),
                    Ok(Some(ToRank::EndConfirmed { refused })) => {
                        if let Some(done) = ended.lock().ok().and_then(|mut w| w.take()) {
                            let _ = done.send(refused);
                        }
                    }
                    Ok(Some(ToRank::Flushed)) => {
                        if let Some(done) = waiter.lock().ok().and_then(|mut w| w.take()) {
                            let _ = done.send(());
                        }
                    }
                    Ok(Some(other)) => {
                        let _ = inbox.send(other);
                    }
                    Ok(None) | Err(_) => {
                        // The daemon is gone, so is this node: die with it.
                        let _ = rustix::process::kill_process(
                            rustix::process::getpid(),
                            rustix::process::Signal::KILL,
                        );
                        return;
                    }
                }
            }
        });
        let agent = Self {
            rt,
            hub,
            endpoint,
            team_hubs,
            progress,
            to_daemon,
            from_daemon,
            flushed,
            end_waiter,
            end_wait: Duration::from_millis(env.spec.rank_timeout_ms.max(1000)) * 2,
            began,
        };
        agent.send(FromRank::Hello {
            rank: env.rank,
            pid: std::process::id(),
            epoch: env.epoch,
        });
        watch_lease(&agent.rt, lease, env.rank);
        // Heartbeats start after the hello: the daemon expects it first.
        let (beat_to, beat_progress) = (Arc::clone(&agent.to_daemon), Arc::clone(&agent.progress));
        let period = env.spec.rank_heartbeat();
        agent.rt.spawn(async move {
            let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
            // After a stall, one heartbeat says as much as a burst.
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let p = beat_progress.load(Ordering::Relaxed);
                let msg = FromRank::Alive {
                    progress: (p != NO_PROGRESS).then_some(p),
                };
                if beat_to.lock().await.send(&msg).await.is_err() {
                    return;
                }
            }
        });
        Ok(agent)
    }

    /// Writes a message to the daemon from the calling thread. A broken
    /// connection is noticed by the reader, which ends the process.
    pub(crate) fn send(&self, msg: FromRank) {
        let _ = self.rt.handle().block_on(async {
            let mut tx = self.to_daemon.lock().await;
            tx.send(&msg).await
        });
    }

    /// Sends a message and waits until the daemon confirms it was forwarded.
    pub(crate) fn send_flushed(&self, msg: FromRank) {
        let (tx, rx) = mpsc::channel();
        if let Ok(mut w) = self.flushed.lock() {
            *w = Some(tx);
        }
        self.send(msg);
        let _ = rx.recv_timeout(FLUSH_TIMEOUT);
    }

    /// Where the rank's communicators pass the commits the checkpoint
    /// library notes: to the daemon, which forwards them to the root. A
    /// withdrawal (`None`) waits until the daemon forwarded it, so the root
    /// knows of it before the rank removes anything.
    pub(crate) fn commit_notes(&self) -> frame::comm::net::CommitNotes {
        let handle = self.rt.handle().clone();
        let to_daemon = Arc::clone(&self.to_daemon);
        let flushed = Arc::clone(&self.flushed);
        Arc::new(move |id: Option<u64>| {
            let msg = FromRank::Committed { id };
            let send = |msg: FromRank| {
                let _ = handle.block_on(async {
                    let mut tx = to_daemon.lock().await;
                    tx.send(&msg).await
                });
            };
            if id.is_some() {
                send(msg);
                return;
            }
            let (tx, rx) = mpsc::channel();
            if let Ok(mut w) = flushed.lock() {
                *w = Some(tx);
            }
            send(msg);
            let _ = rx.recv_timeout(FLUSH_TIMEOUT);
        })
    }

    /// What the rank's communicator calls at the job's end in `epoch`,
    /// before the library removes the checkpoints: asks the root, which
    /// owns the job's outcome, whether the job ends well. No answer (the
    /// root is gone or cut off: the lease ends the process soon) keeps
    /// every checkpoint.
    pub(crate) fn end_confirm(&self, epoch: u64) -> frame::comm::net::EndConfirm {
        let handle = self.rt.handle().clone();
        let to_daemon = Arc::clone(&self.to_daemon);
        let waiter = Arc::clone(&self.end_waiter);
        let wait = self.end_wait;
        Arc::new(move || {
            let (tx, rx) = mpsc::channel();
            if let Ok(mut w) = waiter.lock() {
                *w = Some(tx);
            }
            let sent = handle.block_on(async {
                let mut to = to_daemon.lock().await;
                to.send(&FromRank::Ending { epoch }).await
            });
            if let Err(e) = sent {
                return Err(format!("its daemon cannot be reached: {e}"));
            }
            match rx.recv_timeout(wait) {
                Ok(None) => Ok(()),
                Ok(Some(refused)) => Err(refused),
                Err(_) => Err(format!(
                    "no answer from the runtime's root within {} s",
                    wait.as_secs()
                )),
            }
        })
    }

    /// What the rank's communicator calls when it cannot feed a logged
    /// recovery's replacement: asks the root for a global restart (whose
    /// REINIT then interrupts the communicator).
    pub(crate) fn fallback(&self, epoch: u64) -> frame::comm::net::Fallback {
        let handle = self.rt.handle().clone();
        let to_daemon = Arc::clone(&self.to_daemon);
        Arc::new(move |reason: &str| {
            let msg = FromRank::Fallback {
                epoch,
                reason: reason.to_string(),
            };
            let _ = handle.block_on(async {
                let mut tx = to_daemon.lock().await;
                tx.send(&msg).await
            });
        })
    }

    /// Where the communicator of `epoch` reports a peer the network lost.
    pub(crate) fn lost_peers(&self, epoch: u64) -> frame::comm::net::LostPeers {
        let handle = self.rt.handle().clone();
        let to_daemon = Arc::clone(&self.to_daemon);
        Arc::new(move |peer| {
            let msg = FromRank::Unreachable {
                epoch,
                peer: peer as u32,
            };
            let _ = handle.block_on(async {
                let mut tx = to_daemon.lock().await;
                tx.send(&msg).await
            });
        })
    }

    /// Listens for a team's messages (a replacement with helpers) on a
    /// mailbox of their own, which a recovery interrupts too.
    pub(crate) fn listen_team(&self, env: &RankEnv) -> std::io::Result<(Arc<Hub>, Endpoint)> {
        let hub = Hub::new();
        let mut teams = self
            .team_hubs
            .lock()
            .map_err(|_| std::io::Error::other("team hubs poisoned"))?;
        let bind = match env.spec.transport {
            Transport::Unix => Bind::Unix(env.spec.run_dir.join(format!(
                "n{}-p{}-team{}.sock",
                env.spec.node,
                std::process::id(),
                teams.len()
            ))),
            Transport::Tcp => Bind::Tcp(env.spec.bind),
        };
        let endpoint =
            self.rt
                .block_on(listen(bind, Arc::clone(&hub), Arc::clone(&env.security)))?;
        teams.push(Arc::clone(&hub));
        Ok((hub, endpoint))
    }

    /// What the rank's communicator calls after it sent a replacement
    /// what it had lost: a note to the root's metrics.
    pub(crate) fn replay_notes(&self) -> frame::comm::net::ReplayNotes {
        let handle = self.rt.handle().clone();
        let to_daemon = Arc::clone(&self.to_daemon);
        Arc::new(move |r: &frame::comm::net::Replay| {
            let msg = FromRank::Replayed {
                to: r.to as u32,
                messages: r.messages as u64,
                bytes: r.bytes,
                log_bytes: r.log_bytes,
            };
            let _ = handle.block_on(async {
                let mut tx = to_daemon.lock().await;
                tx.send(&msg).await
            });
        })
    }

    /// When the order to roll back into `epoch` came, if one did.
    pub(crate) fn began(&self, epoch: u64) -> Option<Began> {
        let b = *self.began.lock().ok()?;
        b.filter(|b| b.epoch == epoch)
    }

    /// Announces that this rank listens and waits for the `Go` of `epoch`.
    pub(crate) fn ready(&self, epoch: u64) {
        self.send(FromRank::Ready {
            epoch,
            endpoint: self.endpoint.clone(),
        });
    }

    /// The next control message for the main thread.
    /// The next control message for the main thread if one came within
    /// `limit`; `Err` when the daemon is gone.
    pub(crate) fn next_within(&self, limit: Duration) -> Result<Option<ToRank>, ()> {
        match self.from_daemon.recv_timeout(limit) {
            Ok(m) => Ok(Some(m)),
            Err(mpsc::RecvTimeoutError::Timeout) => Ok(None),
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(()),
        }
    }

    pub(crate) fn next(&self) -> Option<ToRank> {
        self.from_daemon.recv().ok()
    }
}

/// A rank's lease from its daemon: the instant past which it must not run
/// without word from the daemon, as milliseconds since the agent started.
struct Lease {
    start: std::time::Instant,
    until_ms: AtomicU64,
}

impl Lease {
    fn new(first: Duration) -> Self {
        Self {
            start: std::time::Instant::now(),
            until_ms: AtomicU64::new(first.as_millis() as u64),
        }
    }

    fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    /// The daemon gave `ms` more milliseconds from now.
    fn renew(&self, ms: u64) {
        let until = self.now_ms().saturating_add(ms);
        self.until_ms.fetch_max(until, Ordering::Relaxed);
    }
}

/// Ends the process when its lease runs out: the agent's thread sleeps
/// until the lease's end, whatever the program does, and looks again
/// (a renewal moved the end later) or ends the process.
fn watch_lease(rt: &tokio::runtime::Runtime, lease: Arc<Lease>, rank: Option<u32>) {
    rt.spawn(async move {
        loop {
            let (now, until) = (lease.now_ms(), lease.until_ms.load(Ordering::Relaxed));
            if now < until {
                let end = lease.start + Duration::from_millis(until);
                tokio::time::sleep_until(tokio::time::Instant::from_std(end)).await;
                continue;
            }
            let who = rank.map_or("a standby process".to_string(), |r| format!("rank {r}"));
            // One write, so lines of other processes cannot cut it.
            let line = format!(
                "frame: {who} (pid {}) heard nothing from its daemon within its lease (the daemon is stopped or lost the root): ending\n",
                std::process::id()
            );
            let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
            let _ = rustix::process::kill_process(
                rustix::process::getpid(),
                rustix::process::Signal::KILL,
            );
            return;
        }
    });
}
