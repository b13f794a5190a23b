//! MPI operations that wait without holding a core.
//!
//! MPI libraries busy-poll in blocking calls. frame's waits (its
//! collectives around a checkpoint, a receive from a slower rank) happen
//! while the ranks of the node still write their files and the node's
//! manager promotes the previous checkpoint: a rank spinning in MPI takes
//! the processor they need. Here every operation is started non-blocking
//! and tested, yielding the processor between tests and then sleeping a
//! little (at most [`MAX_NAP`]), which costs frame's rare collectives
//! microseconds and gives the other work its share of the cores. A process
//! with nothing else to do (`complete_idle`, under ULFM: a spare waiting for a
//! failure, for the whole run) naps longer as its wait grows, to a cap its
//! caller chooses, so that a node's spares take next to nothing from the
//! ranks that work there, and
//! goes back to short naps as soon as something stirs (MPI knows of a
//! failure), so that the repair that follows does not wait for its naps.

use mpi::ffi;
use std::mem::MaybeUninit;
use std::os::raw::{c_int, c_void};
use std::time::{Duration, Instant};

/// Tests of a request before the waiter starts sleeping between them.
const YIELDS: u32 = 200;
/// The longest sleep between two tests of a brief wait.
const MAX_NAP: Duration = Duration::from_micros(200);
/// An idle wait naps for this share of the time it has waited so far.
const IDLE_SHARE: u32 = 32;

/// How a waiter sleeps between its tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Patience {
    /// frame's own operations, which end within milliseconds: naps of
    /// [`MAX_NAP`] at most.
    Brief,
    /// A process with nothing else to do until the operation ends: naps
    /// grow with the wait (1/[`IDLE_SHARE`] of it) to the longest given.
    /// Only spares under ULFM wait so.
    #[cfg_attr(not(feature = "ulfm"), allow(dead_code))]
    Idle(Duration),
}

/// The pauses of one wait.
struct Pauses {
    polls: u32,
    started: Instant,
    patience: Patience,
}

impl Pauses {
    fn new(patience: Patience) -> Self {
        Self {
            polls: 0,
            started: Instant::now(),
            patience,
        }
    }

    /// Pauses between two tests: yields, then sleeps longer and longer;
    /// whether the waiter's `watch` is due.
    fn pause(&mut self) -> bool {
        self.polls = self.polls.wrapping_add(1);
        match nap(self.polls, self.started.elapsed(), self.patience) {
            None => std::thread::yield_now(),
            Some(nap) => std::thread::sleep(nap),
        }
        self.polls % WATCH_EVERY == 0
    }
}

/// The sleep after test `polls` of a wait `waited` long (`None`: yield the
/// processor instead): 1 µs more for every test past [`YIELDS`] to
/// [`MAX_NAP`]; an idle wait then sleeps 1/[`IDLE_SHARE`] of its wait, to
/// its longest nap (never less than a brief wait's).
fn nap(polls: u32, waited: Duration, patience: Patience) -> Option<Duration> {
    let past = polls.checked_sub(YIELDS)?;
    let brief = Duration::from_micros(u64::from(past) + 1).min(MAX_NAP);
    Some(match patience {
        Patience::Brief => brief,
        Patience::Idle(longest) => (waited / IDLE_SHARE).clamp(brief, longest.max(brief)),
    })
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
    watch: impl FnMut(),
) -> c_int {
    // SAFETY: the caller's promise.
    unsafe { wait(start, Patience::Brief, watch, || false) }
}

/// [`complete`] for a process with nothing else to do until the operation
/// ends, which may be the whole run: its naps grow with the wait, to
/// `longest_nap`, until `stirred` (asked after every test, a local call)
/// says something happened that others will want its part in quickly.
/// Only jobs under ULFM have such processes (their spares).
///
/// # Safety
/// As for [`complete`].
#[cfg(feature = "ulfm")]
pub(super) unsafe fn complete_idle(
    start: impl FnOnce(*mut ffi::MPI_Request) -> c_int,
    longest_nap: Duration,
    stirred: impl FnMut() -> bool,
) -> c_int {
    // SAFETY: the caller's promise.
    unsafe { wait(start, Patience::Idle(longest_nap), || {}, stirred) }
}

/// [`complete`], pausing as `patience` says until `stirred`, then briefly.
///
/// # Safety
/// As for [`complete`].
unsafe fn wait(
    start: impl FnOnce(*mut ffi::MPI_Request) -> c_int,
    patience: Patience,
    mut watch: impl FnMut(),
    mut stirred: impl FnMut() -> bool,
) -> c_int {
    let mut request = MaybeUninit::<ffi::MPI_Request>::uninit();
    let rc = start(request.as_mut_ptr());
    if rc != ffi::MPI_SUCCESS as c_int {
        return rc;
    }
    // SAFETY: `start` succeeded, so it wrote the request.
    let mut request = unsafe { request.assume_init() };
    let mut pauses = Pauses::new(patience);
    loop {
        let mut done = 0;
        // SAFETY: an active request; MPI_Test frees it once complete (or
        // failed).
        let rc = unsafe { ffi::MPI_Test(&mut request, &mut done, ffi::RSMPI_STATUS_IGNORE) };
        if rc != ffi::MPI_SUCCESS as c_int || done != 0 {
            return rc;
        }
        if matches!(pauses.patience, Patience::Idle(_)) && stirred() {
            pauses = Pauses::new(Patience::Brief);
        }
        if pauses.pause() {
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
    let mut pauses = Pauses::new(Patience::Brief);
    loop {
        let mut done = 0;
        // SAFETY: an active request; MPI_Test frees it once complete.
        let rc = unsafe { ffi::MPI_Test(request, &mut done, ffi::RSMPI_STATUS_IGNORE) };
        if rc != ffi::MPI_SUCCESS as c_int || done != 0 {
            return Some(rc);
        }
        if pauses.pause() && abandon() {
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
    let mut pauses = Pauses::new(Patience::Brief);
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
            if pauses.pause() {
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

#[cfg(test)]
mod tests;
