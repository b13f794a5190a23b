//! The library's own duplicate of the communicator a program works on,
//! made without the program's error handler: under `frame_run_ulfm` that
//! handler leaves the resilient function with a `longjmp`, which must
//! never cross the library's frames. The library's calls on the duplicate
//! return their errors; a failed process among them becomes a failure
//! that leaves the entry from the C boundary (see `guard`).

use crate::Failure;
use mpi::ffi::{MPI_Comm, MPI_Errhandler};
use mpi::raw::FromRaw;
use mpi::topology::SimpleCommunicator;

/// Duplicates `comm` with errors returned: the program's handler is set
/// aside for the duplication (which copies the handler) and put back.
/// Collective over `comm`.
///
/// # Safety
/// `comm` is a live intra-communicator of the program.
pub unsafe fn duplicate(comm: MPI_Comm) -> Result<SimpleCommunicator, Failure> {
    let mut handler = std::mem::MaybeUninit::<MPI_Errhandler>::uninit();
    // SAFETY: a live communicator; MPI writes one handle.
    if unsafe { mpi::ffi::MPI_Comm_get_errhandler(comm, handler.as_mut_ptr()) } != 0 {
        return Err(Failure::new(
            "the program's communicator has no error handler MPI can name",
        ));
    }
    // SAFETY: written by the successful call.
    let mut handler = unsafe { handler.assume_init() };
    let mut dup = std::mem::MaybeUninit::<MPI_Comm>::uninit();
    // SAFETY: a live communicator and MPI's predefined handler; then the
    // duplication, and the program's handler put back and our reference
    // to it released.
    let rc = unsafe {
        mpi::ffi::MPI_Comm_set_errhandler(comm, mpi::ffi::RSMPI_ERRORS_RETURN);
        let rc = mpi::ffi::MPI_Comm_dup(comm, dup.as_mut_ptr());
        mpi::ffi::MPI_Comm_set_errhandler(comm, handler);
        mpi::ffi::MPI_Errhandler_free(&mut handler);
        rc
    };
    if rc != 0 {
        return Err(Failure {
            interrupted: is_failure(rc),
            ..Failure::new(format!(
                "MPI_Comm_dup of the program's communicator failed (MPI error {rc})"
            ))
        });
    }
    // SAFETY: written by the successful MPI_Comm_dup, owned by the caller.
    Ok(unsafe { SimpleCommunicator::from_raw(dup.assume_init()) })
}

/// Whether MPI's `code` says that a process failed or the communicator
/// was revoked.
fn is_failure(code: i32) -> bool {
    #[cfg(feature = "ulfm")]
    return frame_core::comm::mpi::ulfm::is_failure(code);
    #[cfg(not(feature = "ulfm"))]
    {
        let _ = code;
        false
    }
}
