//! MPI's User-Level Failure Mitigation: the calls with which the survivors
//! of a failed process repair a communicator (the `ulfm` feature; Open MPI
//! 5 started with `mpirun --with-ft ulfm`).
//!
//! rsmpi's bindings have no `MPIX_*` calls (they live in `mpi-ext.h`);
//! frame declares the ones it uses here. Every call returns frame's
//! [`CommError`] on failure, never aborts. How a job repairs itself with
//! them (revoke, agree, shrink, spares) is the runtime's
//! (`frame_runtime::ulfm`).

use super::errors::{check, failure};
use super::MpiComm;
use crate::comm::CommError;
use mpi::ffi;
use mpi::raw::{AsRaw, FromRaw};
use mpi::topology::{Communicator, SimpleCommunicator};
use std::cell::Cell;
use std::mem::MaybeUninit;
use std::os::raw::c_int;
use std::time::{Duration, Instant};

extern "C" {
    fn MPIX_Comm_revoke(comm: ffi::MPI_Comm) -> c_int;
    fn MPIX_Comm_shrink(comm: ffi::MPI_Comm, newcomm: *mut ffi::MPI_Comm) -> c_int;
    fn MPIX_Comm_iagree(
        comm: ffi::MPI_Comm,
        flag: *mut c_int,
        request: *mut ffi::MPI_Request,
    ) -> c_int;
    fn MPIX_Comm_ack_failed(comm: ffi::MPI_Comm, num_to_ack: c_int, num_acked: *mut c_int)
        -> c_int;
    fn MPIX_Comm_get_failed(comm: ffi::MPI_Comm, failed: *mut ffi::MPI_Group) -> c_int;
    fn MPIX_Comm_is_revoked(comm: ffi::MPI_Comm, flag: *mut c_int) -> c_int;
}

/// `comm` duplicated, returning errors rather than aborting: the
/// communicator a job repairs (the program's world, before any failure).
pub fn duplicate(comm: &impl Communicator) -> SimpleCommunicator {
    let dup = comm.duplicate();
    super::errors::return_errors(dup.as_raw());
    dup
}

/// Whether MPI's error code `code` means that a process failed or that a
/// rank revoked the communicator (ULFM's error classes): the errors after
/// which a program's MPI calls cannot go on and the job repairs, unlike a
/// fault of the call itself.
pub fn is_failure(code: c_int) -> bool {
    super::errors::is_failure(code)
}

/// Interrupts every operation pending on `comm` at every rank: they, and
/// every later one but [`agree`] and [`shrink`], fail with
/// [`CommError::Broken`]. Revoking twice is harmless.
pub fn revoke(comm: &impl AsRaw<Raw = ffi::MPI_Comm>) {
    revoke_raw(comm.as_raw());
}

/// [`revoke`] on a raw handle.
pub(super) fn revoke_raw(comm: ffi::MPI_Comm) {
    // SAFETY: a live communicator. A revoked one stays valid to free.
    unsafe { MPIX_Comm_revoke(comm) };
}

/// A new communicator of the processes of `comm` that are alive, in their
/// order in `comm`, returning errors rather than aborting. Collective over
/// the survivors, and itself tolerant of failures.
pub fn shrink(comm: &impl AsRaw<Raw = ffi::MPI_Comm>) -> Result<SimpleCommunicator, CommError> {
    let mut new = MaybeUninit::<ffi::MPI_Comm>::uninit();
    // SAFETY: MPI writes the new communicator when the call succeeds.
    let rc = unsafe { MPIX_Comm_shrink(comm.as_raw(), new.as_mut_ptr()) };
    check(rc, "shrinking the communicator", None)?;
    // SAFETY: written by a successful shrink; a new communicator this
    // process owns and frees when it is dropped.
    let new = unsafe { SimpleCommunicator::from_raw(new.assume_init()) };
    super::errors::return_errors(new.as_raw());
    Ok(new)
}

/// What an agreement found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Agreement {
    /// The bitwise AND of the flags of the processes that took part.
    pub flag: u32,
    /// Whether a process of the communicator failed (the survivors all
    /// learn it, as the agreement's outcome is the same on every one).
    pub failed: bool,
}

/// Agrees with the live processes of `comm` on the bitwise AND of `flag`,
/// and on whether any process failed. Works on a revoked communicator;
/// acknowledges the failures it reports, so the next agreement reports
/// only new ones. Waits without holding a core.
pub fn agree(comm: &impl AsRaw<Raw = ffi::MPI_Comm>, flag: u32) -> Result<Agreement, CommError> {
    let raw = comm.as_raw();
    let mut value = flag as c_int;
    // SAFETY: MPI reads and writes one int, which outlives the wait.
    let rc = unsafe { super::polite::complete(|r| MPIX_Comm_iagree(raw, &mut value, r), || {}) };
    agreed(raw, rc, value)
}

/// [`agree`] for a process with nothing else to do until the agreement
/// ends, which may be the whole run (a spare waiting for a failure): the
/// sleeps between its tests grow with the wait, to `longest_nap`, so that
/// idle processes take next to nothing from the cores the working ranks
/// share, and shrink again once MPI knows of a failure or a revoke of
/// `comm`, so that the repair that follows does not wait for them.
/// `longest_nap` is what the process adds at most to each step of the
/// agreement that starts a repair; each wake-up drives MPI's progress
/// (some 10 µs of a core).
pub fn agree_idle(
    comm: &impl AsRaw<Raw = ffi::MPI_Comm>,
    flag: u32,
    longest_nap: Duration,
) -> Result<Agreement, CommError> {
    let raw = comm.as_raw();
    let watch = FailureWatch::beyond(failed_in(raw).unwrap_or(0));
    let stirred = || watch.news(comm);
    let mut value = flag as c_int;
    // SAFETY: MPI reads and writes one int, which outlives the wait.
    let rc = unsafe {
        super::polite::complete_idle(
            |r| MPIX_Comm_iagree(raw, &mut value, r),
            longest_nap,
            stirred,
        )
    };
    agreed(raw, rc, value)
}

/// [`agree`], given up once `raw` is revoked before the agreement
/// ends: a member that left after an error (it revoked the communicator)
/// never joins it, and the others would wait for it forever. Then
/// [`CommError::Broken`], the agreement left to MPI (its request and the
/// int it writes are never freed).
pub(super) fn agree_unless_revoked(raw: ffi::MPI_Comm, flag: u32) -> Result<Agreement, CommError> {
    let value: &'static mut c_int = Box::leak(Box::new(flag as c_int));
    let mut request = MaybeUninit::<ffi::MPI_Request>::uninit();
    // SAFETY: MPI reads and writes one int, leaked so that it outlives an
    // abandoned agreement; MPI writes the request on success.
    let rc = unsafe { MPIX_Comm_iagree(raw, &mut *value, request.as_mut_ptr()) };
    if rc != ffi::MPI_SUCCESS as c_int {
        // SAFETY: MPI is not using the int: the agreement did not start.
        drop(unsafe { Box::from_raw(value) });
        return Err(failure(rc, "an agreement", None));
    }
    // SAFETY: written by the successful start.
    let mut request = unsafe { request.assume_init() };
    // SAFETY: an active request.
    let Some(rc) = (unsafe { super::polite::settle(&mut request, || is_revoked(raw)) }) else {
        return Err(CommError::Broken(
            "an agreement: the communicator was revoked (a member left after an error)".into(),
        ));
    };
    let flag = *value;
    // SAFETY: the agreement is over: MPI no longer uses the int.
    drop(unsafe { Box::from_raw(value) });
    agreed(raw, rc, flag)
}

/// Whether a rank revoked `comm` (`false` if MPI cannot say). A local
/// call.
pub fn revoked(comm: &impl AsRaw<Raw = ffi::MPI_Comm>) -> bool {
    is_revoked(comm.as_raw())
}

/// The code of an MPI error of ULFM's class "revoked": what a program's
/// call on a revoked communicator fails with.
pub fn revoked_code() -> c_int {
    ffi::MPI_ERR_REVOKED as c_int
}

/// The code of an MPI error of ULFM's class "process failed": what a
/// program's call that involves a failed process fails with.
pub fn proc_failed_code() -> c_int {
    ffi::MPI_ERR_PROC_FAILED as c_int
}

/// Whether `raw` is revoked (`false` if MPI cannot say).
pub(super) fn is_revoked(raw: ffi::MPI_Comm) -> bool {
    let mut flag = 0;
    // SAFETY: a live communicator; MPI writes one int.
    let rc = unsafe { MPIX_Comm_is_revoked(raw, &mut flag) };
    rc == ffi::MPI_SUCCESS as c_int && flag != 0
}

/// The outcome of an agreement on `raw` that ended with MPI's code `rc`
/// and the value `value`.
fn agreed(raw: ffi::MPI_Comm, rc: c_int, value: c_int) -> Result<Agreement, CommError> {
    if rc == ffi::MPI_SUCCESS as c_int {
        return Ok(Agreement {
            flag: value as u32,
            failed: false,
        });
    }
    match failure(rc, "an agreement", None) {
        // A failure among the participants: the flag still holds the
        // survivors' agreement; acknowledging lets the next one pass.
        CommError::Broken(_) => {
            let mut acked = 0;
            // SAFETY: a live (perhaps revoked) communicator; MPI writes
            // one int.
            unsafe { MPIX_Comm_ack_failed(raw, c_int::MAX, &mut acked) };
            Ok(Agreement {
                flag: value as u32,
                failed: true,
            })
        }
        other => Err(other),
    }
}

impl MpiComm {
    /// Revokes frame's communicators of this `MpiComm` (see [`revoke`]):
    /// every rank blocked in one of its calls, or calling one later, gets
    /// [`CommError::Broken`] and can go and repair.
    pub fn revoke(&self) {
        let inner = self.lock();
        revoke_raw(inner.user.as_raw());
        revoke_raw(inner.internal.as_raw());
    }
}

/// How often at most a [`FailureWatch`] asks MPI for the failed
/// processes: MPI answers with a new group (some microseconds, more with
/// more processes), and a waiting process looks every few tests of its
/// requests; a millisecond is nothing beside a repair.
const ASK_FAILED_EVERY: Duration = Duration::from_millis(1);

/// Watches a communicator for news of a failure, for a process that waits
/// on it: a revoke, or more failed processes than it knew of when the
/// watch began. The revoke is a flag, read on every look; the failed
/// processes are asked for once a millisecond at most.
#[derive(Debug)]
pub struct FailureWatch {
    known: usize,
    asked: Cell<Option<Instant>>,
}

impl FailureWatch {
    /// A watch to which more than `known` failed processes are news.
    pub fn beyond(known: usize) -> Self {
        Self {
            known,
            asked: Cell::new(None),
        }
    }

    /// Whether `comm` (the communicator watched) was revoked or lost more
    /// processes than the watch knew of. A local call.
    pub fn news(&self, comm: &impl AsRaw<Raw = ffi::MPI_Comm>) -> bool {
        let raw = comm.as_raw();
        if is_revoked(raw) {
            return true;
        }
        let now = Instant::now();
        if (self.asked.get()).is_some_and(|at| now.duration_since(at) < ASK_FAILED_EVERY) {
            return false;
        }
        self.asked.set(Some(now));
        failed_in(raw).is_some_and(|n| n > self.known)
    }
}

/// How many processes of `comm` MPI reports failed (or gone), as far as
/// this process knows; `None` if MPI cannot say.
pub fn failed_count(comm: &impl AsRaw<Raw = ffi::MPI_Comm>) -> Option<usize> {
    failed_in(comm.as_raw())
}

/// How many processes of `comm` MPI reports failed, as far as this
/// process knows; `None` if MPI cannot say.
pub(super) fn failed_in(comm: ffi::MPI_Comm) -> Option<usize> {
    let mut group = std::mem::MaybeUninit::<ffi::MPI_Group>::uninit();
    // SAFETY: a live communicator; MPI writes a new group on success.
    let rc = unsafe { MPIX_Comm_get_failed(comm, group.as_mut_ptr()) };
    if rc != ffi::MPI_SUCCESS as c_int {
        return None;
    }
    // SAFETY: written by the successful call; freed below.
    let mut group = unsafe { group.assume_init() };
    let mut size: c_int = 0;
    // SAFETY: a group this process owns (or the empty group, which is
    // MPI's); MPI writes one int, then frees an owned group.
    unsafe {
        ffi::MPI_Group_size(group, &mut size);
        if group != ffi::RSMPI_GROUP_EMPTY {
            ffi::MPI_Group_free(&mut group);
        }
    }
    usize::try_from(size).ok()
}

/// Starts `count` new processes running `program` with `args`
/// (`MPI_Comm_spawn`, collective over `comm`, rooted at its rank 0) and
/// returns one communicator of `comm`'s processes, in their order, then the
/// new ones, in theirs (the new ones get it from [`started_merged`]).
/// Errors are returned, never an abort.
pub fn spawn_merged(
    comm: &impl AsRaw<Raw = ffi::MPI_Comm>,
    count: usize,
    program: &std::path::Path,
    args: &[std::ffi::OsString],
) -> Result<SimpleCommunicator, CommError> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let c = |s: &std::ffi::OsStr| {
        CString::new(s.as_bytes()).map_err(|_| {
            CommError::Unsupported(format!(
                "starting processes: {s:?} holds a NUL byte and cannot be passed to MPI"
            ))
        })
    };
    let program = c(program.as_os_str())?;
    let args = args.iter().map(|a| c(a)).collect::<Result<Vec<_>, _>>()?;
    let mut argv: Vec<*mut std::os::raw::c_char> =
        args.iter().map(|a| a.as_ptr().cast_mut()).collect();
    argv.push(std::ptr::null_mut());
    let count = c_int::try_from(count)
        .map_err(|_| CommError::Unsupported(format!("starting {count} processes")))?;
    let mut codes = vec![0 as c_int; count as usize];
    let mut inter = MaybeUninit::<ffi::MPI_Comm>::uninit();
    // SAFETY: the strings and the NULL-ended argv outlive the call (MPI
    // only reads them); MPI writes the intercommunicator and one code per
    // process.
    let rc = unsafe {
        ffi::MPI_Comm_spawn(
            program.as_ptr(),
            argv.as_mut_ptr(),
            count,
            ffi::RSMPI_INFO_NULL,
            0,
            comm.as_raw(),
            inter.as_mut_ptr(),
            codes.as_mut_ptr(),
        )
    };
    check(rc, "starting new processes (MPI_Comm_spawn)", None)?;
    // SAFETY: written by the successful spawn; freed below.
    let mut inter = unsafe { inter.assume_init() };
    merge(&mut inter, false)
}

/// In a process started by [`spawn_merged`]: the communicator it returned
/// to the processes that started this one. `None` in a process `mpirun`
/// started.
pub fn started_merged() -> Option<Result<SimpleCommunicator, CommError>> {
    let mut parent = MaybeUninit::<ffi::MPI_Comm>::uninit();
    // SAFETY: MPI writes one handle.
    let rc = unsafe { ffi::MPI_Comm_get_parent(parent.as_mut_ptr()) };
    if rc != ffi::MPI_SUCCESS as c_int {
        return Some(Err(failure(
            rc,
            "finding the processes that started this one",
            None,
        )));
    }
    // SAFETY: written by the successful call.
    let mut parent = unsafe { parent.assume_init() };
    // SAFETY: a constant of the MPI library.
    if parent == unsafe { ffi::RSMPI_COMM_NULL } {
        return None;
    }
    super::errors::return_errors(parent);
    Some(merge(&mut parent, true))
}

/// One intracommunicator of both groups of `inter` (this group after the
/// other when `high`), returning errors; frees `inter`.
fn merge(inter: &mut ffi::MPI_Comm, high: bool) -> Result<SimpleCommunicator, CommError> {
    super::errors::return_errors(*inter);
    let mut merged = MaybeUninit::<ffi::MPI_Comm>::uninit();
    // SAFETY: a live intercommunicator; MPI writes the new communicator.
    let rc = unsafe { ffi::MPI_Intercomm_merge(*inter, c_int::from(high), merged.as_mut_ptr()) };
    // SAFETY: an intercommunicator this process holds and no longer uses.
    unsafe { ffi::MPI_Comm_free(inter) };
    check(rc, "joining the new processes (MPI_Intercomm_merge)", None)?;
    // SAFETY: written by the successful merge; this process owns it.
    let merged = unsafe { SimpleCommunicator::from_raw(merged.assume_init()) };
    super::errors::return_errors(merged.as_raw());
    Ok(merged)
}

/// Rank 0's `bytes` at every process of `comm` (their length, then the
/// bytes; the others pass an empty vector), returning errors rather than
/// aborting: how survivors tell processes they started where the job
/// stands. A length above `limit` is refused before anything is
/// allocated. Collective.
pub fn broadcast_bytes(
    comm: &SimpleCommunicator,
    mut bytes: Vec<u8>,
    limit: usize,
) -> Result<Vec<u8>, CommError> {
    let mut len = bytes.len() as u64;
    // SAFETY: one u64 that outlives the blocking call.
    let rc = unsafe {
        ffi::MPI_Bcast(
            (&raw mut len).cast(),
            1,
            ffi::RSMPI_UINT64_T,
            0,
            comm.as_raw(),
        )
    };
    check(rc, "broadcasting a length", None)?;
    let count = c_int::try_from(len)
        .ok()
        .filter(|_| len <= limit as u64)
        .ok_or_else(|| {
            CommError::Unsupported(format!("a broadcast of {len} bytes (at most {limit})"))
        })?;
    if comm.rank() != 0 {
        bytes = vec![0; len as usize];
    }
    // SAFETY: `len` bytes at every process, alive across the blocking call.
    let rc = unsafe {
        ffi::MPI_Bcast(
            bytes.as_mut_ptr().cast(),
            count,
            ffi::RSMPI_UINT8_T,
            0,
            comm.as_raw(),
        )
    };
    check(rc, "broadcasting bytes", None)?;
    Ok(bytes)
}
