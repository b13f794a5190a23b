//! Which failures an [`MpiComm`]'s operations report, and
//! whether its collectives report them uniformly: the error scopes and
//! the uniform mode of the paper "Implicit actions and non-blocking
//! failure recovery with MPI" (the `ulfm` feature).
//!
//! MPI libraries that offer these as communicator info keys
//! (`mpix_error_range`) are not on the package registries (Open MPI
//! 5.0.11 has none), so frame implements them in its communicator layer:
//! - [`ErrorScope::Operation`], ULFM's own behaviour: an operation fails
//!   only when a process it involves has failed. No cost.
//! - [`ErrorScope::Communicator`]: once this process knows of a failed
//!   process of the communicator (MPI's failure detector reports it out of
//!   band, or one of its own operations failed), frame revokes the
//!   communicator: every pending and later operation of every member
//!   fails, whether or not it involves the failed process. Each operation
//!   asks MPI for the communicator's failed processes before it starts and
//!   every few tests while it waits (a local call).
//! - [`ErrorScope::Universe`]: the same for a failed process anywhere in
//!   the job (`MPI_COMM_WORLD`), member of this communicator or not: the
//!   scope of a library whose ranks must stop when another part of the
//!   program loses a process.
//!
//! Uniform mode ([`MpiComm::with_uniform_errors`])
//! ends every collective (barrier, reductions, broadcast, gathers) with an
//! agreement on whether it succeeded at every rank and no process of the
//! communicator failed: every survivor returns the same outcome for the
//! same call, at the price of one agreement per collective. A rank whose
//! scope failed the call before it started joins the agreement too. A
//! revoked communicator (a member left the program after an error, which
//! revokes it) ends the agreement waited for with an error: that member
//! never joins it.
//!
//! The counts compared are of processes MPI reports failed when the scope
//! was set, so a failure before then (repaired already) is not reported
//! again.

use super::MpiComm;
use crate::comm::CommError;
use mpi::ffi;
use mpi::raw::AsRaw;

pub use crate::config::ErrorScope;

/// An error scope at work on a pair of communicators (an `MpiComm`'s
/// duplicates, the same processes): what it watches and what it revokes.
#[derive(Clone, Copy, Debug)]
pub(super) struct Watch {
    scope: ErrorScope,
    /// Processes MPI reported failed in the scope when it was set.
    known: usize,
    comms: [ffi::MPI_Comm; 2],
}

impl Watch {
    /// `scope` over `comms`, counting the failures known now as old.
    pub(super) fn new(scope: ErrorScope, comms: [ffi::MPI_Comm; 2]) -> Self {
        let mut watch = Watch {
            scope,
            known: 0,
            comms,
        };
        watch.known = watch.failed().unwrap_or(0);
        watch
    }

    /// The scope watched.
    pub(super) fn scope(&self) -> ErrorScope {
        self.scope
    }

    /// How many processes of the scope MPI reports failed (`None` for the
    /// operation scope, which watches nothing).
    fn failed(&self) -> Option<usize> {
        let comm = match self.scope {
            ErrorScope::Operation => return None,
            ErrorScope::Communicator => self.comms[0],
            // SAFETY: a constant rsmpi reads from the MPI library.
            ErrorScope::Universe => unsafe { ffi::RSMPI_COMM_WORLD },
        };
        super::ulfm::failed_in(comm)
    }

    /// Whether a process of the scope failed since it was set; revokes the
    /// communicators if so (every member's operations on them then fail).
    pub(super) fn tripped(&self) -> bool {
        let tripped = self.failed().is_some_and(|n| n > self.known);
        if tripped {
            self.revoke();
        }
        tripped
    }

    /// After an operation failed on a failed process: in a scope wider
    /// than the operation, the failure is every member's (revokes).
    pub(super) fn escalate(&self) {
        if self.scope != ErrorScope::Operation {
            self.revoke();
        }
    }

    fn revoke(&self) {
        for comm in self.comms {
            super::ulfm::revoke_raw(comm);
        }
    }
}

/// The outcome of a collective `what` in uniform mode: an agreement over
/// `comm` on whether it succeeded at every rank with no process failed;
/// this rank's own error if it had one, else an error naming the mode.
/// Once the communicator is revoked the agreement is given up (a member
/// that left after an error would never join it): the collective fails.
pub(super) fn uniform<T>(
    comm: ffi::MPI_Comm,
    what: &str,
    result: Result<T, CommError>,
) -> Result<T, CommError> {
    match super::ulfm::agree_unless_revoked(comm, u32::from(result.is_ok())) {
        Ok(agreed) if agreed.flag == 1 && !agreed.failed => result,
        Ok(_) => Err(result.err().unwrap_or_else(|| {
            CommError::Broken(format!(
                "{what}: it failed at another rank, or a process failed (uniform error reporting)"
            ))
        })),
        Err(e) => Err(e),
    }
}

impl MpiComm {
    /// This communicator with `scope` as its error scope: which failures
    /// its operations report (see [`ErrorScope`]). Failures MPI reported
    /// before this call are not reported again. Each rank sets its own;
    /// ranks of a communicator normally set the same.
    pub fn with_error_scope(self, scope: ErrorScope) -> Self {
        {
            let mut inner = self.lock();
            let comms = [inner.user.as_raw(), inner.internal.as_raw()];
            inner.watch = Watch::new(scope, comms);
        }
        self
    }

    /// This communicator's error scope.
    pub fn error_scope(&self) -> ErrorScope {
        self.lock().watch.scope()
    }

    /// This communicator with uniform error reporting on or off: on, every
    /// collective ends in an agreement, so that it fails at every rank or
    /// at none (see the module documentation). All ranks of the
    /// communicator must set the same.
    pub fn with_uniform_errors(self, uniform: bool) -> Self {
        self.lock().uniform = uniform;
        self
    }
}
