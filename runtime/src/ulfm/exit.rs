//! How a process of a job under ULFM ends once a process of the job died.
//!
//! Open MPI 5.0.x can hang in `MPI_Finalize` then (its closing fence
//! waits for the dead), so such a process ends itself with `_exit`. Before
//! that it tells the launcher that it is done ([`done`]), as the end of
//! `MPI_Finalize` would: a process that just vanishes counts as failed,
//! the launcher tells every other process of it, and once more than ten
//! of those messages meet processes that already ended, Open MPI 5's
//! `prterun` takes the SIGPIPEs for a lost job and ends with an error
//! (a recovered job of 64 ranks did, after printing its right answer).
//!
//! A job that cannot go on ends through [`give_up`].

use frame::comm::mpi::ulfm;
use mpi::raw::AsRaw;
use mpi::topology::{Communicator, SimpleCommunicator};
use std::io::Write;
use std::sync::mpsc;
use std::time::Duration;

/// How long the launcher gets to acknowledge that a process is done.
const DONE_WAIT: Duration = Duration::from_secs(5);

/// Ends a process whose job recovered, with exit status `code`: its
/// output flushed, the launcher told it is done.
pub(super) fn recovered(code: u8) -> ! {
    flush();
    done();
    // SAFETY: ends the process at once; nothing of it runs afterwards.
    unsafe { libc_exit(i32::from(code)) }
}

/// Ends a job that cannot go on after a failure (every survivor calls it,
/// once each has said why), with `mpirun`'s exit code 1. Open MPI
/// 5.0.11's `prterun` can deadlock (its state machine's lock, the dead
/// processes never reaped) when a process exits with an error while
/// others of the job still run, and ignores `MPI_Abort` under
/// `--with-ft ulfm`: so every survivor but the first exits with 0, and
/// the first, once MPI reports all of them gone (30 seconds at most),
/// exits with 1, the job's code.
pub(super) fn give_up(survivors: &SimpleCommunicator) -> ! {
    flush();
    if survivors.rank() != 0 {
        let _ =
            rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
    }
    let others = survivors.size().max(1) as usize - 1;
    frame::comm::mpi::progress_while(survivors.as_raw(), Duration::from_secs(30), || {
        ulfm::failed_count(survivors).is_some_and(|n| n < others)
    });
    // SAFETY: ends the process at once.
    unsafe { libc_exit(1) }
}

fn flush() {
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
}

/// `PMIx_Finalize(info, ninfo)`: Open MPI 5's link to its launcher.
type PmixFinalize = unsafe extern "C" fn(*const std::ffi::c_void, usize) -> std::ffi::c_int;

/// Tells the launcher that this process is done (`PMIx_Finalize`, looked
/// up in the process's libraries: Open MPI 5 loads it), waiting at most
/// [`DONE_WAIT`] for its answer. Without PMIx, nothing.
fn done() {
    // SAFETY: looks a symbol up in the process's libraries.
    let symbol = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"PMIx_Finalize".as_ptr()) };
    if symbol.is_null() {
        return;
    }
    // SAFETY: PMIx's PMIx_Finalize has this signature.
    let finalize = unsafe { std::mem::transmute::<*mut libc::c_void, PmixFinalize>(symbol) };
    let (tx, rx) = mpsc::channel();
    // A launcher that no longer answers must not keep the process: the
    // call runs on a thread of its own, which `_exit` ends with the rest.
    let spawned = std::thread::Builder::new()
        .name("frame-pmix-done".into())
        .spawn(move || {
            // SAFETY: no information passed; PMIx reads none.
            let rc = unsafe { finalize(std::ptr::null(), 0) };
            let _ = tx.send(rc);
        });
    if spawned.is_ok() {
        let _ = rx.recv_timeout(DONE_WAIT);
    }
}

/// `_exit`: ends the process without running MPI's or Rust's exit code.
unsafe fn libc_exit(code: i32) -> ! {
    extern "C" {
        fn _exit(code: i32) -> !;
    }
    // SAFETY: `_exit` takes any status and does not return.
    unsafe { _exit(code) }
}
