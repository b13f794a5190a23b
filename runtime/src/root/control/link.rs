//! The root's connection to one joined daemon: a writer task that sends
//! what the control loop queues (so the loop never waits on a slow or
//! stopped daemon; messages come encoded, so one that goes to every node
//! is encoded once), and a reader task that notes each message's arrival in
//! the node's [`Liveness`], answers each heartbeat with a lease at once,
//! and passes the messages on to the control loop.

use super::liveness::Liveness;
use super::Event;
use crate::proto::{self, Receiver, Sender, ToDaemon, ToRoot};
use bytes::Bytes;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::mpsc::{self, UnboundedSender};

/// Orders that may wait for one daemon; past this the daemon is not
/// reading, and its connection is about to be judged.
const QUEUE: usize = 4096;

/// The root's end of one daemon's connection.
pub(super) struct Link {
    outbox: mpsc::Sender<Bytes>,
    pub(super) liveness: Arc<Liveness>,
}

impl Link {
    /// Starts the tasks of the connection of node `node`'s daemon (start
    /// `gen`), which joined at `now`; silence of more than `floor` may
    /// make it dead (see [`Liveness`]).
    pub(super) fn open(
        node: u32,
        gen: u64,
        (mut rx, mut tx): (Receiver<OwnedReadHalf>, Sender<OwnedWriteHalf>),
        events: UnboundedSender<Event>,
        floor: Duration,
        now: Instant,
    ) -> Self {
        let (outbox, mut queue) = mpsc::channel::<Bytes>(QUEUE);
        tokio::spawn(async move {
            while let Some(bytes) = queue.recv().await {
                if let Err(e) = tx.send_encoded(bytes).await {
                    tracing::debug!(node, error = %e, "daemon unreachable");
                    return;
                }
            }
        });
        let liveness = Arc::new(Liveness::new(floor, now));
        let (heard, leases) = (Arc::clone(&liveness), outbox.clone());
        tokio::spawn(async move {
            while let Ok(Some(msg)) = rx.next::<ToRoot>().await {
                let beat = match &msg {
                    ToRoot::Heartbeat { beat, .. } => Some(*beat),
                    _ => None,
                };
                if let Some(lease) = heard.heard(Instant::now(), beat.is_some()) {
                    let ms = u64::try_from(lease.as_millis()).unwrap_or(u64::MAX);
                    let beat = beat.unwrap_or(0);
                    if let Ok(bytes) = proto::encode(&ToDaemon::Lease { beat, ms }) {
                        let _ = leases.try_send(bytes);
                    }
                }
                if events.send(Event::Daemon { node, gen, msg }).is_err() {
                    return;
                }
            }
            let _ = events.send(Event::Lost { node, gen });
        });
        Self { outbox, liveness }
    }

    /// Queues `msg`, [`proto::encode`]d, for the daemon; `false` if it
    /// cannot take it (its connection ended, or it stopped reading).
    pub(super) fn send(&self, msg: Bytes) -> bool {
        self.outbox.try_send(msg).is_ok()
    }
}

impl Drop for Link {
    /// A node the root lets go of gets no lease any more.
    fn drop(&mut self) {
        self.liveness.stop_renewing();
    }
}
