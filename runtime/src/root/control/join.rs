//! Daemons joining the root: every connection to the control port must pass
//! the job's handshake and say hello within a deadline, each in its own
//! task, so a silent or hostile connection never holds up the others (or a
//! recovery). A hello must come from the daemon process the root started
//! for that node.

use super::link::Link;
use super::Cluster;
use crate::handoff::Handoff;
use crate::proto::{Receiver, Sender, ToRoot};
use crate::root::RunError;
use crate::root::{daemons, remote};
use frame::comm::net::Endpoint;
use frame::internals::auth::{self, Channel, Secret};
use std::time::{Duration, Instant};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpListener;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

/// A daemon that proved the secret and said hello.
pub(super) struct Joined {
    /// When its hello arrived.
    at: Instant,
    node: u32,
    pid: u32,
    ticket: u64,
    manager: Option<Endpoint>,
    rx: Receiver<OwnedReadHalf>,
    tx: Sender<OwnedWriteHalf>,
}

/// Accepts connections on `listener` for the job's lifetime; yields the
/// daemons that joined. A daemon has `patience` for its handshake and
/// hello (a daemon's first lease: on an overloaded machine a live daemon
/// may be slow to answer; the gate bounds how many wait).
pub(super) fn accept_daemons(
    listener: TcpListener,
    secret: Secret,
    patience: Duration,
) -> UnboundedReceiver<Joined> {
    let (joined, joins) = unbounded_channel();
    tokio::spawn(async move {
        let gate = auth::Gate::default();
        while let Ok((stream, peer)) = listener.accept().await {
            let mut pass = gate.admit();
            let (joined, secret) = (joined.clone(), secret.clone());
            tokio::spawn(async move {
                let Some(result) = pass.hold(handshake(stream, &secret, patience)).await else {
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

async fn handshake(
    mut stream: tokio::net::TcpStream,
    secret: &Secret,
    patience: Duration,
) -> std::io::Result<Joined> {
    stream.set_nodelay(true)?;
    auth::accept_within(&mut stream, secret, Channel::Node, patience).await?;
    let (read, write) = stream.into_split();
    let mut rx = Receiver::new(read);
    let hello = tokio::time::timeout(patience, rx.next::<ToRoot>())
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "no hello"))??;
    match hello {
        Some(ToRoot::Hello {
            node,
            pid,
            ticket,
            manager,
        }) => Ok(Joined {
            at: Instant::now(),
            node,
            pid,
            ticket,
            manager,
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
            let host = self.nodes[n as usize].host.clone();
            let (child, remote) = match &host {
                None => {
                    let child = daemons::start(self.launch, &spec, self.addr, &self.secret)
                        .map_err(|e| {
                            RunError::Startup(format!("cannot start the daemon of node {n}: {e}"))
                        })?;
                    (child, None)
                }
                Some(host) => {
                    let l = self.launch;
                    let cant = |e: String| {
                        RunError::Startup(format!(
                            "cannot start the daemon of node {n} on host {host} with {}: {e}",
                            l.launcher.name()
                        ))
                    };
                    // Found once per host (a name lookup), kept for restarts.
                    let root = match self.nodes[n as usize].reach {
                        Some(a) => a,
                        None => remote::root_for(l.bind, self.addr.port(), host).map_err(cant)?,
                    };
                    self.nodes[n as usize].reach = Some(root);
                    let handoff = Handoff {
                        spec,
                        root,
                        secret: self.secret.to_hex(),
                    };
                    let exe = daemons::daemon_exe(l).map_err(|e| cant(e.to_string()))?;
                    let started =
                        remote::start(l.launcher, &l.launcher_command(), host, &exe, &handoff)
                            .await
                            .map_err(|e| cant(e.to_string()))?;
                    (started.child, Some(started.link))
                }
            };
            let node = &mut self.nodes[n as usize];
            node.gen += 1;
            node.pid = child.id();
            node.child = Some(child);
            node.remote = remote;
            node.link = None;
            node.stopping = false;
        }
        let deadline = Instant::now() + self.launch.start_timeout;
        while which.iter().any(|&n| self.nodes[n as usize].link.is_none()) {
            self.check_started(which).await?;
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                let late: Vec<String> = which
                    .iter()
                    .filter(|&&n| self.nodes[n as usize].link.is_none())
                    .map(|&n| format!("node {n}{}", self.nodes[n as usize].on_host()))
                    .collect();
                return Err(RunError::Startup(format!(
                    "daemons did not join within {} (--start-timeout): {}",
                    humantime::format_duration(self.launch.start_timeout),
                    late.join(", ")
                )));
            }
            // Wake up now and then to notice a daemon that died starting.
            let wait = left.min(Duration::from_millis(100));
            let Ok(Some(j)) = tokio::time::timeout(wait, self.joins.recv()).await else {
                continue;
            };
            let Some(slot) = self.nodes.get_mut(j.node as usize) else {
                continue;
            };
            // A daemon here must be the process the root started; one on
            // another host must carry the ticket of this start.
            let local_mismatch = slot.host.is_none() && slot.pid != Some(j.pid);
            if slot.link.is_some() || j.ticket != slot.gen || local_mismatch {
                tracing::warn!(
                    node = j.node,
                    pid = j.pid,
                    "ignoring a hello from a process the root did not start for that node"
                );
                continue;
            }
            slot.manager = j.manager;
            // Its silence counts from now, its hello.
            slot.link = Some(Link::open(
                j.node,
                slot.gen,
                (j.rx, j.tx),
                self.events.clone(),
                self.launch.heartbeat_timeout,
                j.at,
            ));
        }
        Ok(())
    }

    /// Fails if a daemon being started already exited (its launcher, for a
    /// daemon on another host, whose last words then explain).
    async fn check_started(&mut self, which: &[u32]) -> Result<(), RunError> {
        for &n in which {
            let launcher = self.launch.launcher.name();
            let node = &mut self.nodes[n as usize];
            if node.link.is_some() {
                continue;
            }
            let Some(status) = node
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            else {
                continue;
            };
            let Some(link) = node.remote.as_mut() else {
                return Err(RunError::Startup(format!(
                    "the daemon of node {n} exited while starting ({status})"
                )));
            };
            // What the launcher printed last may still be on its way.
            let _ = tokio::time::timeout(Duration::from_secs(1), &mut link.reader).await;
            let said = link.tail.lines();
            return Err(RunError::Startup(format!(
                "the daemon of node {n}{} did not start: {launcher} exited ({status}){}",
                node.on_host(),
                if said.is_empty() {
                    String::new()
                } else {
                    format!(": {said}")
                }
            )));
        }
        Ok(())
    }
}
