//! Communication: the one trait through which frame talks to a parallel runtime.
//!
//! The checkpoint library needs little from the runtime it runs under: who am I,
//! how many are we, which node am I on, and a handful of collectives. [`Comm`]
//! names exactly that. Implementations provide two transport primitives
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
mod local;
#[cfg(feature = "mpi")]
pub mod mpi;
pub mod net;
mod typed;

pub use bytes::Bytes;
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

/// The failures that led to a communicator's epoch: the ranks whose
/// processes died, and the nodes that died with their storage.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Failures {
    /// The runtime's epoch (0 outside the runtime).
    pub epoch: u64,
    /// When the runtime's run was launched (nanoseconds since the Unix
    /// epoch by its launcher's clock; 0 outside a runtime that says):
    /// with the epoch, it fences the job's shared storage against writes
    /// of nodes the job gave up on.
    pub launch: u64,
    /// Failed ranks.
    pub ranks: Vec<u32>,
    /// Failed nodes.
    pub nodes: Vec<u32>,
    /// Every rank's node in this epoch, as the runtime placed them (empty
    /// when the runtime does not say): the checkpoint library takes the
    /// job's placement from here rather than gathering it from every rank.
    pub placement: Vec<u32>,
    /// The newest checkpoint the runtime was told had committed on every
    /// rank (see [`Comm::note_committed`]), kept by the runtime outside
    /// the nodes' storage: evidence that survives the loss of every node
    /// that held the checkpoint.
    pub committed: Option<u64>,
    /// This rank replaces a failed one while the others go on (localised
    /// recovery): it restores its own newest checkpoint alone, and its
    /// communicator asks the survivors for the messages it lost.
    pub rejoin: bool,
    /// Such a replacement started on a spare node, its failed rank's node
    /// gone with its storage (a logged recovery of a node failure).
    pub stand_in: Option<StandIn>,
    /// Failed nodes whose place a spare node took in a logged recovery,
    /// and that spare node, for the job so far: the checkpoints promoted
    /// while it stood in name the failed node in their layouts, and their
    /// copies are on the spare node.
    pub stood_in: std::collections::BTreeMap<u32, u32>,
    /// When this rank's process learned of the recovery that led to the
    /// epoch and when it was released into it (under a runtime that says):
    /// the recovery's metrics time the rank's part from there.
    pub reentry: Option<Reentry>,
}

/// A rank's way back into a new epoch, as its process lived it: the
/// wall-clock times are nanoseconds since the Unix epoch, so that the
/// metrics can line them up with the runtime's record of the recovery.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reentry {
    /// When the process learned of the recovery (a survivor: the order to
    /// roll back; a replacement: when it was given the rank).
    pub began_ns: u64,
    /// When the process was released into the new epoch.
    pub released_ns: u64,
    /// The process's CPU time when it learned of the recovery
    /// (nanoseconds; see [`crate::metrics::process_cpu_time`]).
    pub cpu_at_began_ns: u64,
}

/// A replacement started on another node than its failed rank's, which
/// died: the node it stands in for, where its checkpoint's copies are,
/// and where the job's node managers listen now. Node ids are the ones
/// the ranks' promotions know (those of the epoch's start): the spare
/// node takes the failed one's place among them.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StandIn {
    /// The failed node whose ranks the spare node now runs.
    pub node: u32,
    /// Every rank's node at the epoch's start.
    pub placement: Vec<u32>,
    /// Where each node's manager listens now (the failed node's: the
    /// spare node's manager).
    pub managers: std::collections::BTreeMap<u32, net::Endpoint>,
}

/// Where a logging communicator stands (see
/// [`net::NetComm::with_journal`]): the checkpoint its log's window
/// started at, and for each rank the number of the last message sent to it
/// and received from it. Saved with each checkpoint, it lets a replacement
/// restored from that checkpoint number its messages on and ask the
/// survivors for the rest (localised recovery).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MessageCounts {
    /// The checkpoint the window started at (0: the epoch's start).
    pub window: u64,
    /// Per rank: the number of the last message sent to it.
    pub sent: Vec<u64>,
    /// Per rank: the number of the last message received from it.
    pub received: Vec<u64>,
}

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

    /// This rank's node as the checkpointer and the manager need it: its
    /// id and, under frame's runtime, the directory and manager the runtime
    /// gave it.
    fn place(&self) -> crate::node::NodePlace {
        crate::node::NodePlace::standalone(self.node())
    }

    /// The failures recovered from just before this communicator's epoch,
    /// as the runtime knows them (none outside the runtime). The checkpoint
    /// library plans its recovery from them.
    fn failures(&self) -> Failures {
        Failures::default()
    }

    /// Tells the runtime that checkpoint `id` committed on every rank, or
    /// with `None` that the job is removing its checkpoints at its end (so
    /// a failure from now on may start over). The runtime hands the newest
    /// such id back in [`Failures::committed`] after a failure. Outside a
    /// runtime that keeps it, this does nothing.
    fn note_committed(&self, id: Option<u64>) {
        let _ = id;
    }

    /// Asks the runtime that owns the job's outcome whether the job ends
    /// well, before the library removes its checkpoints at the end:
    /// `Err` says why not (the runtime is gone or cut off, or is
    /// recovering a failure), and every checkpoint is then kept. Outside
    /// a runtime, the program's end is the job's: always `Ok`.
    fn confirm_end(&self) -> Result<(), String> {
        Ok(())
    }

    /// Where this communicator's message log stands, for the checkpoint
    /// being written; `None` when it keeps no log (the default) or when its
    /// receives are not in each sender's order at this point. A logging
    /// communicator also marks this point: the window the checkpoint's
    /// commit opens keeps the messages sent from here on.
    fn message_counts(&self) -> Option<MessageCounts> {
        None
    }

    /// Continues from `counts`, saved with the checkpoint this rank was
    /// restored from as a replacement (a communicator without a log
    /// ignores it).
    fn resume_messages(&self, counts: &MessageCounts) {
        let _ = counts;
    }

    /// Asks the runtime to recover globally instead of the localised
    /// recovery this rank is part of (see [`Failures::rejoin`]), for
    /// `reason`; returns the error to fail with (the interrupt of that
    /// recovery), or `None` where no runtime recovers that way.
    fn fall_back(&self, reason: &str) -> Option<CommError> {
        let _ = reason;
        None
    }

    /// The node managers that moved since the epoch began, by the node id
    /// the ranks' promotions know: a logged recovery of a node failure
    /// runs the failed node's ranks on a spare node, whose manager takes
    /// the failed one's place (see [`StandIn`]). Its replacements say so
    /// when they ask for their messages.
    fn moved_managers(&self) -> std::collections::BTreeMap<u32, net::Endpoint> {
        std::collections::BTreeMap::new()
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
