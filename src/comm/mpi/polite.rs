//! MPI operations that wait without holding a core.
//!
//! MPI libraries busy-poll in blocking calls. frame's waits (its
//! collectives around a checkpoint, a receive from a slower rank) happen
//! while the ranks of the node still write their files and the node's
//! manager promotes the previous checkpoint: a rank spinning in MPI takes
//! the processor they need. Here every operation is started non-blocking
//! and tested, yielding the processor between tests and then sleeping a
//! little (at most [`MAX_NAP`]), which costs frame's rare collectives
//! microseconds and gives the other work its share of the cores.

use mpi::ffi;
use std::mem::MaybeUninit;
use std::os::raw::{c_int, c_void};
use std::time::Duration;

/// Tests of a request before the waiter starts sleeping between them.
const YIELDS: u32 = 200;
/// The longest sleep between two tests.
const MAX_NAP: Duration = Duration::from_micros(200);

/// Pauses between two tests: yields, then sleeps longer and longer.
fn pause(polls: &mut u32) {
    *polls += 1;
    if *polls < YIELDS {
        std::thread::yield_now();
    } else {
        let nap = Duration::from_micros(u64::from(*polls - YIELDS) + 1);
        std::thread::sleep(nap.min(MAX_NAP));
    }
}

/// Tests of a request between two calls of a waiter's `watch`.
const WATCH_EVERY: u32 = 16;

/// Starts an operation with `start` (which fills in its request and
/// returns MPI's code) and waits for it to complete; MPI's code of the
/// start or of the completion (`MPI_SUCCESS`, or an error when the
/// communicator returns errors). `watch` is called every few tests while
/// the operation is pending (an error scope revokes the communicator there
/// when a failure in its scope is known, which ends the operation).
///
/// # Safety
/// `start` must start a non-blocking MPI operation writing the request, and
/// every buffer it hands MPI must outlive this call.
pub(super) unsafe fn complete(
    start: impl FnOnce(*mut ffi::MPI_Request) -> c_int,
    mut watch: impl FnMut(),
) -> c_int {
    let mut request = MaybeUninit::<ffi::MPI_Request>::uninit();
    let rc = start(request.as_mut_ptr());
    if rc != ffi::MPI_SUCCESS as c_int {
        return rc;
    }
    // SAFETY: `start` succeeded, so it wrote the request.
    let mut request = unsafe { request.assume_init() };
    let mut polls = 0;
    loop {
        let mut done = 0;
        // SAFETY: an active request; MPI_Test frees it once complete (or
        // failed).
        let rc = unsafe { ffi::MPI_Test(&mut request, &mut done, ffi::RSMPI_STATUS_IGNORE) };
        if rc != ffi::MPI_SUCCESS as c_int || done != 0 {
            return rc;
        }
        pause(&mut polls);
        if polls % WATCH_EVERY == 0 {
            watch();
        }
    }
}

/// Waits for an active `request` to complete, or until `abandon` (asked
/// every few tests) says it never will: MPI's code of the completion, or
/// `None` with the request left active (Open MPI ends the process if a
/// freed request fails later) and MPI perhaps still using its buffers,
/// which the caller must then never free.
///
/// # Safety
/// `request` must be an active MPI request.
pub(super) unsafe fn settle(
    request: &mut ffi::MPI_Request,
    mut abandon: impl FnMut() -> bool,
) -> Option<c_int> {
    let mut polls = 0;
    loop {
        let mut done = 0;
        // SAFETY: an active request; MPI_Test frees it once complete.
        let rc = unsafe { ffi::MPI_Test(request, &mut done, ffi::RSMPI_STATUS_IGNORE) };
        if rc != ffi::MPI_SUCCESS as c_int || done != 0 {
            return Some(rc);
        }
        pause(&mut polls);
        if polls % WATCH_EVERY == 0 && abandon() {
            return None;
        }
    }
}

/// Receives the next message from `src` with `tag` on `comm`, whatever its
/// length; MPI's error code if the probe or the receive fails. `watch` as
/// for [`complete`].
pub(crate) fn receive(
    comm: ffi::MPI_Comm,
    src: i32,
    tag: i32,
    mut watch: impl FnMut(),
) -> Result<Vec<u8>, c_int> {
    let ok = |rc: c_int| {
        if rc == ffi::MPI_SUCCESS as c_int {
            Ok(())
        } else {
            Err(rc)
        }
    };
    let mut polls = 0;
    loop {
        let mut found = 0;
        let mut message = MaybeUninit::<ffi::MPI_Message>::uninit();
        let mut status = MaybeUninit::<ffi::MPI_Status>::uninit();
        // SAFETY: MPI writes the flag, and the message and status when the
        // flag is set.
        ok(unsafe {
            ffi::MPI_Improbe(
                src,
                tag,
                comm,
                &mut found,
                message.as_mut_ptr(),
                status.as_mut_ptr(),
            )
        })?;
        if found == 0 {
            pause(&mut polls);
            if polls % WATCH_EVERY == 0 {
                watch();
            }
            continue;
        }
        // SAFETY: set by a successful probe.
        let (mut message, status) = unsafe { (message.assume_init(), status.assume_init()) };
        let mut count = 0;
        // SAFETY: `status` describes the matched message.
        ok(unsafe { ffi::MPI_Get_count(&status, ffi::RSMPI_UINT8_T, &mut count) })?;
        let mut data = vec![0u8; usize::try_from(count).unwrap_or(0)];
        // SAFETY: `data` holds the message's `count` bytes; the matched
        // message is received exactly once.
        ok(unsafe {
            ffi::MPI_Mrecv(
                data.as_mut_ptr().cast::<c_void>(),
                count,
                ffi::RSMPI_UINT8_T,
                &mut message,
                ffi::RSMPI_STATUS_IGNORE,
            )
        })?;
        return Ok(data);
    }
}

/// Waits while `pending()` holds, `limit` at most, driving MPI's progress
/// on `comm` meanwhile (a probe every few milliseconds: MPI learns of
/// other processes' deaths while it progresses). For a process that waits
/// for the others of its job to end.
pub fn progress_while(comm: ffi::MPI_Comm, limit: Duration, mut pending: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + limit;
    while pending() && std::time::Instant::now() < deadline {
        let mut flag = 0;
        // SAFETY: a live communicator; MPI writes the flag.
        unsafe {
            ffi::MPI_Iprobe(
                ffi::RSMPI_ANY_SOURCE,
                ffi::RSMPI_ANY_TAG,
                comm,
                &mut flag,
                ffi::RSMPI_STATUS_IGNORE,
            )
        };
        std::thread::sleep(Duration::from_millis(5));
    }
}
