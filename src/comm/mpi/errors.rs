//! MPI's error codes as frame's [`CommError`]s.
//!
//! An `MpiComm` asks MPI to return errors on its communicators rather than
//! abort, and checks every code. Under the `ulfm` feature (an MPI with
//! User-Level Failure Mitigation), a failed process is
//! [`CommError::PeerFailed`] when the peer is known (a send or a receive)
//! and [`CommError::Broken`] when it is not (a collective) or when a rank
//! revoked the communicator; any other code is a transport error with MPI's
//! own message.

use super::super::{CommError, Rank};
use mpi::ffi;
use std::os::raw::{c_char, c_int};

/// MPI's code for success.
const SUCCESS: c_int = ffi::MPI_SUCCESS as c_int;

/// Error classes of ULFM (Open MPI's `mpi.h`, the MPI 4.x draft's
/// `MPIX_ERR_*`).
#[cfg(feature = "ulfm")]
mod class {
    use std::os::raw::c_int;
    pub(super) const PROC_FAILED: c_int = mpi::ffi::MPI_ERR_PROC_FAILED as c_int;
    pub(super) const PROC_FAILED_PENDING: c_int = mpi::ffi::MPI_ERR_PROC_FAILED_PENDING as c_int;
    pub(super) const REVOKED: c_int = mpi::ffi::MPI_ERR_REVOKED as c_int;
}

/// Whether MPI's code `rc` says a process failed or the communicator was
/// revoked (ULFM's classes), rather than a fault of the call itself.
#[cfg(feature = "ulfm")]
pub(super) fn is_failure(rc: c_int) -> bool {
    let mut class = rc;
    // SAFETY: MPI writes one int.
    unsafe { ffi::MPI_Error_class(rc, &mut class) };
    matches!(
        class,
        class::PROC_FAILED | class::PROC_FAILED_PENDING | class::REVOKED
    )
}

/// `Ok` for `MPI_SUCCESS`, else the error `rc` means, for an operation
/// `what` with `peer` (if it had one).
pub(super) fn check(rc: c_int, what: &str, peer: Option<Rank>) -> Result<(), CommError> {
    if rc == SUCCESS {
        return Ok(());
    }
    Err(failure(rc, what, peer))
}

/// The error MPI code `rc` means.
pub(super) fn failure(rc: c_int, what: &str, peer: Option<Rank>) -> CommError {
    let mut class = rc;
    // SAFETY: MPI writes one int.
    unsafe { ffi::MPI_Error_class(rc, &mut class) };
    #[cfg(feature = "ulfm")]
    match (class, peer) {
        (class::PROC_FAILED | class::PROC_FAILED_PENDING, Some(rank)) => {
            return CommError::PeerFailed { rank }
        }
        (class::PROC_FAILED | class::PROC_FAILED_PENDING, None) => {
            return CommError::Broken(format!("{what}: a process failed"))
        }
        (class::REVOKED, _) => {
            return CommError::Broken(format!("{what}: the communicator was revoked"))
        }
        _ => {}
    }
    let _ = peer;
    CommError::Transport(std::io::Error::other(format!(
        "{what}: MPI error {rc} (class {class}): {}",
        message(rc)
    )))
}

/// MPI's text for error code `rc`.
fn message(rc: c_int) -> String {
    let mut text = vec![0 as c_char; ffi::MPI_MAX_ERROR_STRING as usize + 1];
    let mut len: c_int = 0;
    // SAFETY: the buffer holds MPI_MAX_ERROR_STRING characters and a NUL.
    let got = unsafe { ffi::MPI_Error_string(rc, text.as_mut_ptr(), &mut len) };
    if got != SUCCESS {
        return "no message".into();
    }
    let len = usize::try_from(len).unwrap_or(0).min(text.len());
    text[..len].iter().map(|c| *c as u8 as char).collect()
}

/// Makes MPI return errors on `comm` instead of aborting the job.
pub(super) fn return_errors(comm: ffi::MPI_Comm) {
    // SAFETY: a live communicator and one of MPI's predefined handlers.
    unsafe { ffi::MPI_Comm_set_errhandler(comm, ffi::RSMPI_ERRORS_RETURN) };
}
