//! What libfti does when MPI reports an error on the program's
//! communicators.
//!
//! FTI's model is restart: a failed process ends the job, and the same
//! command run again resumes from the newest checkpoint. Under an MPI that
//! keeps the survivors of a process failure alive (Open MPI 5 under
//! `mpirun --with-ft ulfm`), the survivors' next call on a communicator
//! with the failed process reports `MPI_ERR_PROC_FAILED`; MPI's default
//! handler then aborts, but that launcher does not end the job: it waited
//! forever. libfti installs its own handler on `FTI_COMM_WORLD`, and on
//! the communicator given to `FTI_Init` where the program left MPI's
//! default (fatal) one: it says which rank met which error and ends the
//! process so that the launcher ends the job with an error under any MPI
//! (see [`end`]).

use mpi::ffi::{self, MPI_Comm};
use std::os::raw::{c_char, c_int};

/// Installs libfti's handler on `comm`; with `only_over_fatal`, only if
/// the communicator has MPI's default fatal handler (the program chose
/// none).
pub(crate) fn install(comm: MPI_Comm, only_over_fatal: bool) {
    if only_over_fatal && !has_fatal_handler(comm) {
        return;
    }
    let mut handler = std::mem::MaybeUninit::<ffi::MPI_Errhandler>::uninit();
    // SAFETY: MPI calls the handler with the communicator and the error
    // code as its two named arguments and nothing else; a function that
    // takes those two and no variable arguments reads them where the
    // variadic signature puts them (the C calling conventions of the
    // platforms MPI runs on pass named arguments alike).
    let function: ffi::MPI_Comm_errhandler_function = unsafe {
        std::mem::transmute::<
            unsafe extern "C" fn(*mut MPI_Comm, *mut c_int),
            Option<unsafe extern "C" fn(*mut MPI_Comm, *mut c_int, ...)>,
        >(on_error)
    };
    // SAFETY: MPI writes the new handler on success.
    let rc = unsafe { ffi::MPI_Comm_create_errhandler(function, handler.as_mut_ptr()) };
    if rc != ffi::MPI_SUCCESS as c_int {
        return;
    }
    // SAFETY: a live communicator and the handler just created (MPI keeps
    // it while the communicator uses it).
    unsafe {
        let mut handler = handler.assume_init();
        ffi::MPI_Comm_set_errhandler(comm, handler);
        ffi::MPI_Errhandler_free(&mut handler);
    }
}

/// Whether `comm`'s handler is MPI's default, `MPI_ERRORS_ARE_FATAL`.
fn has_fatal_handler(comm: MPI_Comm) -> bool {
    let mut handler = std::mem::MaybeUninit::<ffi::MPI_Errhandler>::uninit();
    // SAFETY: a live communicator; MPI writes its handler on success.
    let rc = unsafe { ffi::MPI_Comm_get_errhandler(comm, handler.as_mut_ptr()) };
    if rc != ffi::MPI_SUCCESS as c_int {
        return false;
    }
    // SAFETY: written by the successful call; freeing the reference it
    // returned leaves the communicator's handler in place.
    unsafe {
        let mut handler = handler.assume_init();
        let fatal = handler == ffi::RSMPI_ERRORS_ARE_FATAL;
        ffi::MPI_Errhandler_free(&mut handler);
        fatal
    }
}

/// The handler: says what MPI reported, then ends the process (see
/// [`end`]).
unsafe extern "C" fn on_error(comm: *mut MPI_Comm, code: *mut c_int) {
    let code = if code.is_null() {
        ffi::MPI_ERR_OTHER as c_int
    } else {
        // SAFETY: MPI passes a pointer to the error code.
        unsafe { *code }
    };
    let mut text = vec![0 as c_char; ffi::MPI_MAX_ERROR_STRING as usize + 1];
    let mut len = 0;
    // SAFETY: the buffer holds MPI_MAX_ERROR_STRING characters and more.
    unsafe { ffi::MPI_Error_string(code, text.as_mut_ptr(), &mut len) };
    let text: Vec<u8> = text[..len.max(0) as usize]
        .iter()
        .map(|c| *c as u8)
        .collect();
    let rank = crate::status::rank().map_or_else(|| "?".to_string(), |r| r.to_string());
    // Said whatever the verbosity (the process ends next), in one write.
    let line = format!(
        "{}rank {rank}: MPI reported an error on the program's communicator ({}): \
         a process of the job may have failed; the job ends, and the same command run again \
         restarts from the newest checkpoint",
        frame_log::prefix(frame_log::Style::Fti, frame_log::Level::ERROR),
        String::from_utf8_lossy(&text)
    );
    let _ = std::io::Write::write_all(
        &mut std::io::stderr().lock(),
        format!("{line}\n").as_bytes(),
    );
    // SAFETY: MPI passes the communicator the error happened on.
    let comm = (!comm.is_null()).then(|| unsafe { *comm });
    end(comm)
}

/// Ends this process so that the launcher ends the job with an error.
/// Every process ends like the failed one (SIGKILL), except, where MPI
/// can tell which processes failed (ULFM) and one did, the lowest live
/// rank of `comm`:
/// once MPI reports every other one gone (30 s at most) it exits with
/// code 1, which `mpirun --with-ft ulfm` needs to end with an error (it
/// takes processes killed by a signal for failures the job survived, and
/// could deadlock when several processes exit with an error at once).
fn end(comm: Option<MPI_Comm>) -> ! {
    if let Some(comm) = comm {
        let failed = failed_ranks(comm);
        let (mut me, mut size) = (0, 0);
        // SAFETY: a live communicator; MPI writes one int each.
        unsafe {
            ffi::MPI_Comm_rank(comm, &mut me);
            ffi::MPI_Comm_size(comm, &mut size);
        }
        // Only after a process failure: an error of this process alone
        // ends it at once, and the others follow as from a failure.
        let lowest_alive = failed
            .as_ref()
            .filter(|f| !f.is_empty())
            .and_then(|f| (0..size).find(|r| !f.contains(r)));
        if lowest_alive == Some(me) {
            frame_core::comm::mpi::progress_while(comm, std::time::Duration::from_secs(30), || {
                failed_ranks(comm).is_some_and(|f| (f.len() as c_int) < size - 1)
            });
            // SAFETY: ends the process at once, without MPI's exit code.
            unsafe { libc::_exit(1) }
        }
    }
    // SAFETY: raise takes any signal; SIGKILL does not return.
    unsafe { libc::raise(libc::SIGKILL) };
    // SAFETY: as above, if the signal could not be sent.
    unsafe { libc::_exit(1) }
}

/// `MPIX_Comm_get_failed` where the MPI library has it (ULFM), looked up
/// when called so that libfti links with any MPI.
type GetFailed = unsafe extern "C" fn(MPI_Comm, *mut ffi::MPI_Group) -> c_int;

/// The ranks of `comm` MPI reports failed, if it can say.
fn failed_ranks(comm: MPI_Comm) -> Option<Vec<c_int>> {
    // SAFETY: looks a symbol up in the process's libraries.
    let symbol = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"MPIX_Comm_get_failed".as_ptr()) };
    if symbol.is_null() {
        return None;
    }
    // SAFETY: ULFM's MPIX_Comm_get_failed has this signature.
    let get_failed: GetFailed =
        unsafe { std::mem::transmute::<*mut libc::c_void, GetFailed>(symbol) };
    let mut failed = std::mem::MaybeUninit::<ffi::MPI_Group>::uninit();
    let mut all = std::mem::MaybeUninit::<ffi::MPI_Group>::uninit();
    // SAFETY: a live communicator; MPI writes the groups on success, and
    // the ranks translated into `out` (one per failed process).
    unsafe {
        if get_failed(comm, failed.as_mut_ptr()) != ffi::MPI_SUCCESS as c_int {
            return None;
        }
        let mut failed = failed.assume_init();
        ffi::MPI_Comm_group(comm, all.as_mut_ptr());
        let mut all = all.assume_init();
        let mut n = 0;
        ffi::MPI_Group_size(failed, &mut n);
        let of_failed: Vec<c_int> = (0..n).collect();
        let mut out = vec![0; n.max(0) as usize];
        ffi::MPI_Group_translate_ranks(failed, n, of_failed.as_ptr(), all, out.as_mut_ptr());
        if failed != ffi::RSMPI_GROUP_EMPTY {
            ffi::MPI_Group_free(&mut failed);
        }
        ffi::MPI_Group_free(&mut all);
        Some(out)
    }
}
