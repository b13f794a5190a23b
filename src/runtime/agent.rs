//! A rank process's link to its daemon, and its message listener.
//!
//! The agent owns a small tokio runtime on a background thread. It serves the
//! rank's listener (see [`crate::comm::net`]) and the control connection to
//! the daemon: a `Reinit` from the daemon interrupts the hub at once, so any
//! communication call of the rank fails or wakes up; the other control
//! messages wait in a queue for the rank's main thread.

use super::env::{RankEnv, Transport};
use super::proto::{FromRank, Receiver, Sender, ToRank};
use super::RuntimeError;
use crate::comm::net::{listen, Bind, Endpoint, Hub};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a rank waits for its daemon to confirm a message before dying.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

pub(crate) struct Agent {
    /// Runs the listener, the readers and the control connection.
    rt: tokio::runtime::Runtime,
    pub(crate) hub: Arc<Hub>,
    pub(crate) endpoint: Endpoint,
    /// Written by the rank's own thread: no hand-off on the recovery path.
    to_daemon: tokio::sync::Mutex<Sender<tokio::net::unix::OwnedWriteHalf>>,
    from_daemon: mpsc::Receiver<ToRank>,
    flushed: Arc<Mutex<Option<mpsc::Sender<()>>>>,
}

impl Agent {
    /// Starts listening, connects to the daemon and says hello.
    pub(crate) fn start(env: &RankEnv) -> Result<Self, RuntimeError> {
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
            Transport::Tcp => Bind::Tcp(std::net::Ipv4Addr::LOCALHOST.into()),
        };
        let endpoint = rt
            .block_on(listen(bind, Arc::clone(&hub)))
            .map_err(RuntimeError::Io)?;
        let stream = rt
            .block_on(tokio::net::UnixStream::connect(&env.daemon))
            .map_err(|e| {
                RuntimeError::Daemon(format!("cannot reach {}: {e}", env.daemon.display()))
            })?;
        let (read, write) = stream.into_split();
        let to_daemon = tokio::sync::Mutex::new(Sender::new(write));
        let (inbox, from_daemon) = mpsc::channel();
        let flushed: Arc<Mutex<Option<mpsc::Sender<()>>>> = Arc::new(Mutex::new(None));

        let (interrupt, waiter) = (Arc::clone(&hub), Arc::clone(&flushed));
        rt.spawn(async move {
            let mut rx = Receiver::new(read);
            loop {
                match rx.next::<ToRank>().await {
                    Ok(Some(ToRank::Reinit { epoch })) => {
                        interrupt.interrupt(epoch);
                        let _ = inbox.send(ToRank::Reinit { epoch });
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
            to_daemon,
            from_daemon,
            flushed,
        };
        agent.send(FromRank::Hello {
            rank: env.rank,
            pid: std::process::id(),
            epoch: env.epoch,
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

    /// Announces that this rank listens and waits for the `Go` of `epoch`.
    pub(crate) fn ready(&self, epoch: u64) {
        self.send(FromRank::Ready {
            epoch,
            endpoint: self.endpoint.clone(),
        });
    }

    /// The next control message for the main thread.
    pub(crate) fn next(&self) -> Option<ToRank> {
        self.from_daemon.recv().ok()
    }
}
