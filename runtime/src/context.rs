//! [`Context`]: what the resilient function knows about its run.

use super::agent::Agent;
use super::inject::{Injection, Target};
use super::proto::FromRank;
use super::State;
use frame::comm::{Comm, CommError, Rank};
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The fault injections a rank may trigger itself.
pub(crate) struct Faults<'a> {
    pub(crate) agent: &'a Agent,
    pub(crate) injections: &'a [(u32, Injection)],
    pub(crate) fired: RefCell<BTreeSet<u32>>,
}

/// Kills this process (SIGKILL), never returning.
pub(crate) fn die() -> ! {
    let _ = rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
    loop {
        std::thread::park();
    }
}

impl Faults<'_> {
    /// Fires injection `idx`: tells the root (so it never fires again) and
    /// kills (or stops) this rank, or this rank's whole node.
    pub(crate) fn fire(&self, idx: u32, inj: &Injection) -> ! {
        self.fired.borrow_mut().insert(idx);
        self.agent.send_flushed(FromRank::Fired { injection: idx });
        let signal = inj.action.signal();
        if let Target::Nodes(_) = inj.target {
            // The daemon leads the node's process group.
            if let Some(daemon) = rustix::process::getppid() {
                let _ = rustix::process::kill_process_group(daemon, signal);
            }
        }
        let _ = rustix::process::kill_process(rustix::process::getpid(), signal);
        // Stopped and then resumed (or killed): never go on as if nothing happened.
        die()
    }
}

/// What the resilient function gets on every (re-)entry.
pub struct Context<'a> {
    pub(crate) comm: &'a dyn Comm,
    pub(crate) state: State,
    pub(crate) epoch: u64,
    pub(crate) failed_ranks: Vec<Rank>,
    pub(crate) failed_nodes: Vec<u32>,
    pub(crate) node_dir: PathBuf,
    pub(crate) launcher_pid: Option<u32>,
    pub(crate) faults: Option<Faults<'a>>,
    pub(crate) team: Option<crate::Team<'a>>,
    /// Under ULFM: the program's own MPI communicator of this epoch.
    #[cfg(feature = "ulfm")]
    pub(crate) mpi: Option<&'a crate::ulfm::ProgramComm<'a>>,
}

impl<'a> Context<'a> {
    /// The communicator of this epoch (world of all ranks).
    pub fn comm(&self) -> &dyn Comm {
        self.comm
    }

    /// The team that shares this replacement's recomputation, when the
    /// rank replaces a failed one in a logged recovery with helpers
    /// (`recovery.spares` above 1) and the program set a helper function
    /// ([`set_helper`](crate::set_helper)); see [`Team`](crate::Team).
    pub fn team(&self) -> Option<&crate::Team<'a>> {
        self.team.as_ref()
    }

    /// How this rank entered: `New`, `Reinited` (survivor rolled back) or
    /// `Restarted` (replacement of a failed rank).
    pub fn state(&self) -> State {
        self.state
    }

    /// The runtime epoch (1 at the start, one more after each recovery).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Ranks that failed in the recovery that led to this entry (each once,
    /// in ascending order).
    pub fn failed_ranks(&self) -> &[Rank] {
        &self.failed_ranks
    }

    /// Nodes that failed in that recovery.
    pub fn failed_nodes(&self) -> &[u32] {
        &self.failed_nodes
    }

    /// Under [`ulfm::run`](crate::ulfm::run): an MPI communicator of the
    /// working ranks, of the job's size and order, for a program that makes
    /// its own MPI calls (`None` under frame's own runtime). It returns
    /// errors rather than aborting; when the resilient function returns an
    /// error, frame revokes it, so every other rank's pending call on it
    /// fails too (the ranks then leave the function and the job repairs).
    /// Made on the first call in an epoch, which is collective: every
    /// working rank asks for it at the same point.
    #[cfg(feature = "ulfm")]
    pub fn mpi_comm(&self) -> Option<&mpi::topology::SimpleCommunicator> {
        self.mpi.map(|p| p.get())
    }

    /// Whether this entry runs under [`ulfm::run`](crate::ulfm::run), so
    /// that [`mpi_comm`](Self::mpi_comm) gives a communicator (a local
    /// call, which makes nothing).
    #[cfg(feature = "ulfm")]
    pub fn has_mpi_comm(&self) -> bool {
        self.mpi.is_some()
    }

    /// [`mpi_comm`](Self::mpi_comm), if the program made it in this epoch
    /// and its calls must end: a rank revoked it, or MPI knows that one of
    /// its processes failed (a local call, never collective). A program
    /// waiting in a call on it polls this: MPI may leave a pending send to
    /// a rank that left the communicator waiting, and a wait for a live
    /// peer would last until that peer learns of the failure itself.
    #[cfg(feature = "ulfm")]
    pub fn mpi_comm_interrupted(&self) -> Option<&mpi::topology::SimpleCommunicator> {
        self.mpi.and_then(|p| p.interrupted())
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.comm.rank()
    }

    /// The node this rank runs on.
    pub fn node(&self) -> u32 {
        self.comm.node()
    }

    /// The node-local storage directory (also the checkpoint library's
    /// `storage.local_dir` for this rank).
    pub fn node_dir(&self) -> &Path {
        &self.node_dir
    }

    /// Process id of the launcher that started the job, if any.
    pub fn launcher_pid(&self) -> Option<u32> {
        self.launcher_pid
    }

    /// To be called once per iteration: reports the iteration (the launcher
    /// shows the job's progress from it), fires any fault injection set for
    /// this iteration (the process dies), and fails with
    /// [`CommError::Interrupted`] if a recovery started, so a rank in a long
    /// compute stretch rolls back without waiting for its next message.
    pub fn fault_point(&self, iteration: u64) -> Result<(), CommError> {
        if let Some(f) = &self.faults {
            f.agent
                .progress
                .store(iteration, std::sync::atomic::Ordering::Relaxed);
            let rank = self.comm.rank() as u32;
            let node = self.comm.node();
            let due = f.injections.iter().find(|(idx, inj)| {
                inj.fires_at(rank, node, iteration) && !f.fired.borrow().contains(idx)
            });
            if let Some((idx, inj)) = due {
                f.fire(*idx, inj);
            }
            if let Some(epoch) = f.agent.hub.interrupted().filter(|e| *e > self.epoch) {
                return Err(CommError::Interrupted { epoch });
            }
        }
        Ok(())
    }
}
