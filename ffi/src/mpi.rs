//! The calls of a C program that makes its own MPI calls under
//! `frame_run_ulfm`: the communicator to make them on, and which of MPI's
//! errors mean that the job lost a process. `frame_mpi.h` builds on them
//! (an error handler that leaves the resilient function on such an
//! error).

use crate::state::{context, FrameCtx};
use crate::status::{guard, Failure, FRAME_ESTATE, FRAME_EUNSUPPORTED, FRAME_OK};
use std::ffi::{c_int, c_void};

/// Writes into `*comm` (an `MPI_Comm` of the MPI the program and libframe
/// were built with) a communicator of the working ranks, of the job's
/// size and order, for the program's own MPI calls in this entry of the
/// resilient function: where an MPI program used `MPI_COMM_WORLD` (which,
/// with spare processes, holds more processes than the job's ranks). Its
/// errors return rather than abort (see `frame_mpi_failure`); when the
/// resilient function returns after an error, frame revokes it, so every
/// other rank's pending call on it fails too. The first call in an entry
/// is collective. Valid until the function returns; never free it.
/// `FRAME_EUNSUPPORTED` outside `frame_run_ulfm`.
#[no_mangle]
pub unsafe extern "C" fn frame_mpi_comm(ctx: *mut FrameCtx, comm: *mut c_void) -> c_int {
    guard("frame_mpi_comm", || {
        if comm.is_null() {
            return Err(Failure::invalid("the communicator pointer is null"));
        }
        context(ctx, |c| {
            // SAFETY: the caller passes room for one MPI_Comm.
            unsafe { imp::write(c, comm) }
        })?;
        Ok(FRAME_OK)
    })
}

/// For a library the program calls from its resilient function without
/// a context handle (libscr's `SCR_Init` takes no communicator): writes
/// into `*epoch` the epoch of the entry running on this thread (1 at the
/// start, one more after each recovery: a library's state from an earlier
/// epoch belongs to an entry that a failure abandoned), and, unless `comm`
/// is NULL, into `*comm` (an `MPI_Comm`) the program's communicator of the
/// entry as `frame_mpi_comm` gives it (its first call in an entry is
/// collective; with `comm` NULL the call is local). `FRAME_ESTATE` when no
/// resilient function runs on this thread; `FRAME_EUNSUPPORTED` outside
/// `frame_run_ulfm`. Those two are answers, not failures: the message
/// `frame_last_error` gives stays the program's.
#[no_mangle]
pub unsafe extern "C" fn frame_mpi_running(comm: *mut c_void, epoch: *mut u64) -> c_int {
    crate::state::live_context(|c| {
        let Some(c) = c else {
            return FRAME_ESTATE;
        };
        if !imp::under_ulfm(c) {
            return FRAME_EUNSUPPORTED;
        }
        guard("frame_mpi_running", || {
            if epoch.is_null() {
                return Err(Failure::invalid("the epoch pointer is null"));
            }
            if !comm.is_null() {
                // SAFETY: the caller passes room for one MPI_Comm.
                unsafe { imp::write(c, comm) }?;
            }
            // SAFETY: the caller passes room for one u64.
            unsafe { epoch.write(c.epoch()) };
            Ok(FRAME_OK)
        })
    })
}

/// Whether the program's calls on its MPI communicator of the running
/// entry (the one `frame_mpi_comm` gave) must end: a rank revoked it, or
/// MPI knows that one of its processes failed. Then writes it into
/// `*comm` (an `MPI_Comm`) and returns the code of an MPI error of class
/// revoked or process failed, for the program to raise on it
/// (`MPI_Comm_call_errhandler`); else 0 (also outside a resilient
/// function, and before `frame_mpi_comm`). A local call, for a program's
/// loop that waits for MPI requests: MPI may leave a send to a rank that
/// left the communicator pending after the revoke, and a wait for a live
/// peer would last until that peer learns of the failure itself.
#[no_mangle]
pub unsafe extern "C" fn frame_mpi_interrupted(comm: *mut c_void) -> c_int {
    let mut code = 0;
    let checked = guard("frame_mpi_interrupted", || {
        if comm.is_null() {
            return Err(Failure::invalid("the communicator pointer is null"));
        }
        // SAFETY: the caller passes room for one MPI_Comm.
        code =
            crate::state::live_context(|c| c.map_or(0, |c| unsafe { imp::interrupted(c, comm) }));
        Ok(FRAME_OK)
    });
    if checked != FRAME_OK {
        return checked;
    }
    code
}

/// 1 if MPI's error code `code` means that a process of the job failed or
/// that a rank revoked the communicator (the job repairs: return from the
/// resilient function), 0 for any other code (a fault of the call itself).
/// Always 0 without the `ulfm` feature.
#[no_mangle]
pub extern "C" fn frame_mpi_failure(code: c_int) -> c_int {
    c_int::from(imp::is_failure(code))
}

#[cfg(feature = "ulfm")]
mod imp {
    use crate::status::{Failure, FRAME_EUNSUPPORTED};
    use frame_runtime::Context;
    use mpi::raw::AsRaw;
    use std::ffi::{c_int, c_void};

    /// Writes the program's communicator of `ctx` at `out`.
    ///
    /// # Safety
    /// `out` must have room for one `MPI_Comm`.
    pub(super) unsafe fn write(ctx: &Context<'_>, out: *mut c_void) -> Result<(), Failure> {
        let comm = ctx.mpi_comm().ok_or_else(|| {
            Failure::new(
                FRAME_EUNSUPPORTED,
                "only a job under frame_run_ulfm has an MPI communicator",
            )
        })?;
        // SAFETY: forwarded to the caller.
        unsafe { out.cast::<mpi::ffi::MPI_Comm>().write(comm.as_raw()) };
        Ok(())
    }

    pub(super) fn is_failure(code: c_int) -> bool {
        frame_core::comm::mpi::ulfm::is_failure(code)
    }

    /// Whether `ctx` runs under `frame_run_ulfm`.
    pub(super) fn under_ulfm(ctx: &Context<'_>) -> bool {
        ctx.has_mpi_comm()
    }

    /// The error's code (revoked, or a process failed) after writing
    /// `ctx`'s interrupted program communicator at `out`; 0 if its calls
    /// may go on.
    ///
    /// # Safety
    /// `out` must have room for one `MPI_Comm`.
    pub(super) unsafe fn interrupted(ctx: &Context<'_>, out: *mut c_void) -> c_int {
        use frame_core::comm::mpi::ulfm;
        let Some(comm) = ctx.mpi_comm_interrupted() else {
            return 0;
        };
        // SAFETY: forwarded to the caller.
        unsafe { out.cast::<mpi::ffi::MPI_Comm>().write(comm.as_raw()) };
        match ulfm::revoked(comm) {
            true => ulfm::revoked_code(),
            false => ulfm::proc_failed_code(),
        }
    }
}

#[cfg(not(feature = "ulfm"))]
mod imp {
    use crate::status::{Failure, FRAME_EUNSUPPORTED};
    use frame_runtime::Context;
    use std::ffi::{c_int, c_void};

    /// Without the `ulfm` feature: [`FRAME_EUNSUPPORTED`].
    pub(super) unsafe fn write(_ctx: &Context<'_>, _out: *mut c_void) -> Result<(), Failure> {
        Err(Failure::new(
            FRAME_EUNSUPPORTED,
            "this libframe was built without the ulfm feature (cargo build -p frame-ffi --features ulfm against Open MPI 5)",
        ))
    }

    pub(super) fn is_failure(_code: c_int) -> bool {
        false
    }

    /// Without the `ulfm` feature, never.
    pub(super) fn under_ulfm(_ctx: &Context<'_>) -> bool {
        false
    }

    /// Without the `ulfm` feature there is no program communicator: 0.
    pub(super) unsafe fn interrupted(_ctx: &Context<'_>, _out: *mut c_void) -> c_int {
        0
    }
}
