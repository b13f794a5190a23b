//! frame over MPI: [`MpiComm`] implements [`Comm`] on an MPI communicator,
//! so the checkpoint library, the levels and their managers, and recovery
//! run inside a program started by `mpirun` or `srun`.
//!
//! Built with the `mpi` cargo feature (rsmpi). What it maps to:
//! - point-to-point messages go to a duplicate of the program's
//!   communicator, so they never match the program's own MPI traffic, and
//!   frame's collectives use a second duplicate; sends are `MPI_Isend` of a
//!   buffer the communicator owns until MPI is done with it, which keeps the
//!   trait's eager contract (two ranks may both send before receiving);
//! - the barrier, the integer all-reduce, broadcast and all-gather are MPI's
//!   own; the floating-point all-reduce keeps frame's fixed reduction order,
//!   so a sum comes out bit for bit as on frame's own communicator;
//! - a node is the set of ranks that share memory (`MPI_Comm_split_type`),
//!   or, for tests on one host, `N` consecutive ranks ([`Nodes`]).
//!
//! Under plain MPI a dead process ends the whole job, so a failure is
//! recovered by running the job again: the checkpointer then finds its
//! failure topology from what each node still holds. With an MPI that has
//! User-Level Failure Mitigation (the `ulfm` feature and its module
//! `ulfm`), MPI returns the failure to the survivors instead: every code
//! MPI returns is checked and comes back as a [`CommError`] (see
//! `errors.rs`), and the job repairs itself in place.
//!
//! frame's managers run as threads but never call MPI: every MPI call is
//! made by the thread that uses the communicator, under its lock. With MPI
//! initialised below `Threading::Serialized` (a C program's `MPI_Init`),
//! that must be the thread that initialised MPI.

use super::{
    check_rank, collective, Bytes, Comm, CommError, CommResult, NodeId, Rank, RecoveryContext,
    ReduceOp, RuntimeLink,
};
use mpi::collective::SystemOperation;
use mpi::ffi;
use mpi::raw::AsRaw;
use mpi::topology::{Communicator, SimpleCommunicator};
use parts::{count_of, receive_buffer, split};
use std::mem::ManuallyDrop;
use std::sync::Mutex;

mod errors;
mod nodes;
mod parts;
mod polite;
#[cfg(feature = "ulfm")]
mod scope;
#[cfg(feature = "ulfm")]
pub mod ulfm;

#[cfg(feature = "ulfm")]
pub use scope::ErrorScope;

use errors::check;

pub use nodes::{placement, Nodes, Placement};
pub use polite::progress_while;
pub(crate) use polite::receive;

/// Tags at or above 2^32 are frame's own (see [`Comm::send_tagged`]).
const INTERNAL: u64 = 1 << 32;

/// A send MPI has not finished with: its buffer stays here until then.
struct InFlight {
    request: ffi::MPI_Request,
    _buffer: Box<[u8]>,
}

/// The MPI side: two private duplicates of the program's communicator and
/// the sends in flight.
struct Inner {
    /// Freed on drop, unless an agreement on them may still be pending
    /// (see `Drop`).
    user: ManuallyDrop<SimpleCommunicator>,
    internal: ManuallyDrop<SimpleCommunicator>,
    in_flight: Vec<InFlight>,
    /// The error scope of both duplicates.
    #[cfg(feature = "ulfm")]
    watch: scope::Watch,
    /// Whether collectives end in an agreement on their outcome.
    #[cfg(feature = "ulfm")]
    uniform: bool,
}

/// frame's [`Comm`] over an MPI communicator.
///
/// ```no_run
/// use frame::comm::mpi::{MpiComm, Nodes};
/// use frame::{config::Config, Checkpointer};
/// use mpi::traits::*;
///
/// let (universe, _) = mpi::initialize_with_threading(mpi::Threading::Serialized).unwrap();
/// let cfg = Config::load(None).unwrap();
/// let comm = MpiComm::new(&universe.world(), Nodes::from_config(&cfg)).unwrap();
/// let mut ckpt = Checkpointer::init(&cfg, &comm).unwrap();
/// let state = ckpt.protect(0, vec![0.0f64; 1024]);
/// ckpt.snapshot().unwrap();
/// # drop(state);
/// ```
pub struct MpiComm {
    rank: Rank,
    size: usize,
    node: NodeId,
    /// What failed before this communicator was made (after a repair).
    recovery: RecoveryContext,
    inner: Mutex<Inner>,
}

// SAFETY: every MPI call made through an `MpiComm` holds its lock, so calls
// never overlap; which thread may make them is MPI's threading level, as
// the module documentation says. The handles themselves are plain values
// (an integer or a pointer the MPI library owns for the communicator's
// lifetime).
unsafe impl Send for MpiComm {}

impl MpiComm {
    /// Wraps `comm` (duplicated: the program's own messages on it never
    /// meet frame's), with nodes grouped as `nodes` says. Collective over
    /// `comm`.
    pub fn new(comm: &impl Communicator, nodes: Nodes) -> CommResult<Self> {
        let node = placement(comm, nodes)?.node;
        Self::with_node(comm, node)
    }

    /// Wraps `comm` with this rank on `node`, a node id the caller worked
    /// out (for example on a larger communicator). Collective over `comm`.
    pub fn with_node(comm: &impl Communicator, node: NodeId) -> CommResult<Self> {
        let (user, internal) = (comm.duplicate(), comm.duplicate());
        // Errors come back as codes, checked by every call (and as
        // failures to repair from under ULFM), never as an abort.
        errors::return_errors(user.as_raw());
        errors::return_errors(internal.as_raw());
        Ok(Self {
            rank: comm.rank() as Rank,
            size: comm.size() as usize,
            node,
            recovery: RecoveryContext::default(),
            inner: Mutex::new(Inner {
                #[cfg(feature = "ulfm")]
                watch: scope::Watch::new(ErrorScope::Operation, [user.as_raw(), internal.as_raw()]),
                #[cfg(feature = "ulfm")]
                uniform: false,
                user: ManuallyDrop::new(user),
                internal: ManuallyDrop::new(internal),
                in_flight: Vec::new(),
            }),
        })
    }

    /// The same communicator, telling the program and the checkpointer
    /// what failed before it was made ([`RuntimeLink::recovery`]): a
    /// repair hands this to the re-entered program, so that failure-aware
    /// recovery picks the level from the failure topology.
    pub fn with_recovery(mut self, recovery: RecoveryContext) -> Self {
        self.recovery = recovery;
        self
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Inner {
    /// The communicator and MPI tag for a frame tag.
    fn route(&self, tag: u64) -> CommResult<(&SimpleCommunicator, i32)> {
        let (comm, tag) = if tag >= INTERNAL {
            (&self.internal, tag - INTERNAL)
        } else {
            (&self.user, tag)
        };
        let tag = i32::try_from(tag)
            .map_err(|_| CommError::Unsupported(format!("tag {tag} is above MPI's tag range")))?;
        Ok((comm, tag))
    }

    /// What an operation calls while it waits: its error scope's watch.
    fn watcher(&self) -> impl FnMut() {
        #[cfg(feature = "ulfm")]
        {
            let watch = self.watch;
            move || {
                watch.tripped();
            }
        }
        #[cfg(not(feature = "ulfm"))]
        {
            || {}
        }
    }

    /// Before an operation `what`: fails if a process in the error scope
    /// failed (and revokes the communicators, for every member).
    fn ready(&self, what: &str) -> CommResult<()> {
        #[cfg(feature = "ulfm")]
        if self.watch.tripped() {
            return Err(CommError::Broken(format!(
                "{what}: a process in the communicator's error scope ({}) failed",
                self.watch.scope()
            )));
        }
        let _ = what;
        Ok(())
    }

    /// After an operation: a failure it met is every member's in an error
    /// scope wider than the operation.
    fn outcome<T>(&self, result: CommResult<T>) -> CommResult<T> {
        #[cfg(feature = "ulfm")]
        if matches!(
            result,
            Err(CommError::PeerFailed { .. } | CommError::Broken(_))
        ) {
            self.watch.escalate();
        }
        result
    }

    /// After a collective `what`: its outcome, the same at every rank in
    /// uniform mode.
    fn settle<T>(&self, what: &str, result: CommResult<T>) -> CommResult<T> {
        let result = self.outcome(result);
        #[cfg(feature = "ulfm")]
        if self.uniform {
            return scope::uniform(self.internal.as_raw(), what, result);
        }
        let _ = what;
        result
    }

    /// Forgets the sends MPI has finished with.
    fn retire(&mut self) {
        self.in_flight.retain_mut(|s| {
            let mut done = 0;
            // SAFETY: `request` came from MPI_Isend and is still active; a
            // completed request is set to MPI_REQUEST_NULL and dropped here.
            // A send that failed (its peer died) is over too.
            let rc = unsafe { ffi::MPI_Test(&mut s.request, &mut done, ffi::RSMPI_STATUS_IGNORE) };
            rc == ffi::MPI_SUCCESS as i32 && done == 0
        });
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        #[cfg(feature = "ulfm")]
        let comm = self.user.as_raw();
        for mut s in std::mem::take(&mut self.in_flight) {
            // Waits until MPI is done with the buffer. Under ULFM, a send
            // whose receiver left after a failure may never complete (Open
            // MPI 5.0.11 keeps a large one pending even on a revoked
            // communicator): once MPI reports a failed process in the
            // communicator, the request and its buffer are left to MPI
            // (leaked) instead: the process ends without MPI_Finalize
            // after a failure.
            let abandon = || {
                #[cfg(feature = "ulfm")]
                return ulfm::failed_in(comm).is_some_and(|n| n > 0);
                #[cfg(not(feature = "ulfm"))]
                false
            };
            // SAFETY: an active request of MPI_Isend on `s._buffer`.
            let done = unsafe { polite::settle(&mut s.request, abandon) };
            if done.is_none() {
                std::mem::forget(s._buffer);
            }
        }
        // A revoked communicator may have an agreement of uniform mode
        // still pending (given up: see `scope::uniform`); Open MPI 5.0.11
        // crashes when a message of it arrives for a freed communicator.
        // Such a communicator is left to MPI: one pair per failure.
        #[cfg(feature = "ulfm")]
        if ulfm::is_revoked(self.internal.as_raw()) || ulfm::is_revoked(self.user.as_raw()) {
            return;
        }
        // SAFETY: dropped once, here, and never used again.
        unsafe {
            ManuallyDrop::drop(&mut self.user);
            ManuallyDrop::drop(&mut self.internal);
        }
    }
}

fn mpi_op(op: ReduceOp) -> SystemOperation {
    match op {
        ReduceOp::And => SystemOperation::bitwise_and(),
        ReduceOp::Or => SystemOperation::bitwise_or(),
        ReduceOp::Min => SystemOperation::min(),
        ReduceOp::Max => SystemOperation::max(),
        ReduceOp::Sum => SystemOperation::sum(),
    }
}

/// A repaired communicator tells what failed before it was made.
impl RuntimeLink for MpiComm {
    fn recovery(&self) -> RecoveryContext {
        self.recovery.clone()
    }
}

impl Comm for MpiComm {
    fn rank(&self) -> Rank {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn node(&self) -> NodeId {
        self.node
    }

    fn link(&self) -> &dyn RuntimeLink {
        self
    }

    fn send_tagged(&self, dest: Rank, tag: u64, data: &[u8]) -> CommResult<()> {
        check_rank(self, dest)?;
        let count = i32::try_from(data.len()).map_err(|_| {
            CommError::Unsupported(format!(
                "a message of {} bytes is above MPI's count",
                data.len()
            ))
        })?;
        let mut inner = self.lock();
        inner.retire();
        inner.ready("a send")?;
        let buffer: Box<[u8]> = data.into();
        let (comm, tag) = inner.route(tag)?;
        let mut request = std::mem::MaybeUninit::<ffi::MPI_Request>::uninit();
        // SAFETY: the buffer is moved into `in_flight` below and stays there
        // (heap memory does not move) until MPI_Test or MPI_Wait reports the
        // send complete.
        let rc = unsafe {
            ffi::MPI_Isend(
                buffer.as_ptr().cast(),
                count,
                ffi::RSMPI_UINT8_T,
                dest as i32,
                tag,
                comm.as_raw(),
                request.as_mut_ptr(),
            )
        };
        inner.outcome(check(rc, "a send", Some(dest)))?;
        // SAFETY: MPI_Isend succeeded, so it wrote the request.
        let request = unsafe { request.assume_init() };
        inner.in_flight.push(InFlight {
            request,
            _buffer: buffer,
        });
        Ok(())
    }

    fn recv_tagged(&self, src: Rank, tag: u64) -> CommResult<Bytes> {
        check_rank(self, src)?;
        let mut inner = self.lock();
        inner.retire();
        inner.ready("a receive")?;
        let (comm, tag) = inner.route(tag)?;
        let received = polite::receive(comm.as_raw(), src as i32, tag, inner.watcher())
            .map(Bytes::from)
            .map_err(|rc| errors::failure(rc, "a receive", Some(src)));
        inner.outcome(received)
    }

    fn barrier(&self) -> CommResult<()> {
        let mut inner = self.lock();
        inner.retire();
        // A rank that fails before the call still takes part in the
        // agreement of uniform mode (as in every collective below).
        let result = inner.ready("a barrier").and_then(|()| {
            let comm = inner.internal.as_raw();
            // SAFETY: no buffers.
            let rc = unsafe { polite::complete(|r| ffi::MPI_Ibarrier(comm, r), inner.watcher()) };
            check(rc, "a barrier", None)
        });
        inner.settle("a barrier", result)
    }

    fn all_reduce_u64(&self, values: &mut [u64], op: ReduceOp) -> CommResult<()> {
        let mut inner = self.lock();
        inner.retire();
        let result = (|| {
            inner.ready("an all-reduce")?;
            let comm = inner.internal.as_raw();
            let count = count_of(values.len(), "an all-reduce")?;
            let send = values.to_vec();
            let op = mpi_op(op).as_raw();
            // SAFETY: both buffers hold `count` u64 and outlive the wait.
            let rc = unsafe {
                polite::complete(
                    |r| {
                        ffi::MPI_Iallreduce(
                            send.as_ptr().cast(),
                            values.as_mut_ptr().cast(),
                            count,
                            ffi::RSMPI_UINT64_T,
                            op,
                            comm,
                            r,
                        )
                    },
                    inner.watcher(),
                )
            };
            check(rc, "an all-reduce", None)?;
            Ok(())
        })();
        inner.settle("an all-reduce", result)
    }

    fn all_reduce_f64(&self, values: &mut [f64], op: ReduceOp) -> CommResult<()> {
        // frame's own tree keeps the order of a sum fixed.
        let result = collective::all_reduce_f64(self, values, op);
        self.lock().settle("an all-reduce", result)
    }

    fn broadcast(&self, data: &mut Vec<u8>, root: Rank) -> CommResult<()> {
        let mut inner = self.lock();
        inner.retire();
        let result = (|| {
            check_rank(self, root)?;
            inner.ready("a broadcast")?;
            let comm = inner.internal.as_raw();
            let root = root as i32;
            let mut len = data.len() as u64;
            // SAFETY: one u64 that outlives the wait.
            let rc = unsafe {
                polite::complete(
                    |r| {
                        ffi::MPI_Ibcast(
                            (&raw mut len).cast(),
                            1,
                            ffi::RSMPI_UINT64_T,
                            root,
                            comm,
                            r,
                        )
                    },
                    inner.watcher(),
                )
            };
            check(rc, "a broadcast", None)?;
            let count = usize::try_from(len)
                .ok()
                .and_then(|l| count_of(l, "a broadcast").ok())
                .ok_or_else(|| CommError::Unsupported(format!("a broadcast of {len} bytes")))?;
            data.resize(count as usize, 0);
            // SAFETY: `data` holds `count` bytes and outlives the wait.
            let rc = unsafe {
                polite::complete(
                    |r| {
                        ffi::MPI_Ibcast(
                            data.as_mut_ptr().cast(),
                            count,
                            ffi::RSMPI_UINT8_T,
                            root,
                            comm,
                            r,
                        )
                    },
                    inner.watcher(),
                )
            };
            check(rc, "a broadcast", None)?;
            Ok(())
        })();
        inner.settle("a broadcast", result)
    }

    fn all_gather(&self, data: &[u8]) -> CommResult<Vec<Bytes>> {
        let mut inner = self.lock();
        inner.retire();
        let result = (|| {
            inner.ready("an all-gather")?;
            let comm = inner.internal.as_raw();
            let mine = count_of(data.len(), "an all-gather")?;
            let mut counts = vec![0i32; self.size];
            // SAFETY: one int sent, one per rank received; both outlive the wait.
            let rc = unsafe {
                polite::complete(
                    |r| {
                        ffi::MPI_Iallgather(
                            (&raw const mine).cast(),
                            1,
                            ffi::RSMPI_INT32_T,
                            counts.as_mut_ptr().cast(),
                            1,
                            ffi::RSMPI_INT32_T,
                            comm,
                            r,
                        )
                    },
                    inner.watcher(),
                )
            };
            check(rc, "an all-gather", None)?;
            let (mut all, displs) = receive_buffer(&counts, "an all-gather")?;
            // SAFETY: `all` holds the sum of `counts` bytes at `displs`; every
            // buffer outlives the wait.
            let rc = unsafe {
                polite::complete(
                    |r| {
                        ffi::MPI_Iallgatherv(
                            data.as_ptr().cast(),
                            mine,
                            ffi::RSMPI_UINT8_T,
                            all.as_mut_ptr().cast(),
                            counts.as_ptr(),
                            displs.as_ptr(),
                            ffi::RSMPI_UINT8_T,
                            comm,
                            r,
                        )
                    },
                    inner.watcher(),
                )
            };
            check(rc, "an all-gather", None)?;
            Ok(split(all, &counts, &displs))
        })();
        inner.settle("an all-gather", result)
    }

    fn gather(&self, data: &[u8], root: Rank) -> CommResult<Option<Vec<Bytes>>> {
        let mut inner = self.lock();
        inner.retire();
        let result = (|| {
            check_rank(self, root)?;
            inner.ready("a gather")?;
            let comm = inner.internal.as_raw();
            let at = root as i32;
            let mine = count_of(data.len(), "a gather")?;
            let mut counts = vec![0i32; if self.rank == root { self.size } else { 0 }];
            // SAFETY: one int sent; the root receives one per rank; both
            // outlive the wait.
            let rc = unsafe {
                polite::complete(
                    |r| {
                        ffi::MPI_Igather(
                            (&raw const mine).cast(),
                            1,
                            ffi::RSMPI_INT32_T,
                            counts.as_mut_ptr().cast(),
                            1,
                            ffi::RSMPI_INT32_T,
                            at,
                            comm,
                            r,
                        )
                    },
                    inner.watcher(),
                )
            };
            check(rc, "a gather", None)?;
            let (mut all, displs) = receive_buffer(&counts, "a gather")?;
            // SAFETY: as in `all_gather`, on the root; elsewhere the receive
            // arguments are not read.
            let rc = unsafe {
                polite::complete(
                    |r| {
                        ffi::MPI_Igatherv(
                            data.as_ptr().cast(),
                            mine,
                            ffi::RSMPI_UINT8_T,
                            all.as_mut_ptr().cast(),
                            counts.as_ptr(),
                            displs.as_ptr(),
                            ffi::RSMPI_UINT8_T,
                            at,
                            comm,
                            r,
                        )
                    },
                    inner.watcher(),
                )
            };
            check(rc, "a gather", None)?;
            Ok((self.rank == root).then(|| split(all, &counts, &displs)))
        })();
        inner.settle("a gather", result)
    }
}
