//! Communication: the one trait through which frame moves bytes between
//! ranks, and the link through which a runtime tells them of failures.
//!
//! The checkpoint library needs little from the transport it runs over: who
//! am I, how many are we, which node am I on, and a handful of
//! collectives. [`Comm`] names exactly that. What the runtime that started
//! the ranks tells them (where they run, what failed, what committed) and
//! hears from them is a separate face, [`RuntimeLink`] (`link.rs`), which a
//! communicator hands out with [`Comm::link`]. Implementations provide two transport primitives
//! ([`Comm::send_tagged`] and [`Comm::recv_tagged`]); every collective has a
//! default implementation built on them (see `collective.rs`), which an
//! implementation may override with a native one.
//!
//! [`CommExt`] adds typed helpers for slices of plain data to every
//! communicator.
//!
//! [`LocalComm`] runs every rank as a thread of one process, for tests and
//! single-machine demos; [`net::NetComm`] connects the rank processes of the
//! runtime (the `frame-runtime` crate) over Unix or TCP sockets; with the `mpi`
//! feature, `mpi::MpiComm` runs frame inside an MPI program.

mod collective;
mod link;
mod local;
#[cfg(feature = "mpi")]
pub mod mpi;
pub mod net;
mod typed;

pub use crate::topology::FailureTopology;
pub use bytes::Bytes;
pub(crate) use link::place;
pub use link::{
    MessageCounts, RecoveryContext, RecoveryWatch, Reentry, RuntimeLink, StandIn, Standalone,
};
pub use local::LocalComm;
pub use typed::{CommExt, Reducible};

/// A rank: the index of a process in a communicator, `0..size`.
pub type Rank = usize;

/// Identifies a node (a failure domain: its ranks and storage fail together).
pub type NodeId = u32;

/// A message tag chosen by user code. Tags only match messages with the same
/// tag; the tag space of frame's own collectives is separate and cannot clash.
pub type Tag = u32;

/// Element-wise reduction applied by the all-reduce collectives.
///
/// `And` and `Or` are bitwise on integers (so 0/1 flags give logical results)
/// and are rejected for floating point values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    /// Bitwise AND.
    And,
    /// Bitwise OR.
    Or,
    /// Minimum.
    Min,
    /// Maximum.
    Max,
    /// Sum (wrapping for integers; for floats the order is fixed, so results
    /// are reproducible run to run for the same number of ranks).
    Sum,
}

/// Errors raised by a communicator.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CommError {
    /// A rank argument is outside `0..size`.
    #[error("rank {rank} is out of range for a communicator of {size} ranks")]
    InvalidRank {
        /// The offending rank.
        rank: Rank,
        /// The communicator size.
        size: usize,
    },
    /// The peer rank died or left the communicator before the operation completed.
    #[error("rank {rank} failed or left the communicator")]
    PeerFailed {
        /// The rank that is gone.
        rank: Rank,
    },
    /// The operation was abandoned because the runtime started a recovery.
    #[error("interrupted by recovery (new epoch {epoch})")]
    Interrupted {
        /// The epoch the runtime moved to.
        epoch: u64,
    },
    /// Ranks disagreed on the shape of a collective (for example different lengths).
    #[error("collective {op}: rank {rank} sent {got} bytes, expected {expected}")]
    Mismatch {
        /// The collective.
        op: &'static str,
        /// The rank whose contribution did not fit.
        rank: Rank,
        /// Bytes received.
        got: usize,
        /// Bytes expected.
        expected: usize,
    },
    /// The communicator can no longer be used: a process of it failed
    /// during a collective, or a rank revoked it after seeing a failure
    /// (MPI's User-Level Failure Mitigation). The job repairs it before it
    /// goes on.
    #[error("the communicator is broken by a failure: {0}")]
    Broken(String),
    /// The operation is not defined for the arguments (e.g. bitwise AND on floats).
    #[error("unsupported operation: {0}")]
    Unsupported(String),
    /// The transport failed.
    #[error("transport error: {0}")]
    Transport(#[from] std::io::Error),
}

/// Convenience alias for results of communication calls.
pub type CommResult<T> = Result<T, CommError>;

/// What frame needs from a parallel runtime.
///
/// Contract for implementors:
/// - [`send_tagged`](Comm::send_tagged) is *eager*: it returns without waiting
///   for the matching receive, so two ranks may both send before receiving.
/// - Messages between one pair of ranks with one tag are delivered in order.
/// - Once a peer is known to be gone, receives from it fail with
///   [`CommError::PeerFailed`] instead of blocking forever.
/// - Collectives must be called by every rank in the same order.
///
/// The trait is object safe: library code takes `&dyn Comm`.
pub trait Comm: Send {
    /// This process's rank.
    fn rank(&self) -> Rank;
    /// Number of ranks.
    fn size(&self) -> usize;
    /// The node this rank runs on.
    fn node(&self) -> NodeId;

    /// What the runtime that started this rank tells it and hears from it
    /// (see [`RuntimeLink`]); outside a runtime, [`Standalone`]: nothing
    /// failed, nothing is kept.
    fn link(&self) -> &dyn RuntimeLink {
        &Standalone
    }

    /// Transport primitive: sends bytes with a 64-bit tag. User tags occupy the
    /// low 32 bits; frame's collectives use tags at or above 2^32.
    fn send_tagged(&self, dest: Rank, tag: u64, data: &[u8]) -> CommResult<()>;
    /// Transport primitive: receives the next message from `src` with `tag`.
    fn recv_tagged(&self, src: Rank, tag: u64) -> CommResult<Bytes>;

    /// Sends a byte message to `dest` (eager: does not wait for the receiver).
    fn send(&self, dest: Rank, tag: Tag, data: &[u8]) -> CommResult<()> {
        self.send_tagged(dest, u64::from(tag), data)
    }
    /// Receives the next byte message from `src` carrying `tag`. The bytes
    /// are handed over without a copy.
    fn recv(&self, src: Rank, tag: Tag) -> CommResult<Bytes> {
        self.recv_tagged(src, u64::from(tag))
    }
    /// Blocks until every rank has entered the barrier.
    fn barrier(&self) -> CommResult<()> {
        collective::barrier(self)
    }
    /// Reduces `values` element-wise over all ranks; every rank gets the result.
    fn all_reduce_u64(&self, values: &mut [u64], op: ReduceOp) -> CommResult<()> {
        collective::all_reduce_u64(self, values, op)
    }
    /// Reduces `values` element-wise over all ranks (`Min`, `Max` or `Sum`).
    fn all_reduce_f64(&self, values: &mut [f64], op: ReduceOp) -> CommResult<()> {
        collective::all_reduce_f64(self, values, op)
    }
    /// Copies `data` from `root` to every rank (other ranks' `data` is replaced).
    fn broadcast(&self, data: &mut Vec<u8>, root: Rank) -> CommResult<()> {
        collective::broadcast(self, data, root)
    }
    /// Collects every rank's `data` at `root`, in rank order. Returns `Some` on
    /// the root and `None` elsewhere.
    fn gather(&self, data: &[u8], root: Rank) -> CommResult<Option<Vec<Bytes>>> {
        collective::gather(self, data, root)
    }
    /// Collects every rank's `data` on every rank, in rank order.
    fn all_gather(&self, data: &[u8]) -> CommResult<Vec<Bytes>> {
        collective::all_gather(self, data)
    }
}

/// Checks that `rank` is a valid rank of `comm`.
pub(crate) fn check_rank(comm: &(impl Comm + ?Sized), rank: Rank) -> CommResult<()> {
    if rank < comm.size() {
        Ok(())
    } else {
        Err(CommError::InvalidRank {
            rank,
            size: comm.size(),
        })
    }
}

/// Tells every rank which ranks hit a local problem, in one all-reduce when
/// there is none (plus an all-gather of the reasons when there is).
///
/// Each rank passes `Some(reason)` if its local step failed. Every rank gets
/// the same list of `(rank, reason)`, empty when all succeeded, so all ranks
/// take the same branch afterwards and none is left waiting in a collective.
pub fn agree_on_problems(comm: &dyn Comm, local: Option<&str>) -> CommResult<Vec<(Rank, String)>> {
    let mut any = [u64::from(local.is_some())];
    comm.all_reduce_u64(&mut any, ReduceOp::Max)?;
    if any[0] == 0 {
        return Ok(Vec::new());
    }
    let mine = match local {
        Some("") => "unspecified failure",
        Some(reason) => reason,
        None => "",
    };
    let all = comm.all_gather(mine.as_bytes())?;
    Ok(all
        .into_iter()
        .enumerate()
        .filter(|(_, r)| !r.is_empty())
        .map(|(rank, r)| (rank, String::from_utf8_lossy(&r).into_owned()))
        .collect())
}
