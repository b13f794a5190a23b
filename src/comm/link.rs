//! What a runtime tells the ranks it started, and hears from them: the
//! recovery that led to their epoch ([`RecoveryContext`], with its
//! [`FailureTopology`]), their node's directory and manager, the
//! checkpoints that committed, how a job ends, and for localised recovery
//! the message log's counts. [`Comm`](super::Comm) carries bytes; this is
//! the control plane beside it, handed out by
//! [`Comm::link`](super::Comm::link).

use super::net::Endpoint;
use super::CommError;
use crate::node::{NodePlace, RuntimeNode};
use crate::topology::FailureTopology;

/// What the runtime tells a rank of the epoch it runs in and of the
/// recovery that led to it: the failure topology, where every rank is,
/// the newest checkpoint known committed, and for a replacement, how it
/// rejoins. The checkpoint library plans its recovery from it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryContext {
    /// The runtime's epoch (0 outside the runtime).
    pub epoch: u64,
    /// When the runtime's run was launched (nanoseconds since the Unix
    /// epoch by its launcher's clock; 0 outside a runtime that says):
    /// with the epoch, it fences the job's shared storage against writes
    /// of nodes the job gave up on.
    pub launch: u64,
    /// The ranks and nodes the recovery that led to this epoch lost.
    pub failed: FailureTopology,
    /// Every rank's node in this epoch, as the runtime placed them (empty
    /// when the runtime does not say): the checkpoint library takes the
    /// job's placement from here rather than gathering it from every rank.
    pub placement: Vec<u32>,
    /// The newest checkpoint the runtime was told had committed on every
    /// rank (see [`RuntimeLink::note_committed`]), kept by the runtime outside
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
    pub managers: std::collections::BTreeMap<u32, Endpoint>,
}

/// Where a logging communicator stands (see
/// [`NetComm::with_journal`](super::net::NetComm::with_journal)): the checkpoint its log's window
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

/// The control plane between a rank and the runtime that started it.
/// Every method has the answer of a rank no runtime started (nothing
/// failed, nothing is kept, nothing is logged), which [`Standalone`] gives.
pub trait RuntimeLink {
    /// What the runtime says of this rank's node (its directory, its
    /// manager); `None` outside frame's runtime.
    fn runtime_node(&self) -> Option<RuntimeNode> {
        None
    }

    /// The epoch and the recovery that led to it, as the runtime knows
    /// them (nothing failed outside a runtime).
    fn recovery(&self) -> RecoveryContext {
        RecoveryContext::default()
    }

    /// Tells the runtime that checkpoint `id` committed on every rank, or
    /// with `None` that the job is removing its checkpoints at its end (so
    /// a failure from now on may start over). The runtime hands the newest
    /// such id back in [`RecoveryContext::committed`] after a failure. Outside a
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
    /// recovery this rank is part of (see [`RecoveryContext::rejoin`]), for
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
    fn moved_managers(&self) -> std::collections::BTreeMap<u32, Endpoint> {
        std::collections::BTreeMap::new()
    }

    /// A way to learn, outside the communicator, that the runtime started
    /// a recovery since this rank's epoch began: a rank waiting on
    /// something other than a message (its node's manager) asks it
    /// between waits and gives up to roll back with the others. Outside a
    /// runtime that recovers in place, it never says so.
    fn recovery_watch(&self) -> RecoveryWatch {
        RecoveryWatch::default()
    }
}

/// Says whether a recovery started since a rank's epoch began (see
/// [`RuntimeLink::recovery_watch`]); cheap to ask and to clone, and usable
/// from any thread.
#[derive(Clone, Default)]
pub struct RecoveryWatch(Option<std::sync::Arc<dyn Fn() -> Option<u64> + Send + Sync>>);

impl RecoveryWatch {
    /// A watch that asks `started`, which returns the epoch of a recovery
    /// started since the rank's epoch began, if any.
    pub fn new(started: impl Fn() -> Option<u64> + Send + Sync + 'static) -> Self {
        Self(Some(std::sync::Arc::new(started)))
    }

    /// The epoch of the recovery started since the rank's epoch began, if
    /// one was.
    pub fn started(&self) -> Option<u64> {
        self.0.as_ref().and_then(|f| f())
    }
}

impl std::fmt::Debug for RecoveryWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("RecoveryWatch")
            .field(&self.started())
            .finish()
    }
}

/// The link of a rank no runtime started (alone, in threads, under MPI).
#[derive(Clone, Copy, Debug, Default)]
pub struct Standalone;

impl RuntimeLink for Standalone {}

/// Where `comm`'s rank runs, as the checkpointer and the manager need it:
/// its node and, under frame's runtime, the directory and manager the
/// runtime gave it.
pub(crate) fn place(comm: &dyn super::Comm) -> NodePlace {
    NodePlace {
        id: comm.node(),
        runtime: comm.link().runtime_node(),
    }
}
