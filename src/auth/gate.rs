//! Admission of connections to a listener: how many may be in their
//! handshake at once, and who makes room when that many are.
//!
//! Another local user can open connections to any port and leave them
//! silent. A listener that refused new connections once its handshake
//! slots were full would let such a user lock out the job's own
//! processes. Instead a new connection is always admitted, and when
//! [`MAX_PENDING`] handshakes are already in progress the oldest of them
//! is dropped: a silent connection is always the oldest, while a
//! process of the job finishes its handshake in well under the time the
//! listener takes to accept [`MAX_PENDING`] more connections. A
//! connecting side that is dropped anyway retries (see
//! [`connect_retrying`](super::connect_retrying)).

use std::collections::VecDeque;
use std::future::Future;
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// Handshakes that may be in progress at once on one listener.
pub(crate) const MAX_PENDING: usize = 128;

#[derive(Debug, Default)]
struct Slots {
    next: u64,
    pending: VecDeque<(u64, oneshot::Sender<()>)>,
}

/// The handshakes in progress on one listener.
#[derive(Clone, Debug, Default)]
pub struct Gate(Arc<Mutex<Slots>>);

/// One connection's place among the handshakes in progress, held until
/// dropped (or until a newer connection takes it).
#[derive(Debug)]
pub struct Pass {
    id: u64,
    gate: Arc<Mutex<Slots>>,
    evicted: oneshot::Receiver<()>,
}

impl Gate {
    fn slots(&self) -> std::sync::MutexGuard<'_, Slots> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Admits a new connection, dropping the oldest handshake in progress
    /// when `MAX_PENDING` are.
    pub fn admit(&self) -> Pass {
        let (tx, rx) = oneshot::channel();
        let mut s = self.slots();
        while s.pending.len() >= MAX_PENDING {
            if let Some((_, oldest)) = s.pending.pop_front() {
                let _ = oldest.send(());
            }
        }
        let id = s.next;
        s.next += 1;
        s.pending.push_back((id, tx));
        Pass {
            id,
            gate: Arc::clone(&self.0),
            evicted: rx,
        }
    }

    /// Handshakes in progress.
    pub fn pending(&self) -> usize {
        self.slots().pending.len()
    }
}

impl Pass {
    /// Runs `handshake` unless a newer connection takes this place first
    /// (then `None`: drop the connection).
    pub async fn hold<F: Future>(&mut self, handshake: F) -> Option<F::Output> {
        tokio::select! {
            out = handshake => Some(out),
            _ = &mut self.evicted => None,
        }
    }
}

impl Drop for Pass {
    fn drop(&mut self) {
        let mut s = self.gate.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(at) = s.pending.iter().position(|(id, _)| *id == self.id) {
            s.pending.remove(at);
        }
    }
}

#[cfg(test)]
mod tests;
