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
mod tests {
    use super::*;
    use crate::comm::ReduceOp;

    fn run_ok<T: Send>(size: usize, f: impl Fn(LocalComm) -> T + Sync) -> Vec<T> {
        let _deadline = crate::testing::Deadline::new(std::time::Duration::from_secs(60));
        LocalComm::run(size, 2, f)
            .into_iter()
            .map(|r| r.expect("rank panicked"))
            .collect()
    }

    #[test]
    fn collectives_agree_for_many_sizes() {
        for size in 1..=9 {
            let out = run_ok(size, |c| {
                let r = c.rank() as u64;
                let mut v = [r, r, r, 1 << r, r];
                c.all_reduce_u64(&mut v[0..1], ReduceOp::Sum).unwrap();
                c.all_reduce_u64(&mut v[1..2], ReduceOp::Min).unwrap();
                c.all_reduce_u64(&mut v[2..3], ReduceOp::Max).unwrap();
                c.all_reduce_u64(&mut v[3..4], ReduceOp::Or).unwrap();
                let mut b = if c.rank() == size - 1 {
                    vec![7u8; 3]
                } else {
                    vec![]
                };
                c.broadcast(&mut b, size - 1).unwrap();
                let g = c.all_gather(&[c.rank() as u8; 2]).unwrap();
                c.barrier().unwrap();
                (v, b, g)
            });
            let n = size as u64;
            for (v, b, g) in out {
                assert_eq!(v[0], n * (n - 1) / 2);
                assert_eq!(v[1], 0);
                assert_eq!(v[2], n - 1);
                assert_eq!(v[3], (1u64 << n) - 1);
                assert_eq!(b, vec![7u8; 3]);
                let expect: Vec<Vec<u8>> = (0..size).map(|r| vec![r as u8; 2]).collect();
                assert_eq!(g.iter().map(|b| b.to_vec()).collect::<Vec<_>>(), expect);
            }
        }
    }

    #[test]
    fn float_sum_is_reproducible() {
        let once = || {
            run_ok(7, |c| {
                let mut v = [0.1 * (c.rank() as f64 + 1.0).powi(3)];
                c.all_reduce_f64(&mut v, ReduceOp::Sum).unwrap();
                v[0].to_bits()
            })
        };
        let a = once();
        assert!(a.iter().all(|x| *x == a[0]));
        assert_eq!(a, once());
    }

    #[test]
    fn messages_match_by_source_and_tag() {
        let out = run_ok(3, |c| match c.rank() {
            0 => {
                c.send(2, 5, b"a5").unwrap();
                c.send(2, 6, b"a6").unwrap();
                Vec::new()
            }
            1 => {
                c.send(2, 5, b"b5").unwrap();
                Vec::new()
            }
            _ => vec![
                c.recv(0, 6).unwrap().to_vec(),
                c.recv(1, 5).unwrap().to_vec(),
                c.recv(0, 5).unwrap().to_vec(),
            ],
        });
        assert_eq!(out[2], vec![b"a6".to_vec(), b"b5".to_vec(), b"a5".to_vec()]);
    }

    #[test]
    fn receive_from_departed_rank_fails_instead_of_hanging() {
        let out = run_ok(2, |c| {
            if c.rank() == 0 {
                return None;
            }
            Some(c.recv(0, 1).unwrap_err().to_string())
        });
        assert_eq!(
            out[1].as_deref(),
            Some("rank 0 failed or left the communicator")
        );
    }

    #[test]
    fn bad_arguments_are_errors() {
        let out = run_ok(2, |c| {
            let bad_rank = c.send(9, 1, b"x").is_err();
            let bad_op = c.all_reduce_f64(&mut [1.0], ReduceOp::And).is_err();
            (bad_rank, bad_op)
        });
        assert!(out.iter().all(|&(a, b)| a && b));
    }
}
