//! Daemons joining the root: every connection to the control port must pass
//! the job's handshake and say hello within a deadline, each in its own
//! task, so a silent or hostile connection never holds up the others (or a
//! recovery). A hello must come from the daemon process the root started
//! for that node.

use super::{Cluster, Event, STARTUP};
use crate::proto::{Receiver, Sender, ToRoot};
use crate::root::daemons;
use crate::root::RunError;
use frame::internals::auth::{self, Channel, Secret};
use std::time::{Duration, Instant};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpListener;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

/// A daemon that proved the secret and said hello.
pub(super) struct Joined {
    node: u32,
    pid: u32,
    rx: Receiver<OwnedReadHalf>,
    tx: Sender<OwnedWriteHalf>,
}

/// Accepts connections on `listener` for the job's lifetime; yields the
/// daemons that joined.
pub(super) fn accept_daemons(listener: TcpListener, secret: Secret) -> UnboundedReceiver<Joined> {
    let (joined, joins) = unbounded_channel();
    tokio::spawn(async move {
        let gate = auth::Gate::default();
        while let Ok((stream, peer)) = listener.accept().await {
            let mut pass = gate.admit();
            let (joined, secret) = (joined.clone(), secret.clone());
            tokio::spawn(async move {
                let Some(result) = pass.hold(handshake(stream, &secret)).await else {
                    return;
                };
                drop(pass);
                match result {
                    Ok(j) => {
                        let _ = joined.send(j);
                    }
                    Err(e) => tracing::warn!(%peer, error = %e, "refused a control connection"),
                }
            });
        }
    });
    joins
}

async fn handshake(mut stream: tokio::net::TcpStream, secret: &Secret) -> std::io::Result<Joined> {
    stream.set_nodelay(true)?;
    auth::accept(&mut stream, secret, Channel::Node).await?;
    let (read, write) = stream.into_split();
    let mut rx = Receiver::new(read);
    let hello = tokio::time::timeout(auth::HANDSHAKE_TIMEOUT, rx.next::<ToRoot>())
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "no hello"))??;
    match hello {
        Some(ToRoot::Hello { node, pid }) => Ok(Joined {
            node,
            pid,
            rx,
            tx: Sender::new(write),
        }),
        _ => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "the first message was not a hello",
        )),
    }
}

impl Cluster<'_> {
    /// Starts the daemons of `which` and waits until each has joined.
    pub(super) async fn start_daemons(&mut self, which: &[u32]) -> Result<(), RunError> {
        for &n in which {
            let spec = self.spec(n);
            let child =
                daemons::start(self.launch, &spec, self.addr, &self.secret).map_err(|e| {
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
            self.check_started(which)?;
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(RunError::Startup("daemons did not connect in time".into()));
            }
            // Wake up now and then to notice a daemon that died starting.
            let wait = left.min(Duration::from_millis(100));
            let Ok(Some(j)) = tokio::time::timeout(wait, self.joins.recv()).await else {
                continue;
            };
            let Some(slot) = self.nodes.get_mut(j.node as usize) else {
                continue;
            };
            if slot.tx.is_some() || slot.pid != Some(j.pid) {
                tracing::warn!(
                    node = j.node,
                    pid = j.pid,
                    "ignoring a hello from a process the root did not start for that node"
                );
                continue;
            }
            slot.tx = Some(j.tx);
            let (node, gen, ev, mut rx) = (j.node, slot.gen, self.events.clone(), j.rx);
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

    /// Fails if a daemon being started already exited.
    fn check_started(&mut self, which: &[u32]) -> Result<(), RunError> {
        for &n in which {
            let node = &mut self.nodes[n as usize];
            if node.tx.is_some() {
                continue;
            }
            if let Some(status) = node
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                return Err(RunError::Startup(format!(
                    "the daemon of node {n} exited while starting ({status})"
                )));
            }
        }
        Ok(())
    }
}
