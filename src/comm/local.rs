//! [`LocalComm`]: every rank is a thread of one process.
//!
//! Each rank owns a mailbox (a queue guarded by a mutex, with a condition
//! variable to wake a blocked receiver). Sends append to the destination's
//! mailbox and never block. When a rank's communicator is dropped (its thread
//! finished or unwound), the rank is marked departed and blocked receivers
//! waiting on it get [`CommError::PeerFailed`] instead of hanging.

use super::{check_rank, Bytes, Comm, CommError, CommResult, NodeId, Rank};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

struct Envelope {
    src: Rank,
    tag: u64,
    data: Bytes,
}

#[derive(Default)]
struct Mailbox {
    queue: Mutex<VecDeque<Envelope>>,
    ready: Condvar,
}

impl Mailbox {
    fn lock(&self) -> MutexGuard<'_, VecDeque<Envelope>> {
        // A panic while holding the lock cannot leave the queue half-updated
        // (push and remove are single calls), so a poisoned lock is still usable.
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }
}

struct World {
    mailboxes: Vec<Mailbox>,
    departed: Vec<AtomicBool>,
    ranks_per_node: usize,
}

/// An in-process communicator: one instance per rank, each used by one thread.
///
/// ```
/// use frame::comm::{Comm, LocalComm, ReduceOp};
///
/// let sums = LocalComm::run(4, 2, |comm| {
///     let mut v = [comm.rank() as u64];
///     comm.all_reduce_u64(&mut v, ReduceOp::Sum).unwrap();
///     (comm.node(), v[0])
/// });
/// let sums: Vec<_> = sums.into_iter().map(|r| r.unwrap()).collect();
/// assert_eq!(sums, vec![(0, 6), (0, 6), (1, 6), (1, 6)]);
/// ```
pub struct LocalComm {
    rank: Rank,
    world: Arc<World>,
}

impl LocalComm {
    /// Creates the communicators of a world of `size` ranks, placing
    /// `ranks_per_node` consecutive ranks on each virtual node.
    pub fn world(size: usize, ranks_per_node: usize) -> Vec<LocalComm> {
        let world = Arc::new(World {
            mailboxes: (0..size).map(|_| Mailbox::default()).collect(),
            departed: (0..size).map(|_| AtomicBool::new(false)).collect(),
            ranks_per_node: ranks_per_node.max(1),
        });
        (0..size)
            .map(|rank| LocalComm {
                rank,
                world: Arc::clone(&world),
            })
            .collect()
    }

    /// Runs `f` once per rank, each on its own thread, and returns the results
    /// in rank order (`Err` holds the panic payload of a rank that panicked).
    pub fn run<T, F>(size: usize, ranks_per_node: usize, f: F) -> Vec<std::thread::Result<T>>
    where
        T: Send,
        F: Fn(LocalComm) -> T + Sync,
    {
        let f = &f;
        std::thread::scope(|scope| {
            let handles: Vec<_> = Self::world(size, ranks_per_node)
                .into_iter()
                .map(|comm| scope.spawn(move || f(comm)))
                .collect();
            handles.into_iter().map(|h| h.join()).collect()
        })
    }
}

impl Drop for LocalComm {
    fn drop(&mut self) {
        self.world.departed[self.rank].store(true, Ordering::SeqCst);
        for mailbox in &self.world.mailboxes {
            // Take the lock so a receiver cannot miss the wake-up between its
            // check of `departed` and its wait.
            let _queue = mailbox.lock();
            mailbox.ready.notify_all();
        }
    }
}

impl Comm for LocalComm {
    fn rank(&self) -> Rank {
        self.rank
    }

    fn size(&self) -> usize {
        self.world.mailboxes.len()
    }

    fn node(&self) -> NodeId {
        NodeId::try_from(self.rank / self.world.ranks_per_node).unwrap_or(NodeId::MAX)
    }

    fn send_tagged(&self, dest: Rank, tag: u64, data: &[u8]) -> CommResult<()> {
        check_rank(self, dest)?;
        if self.world.departed[dest].load(Ordering::SeqCst) {
            return Err(CommError::PeerFailed { rank: dest });
        }
        let mailbox = &self.world.mailboxes[dest];
        mailbox.lock().push_back(Envelope {
            src: self.rank,
            tag,
            data: Bytes::copy_from_slice(data),
        });
        mailbox.ready.notify_all();
        Ok(())
    }

    fn recv_tagged(&self, src: Rank, tag: u64) -> CommResult<Bytes> {
        check_rank(self, src)?;
        let mailbox = &self.world.mailboxes[self.rank];
        let mut queue = mailbox.lock();
        loop {
            if let Some(pos) = queue.iter().position(|m| m.src == src && m.tag == tag) {
                return Ok(queue.remove(pos).map(|m| m.data).unwrap_or_default());
            }
            if self.world.departed[src].load(Ordering::SeqCst) {
                return Err(CommError::PeerFailed { rank: src });
            }
            queue = mailbox.ready.wait(queue).unwrap_or_else(|e| e.into_inner());
        }
    }
}

#[cfg(test)]
mod tests;
