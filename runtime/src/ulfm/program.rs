//! The program's own MPI communicator in an epoch under ULFM: for programs
//! that make their MPI calls themselves (an application that was an MPI
//! program before it used frame) rather than through frame's [`Comm`].
//!
//! It is a duplicate of the epoch's working communicator (the working
//! ranks, in the job's order), made the first time the program asks for
//! it, returning errors rather than aborting. When the epoch ends in an
//! error, [`super::run`] revokes it with frame's own communicators, so a
//! rank blocked in one of the program's calls learns of the failure too.
//!
//! [`Comm`]: frame::comm::Comm

use frame::comm::mpi::ulfm::{self, FailureWatch};
use mpi::topology::SimpleCommunicator;
use std::cell::OnceCell;

/// The program's communicator of one epoch (made on first use).
pub(crate) struct ProgramComm<'w> {
    work: &'w SimpleCommunicator,
    /// The communicator, and the watch for news of a failure on it.
    dup: OnceCell<(SimpleCommunicator, FailureWatch)>,
}

impl<'w> ProgramComm<'w> {
    /// For the epoch whose working communicator is `work`.
    pub(crate) fn new(work: &'w SimpleCommunicator) -> Self {
        Self {
            work,
            dup: OnceCell::new(),
        }
    }

    /// The communicator, made on the first call (collective over the
    /// working ranks then: every rank asks for it in the same place).
    pub(crate) fn get(&self) -> &SimpleCommunicator {
        let (dup, _) = self
            .dup
            .get_or_init(|| (ulfm::duplicate(self.work), FailureWatch::beyond(0)));
        dup
    }

    /// The communicator, if the program made it and its calls must end
    /// (a local call): a rank revoked it, or MPI knows that one of its
    /// processes failed. The second lets a rank that waits for a live
    /// peer leave as soon as MPI tells it of a failure elsewhere, rather
    /// than when a peer of the dead rank reaches its next call and revokes.
    /// (See [`FailureWatch`]: the failed processes are asked for once a
    /// millisecond at most.)
    pub(crate) fn interrupted(&self) -> Option<&SimpleCommunicator> {
        let (dup, watch) = self.dup.get()?;
        watch.news(dup).then_some(dup)
    }

    /// Revokes the communicator if the program made it: every rank's
    /// pending and later call on it fails.
    pub(crate) fn revoke(&self) {
        if let Some((dup, _)) = self.dup.get() {
            ulfm::revoke(dup);
        }
    }
}
