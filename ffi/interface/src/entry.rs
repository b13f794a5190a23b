//! The entry of frame's resilient function running on this thread, for a
//! library called from inside it: a program that keeps SCR's or VeloC's
//! calls and runs its work under `frame_run_ulfm` recovers online.
//!
//! libframe says which entry runs (`frame_mpi_running`): the program's
//! communicator of the working ranks and the entry's epoch. The libraries
//! look that call up when they start a session rather than link libframe,
//! so a program that never uses frame's resilient entry needs no libframe.
//! A session remembers its epoch; in a later epoch it belongs to an entry
//! that a failure abandoned, and is dropped without a collective.

use crate::Failure;
use frame_core::comm::mpi::MpiComm;
use mpi::ffi::MPI_Comm;
use std::cell::{RefCell, RefMut};
use std::ffi::{c_int, c_void};
use std::sync::OnceLock;

#[cfg(feature = "ulfm")]
thread_local! {
    /// The entry the library's session on this thread began in (one
    /// session a thread: the libraries' sessions are thread-local).
    static SESSION_ENTRY: std::cell::Cell<Option<Entry>> = const { std::cell::Cell::new(None) };
}

/// libframe's `frame_mpi_running`.
type Running = unsafe extern "C" fn(comm: *mut c_void, epoch: *mut u64) -> c_int;

/// libframe's codes for "no resilient function runs on this thread" and
/// "not under frame_run_ulfm" (frame.h's `FRAME_ESTATE`, `FRAME_EUNSUPPORTED`).
const NOT_RUNNING: [c_int; 2] = [-3, -8];

/// The entry of the resilient function running on this thread.
#[derive(Debug, Clone, Copy)]
pub struct Entry {
    /// The program's communicator of the working ranks in this entry (of
    /// the job's size and order; frame revokes it when the entry ends in
    /// a failure). Never freed by the library.
    pub comm: MPI_Comm,
    /// 1 at the start, one more after each recovery.
    pub epoch: u64,
}

/// libframe's call, if the process has libframe loaded (looked up once:
/// a program links libframe to use frame's resilient entry).
fn lookup() -> Option<Running> {
    static FOUND: OnceLock<Option<usize>> = OnceLock::new();
    let found = *FOUND.get_or_init(|| {
        // SAFETY: a NUL-terminated name looked up in the process's global
        // scope; the result is checked for null.
        let sym = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"frame_mpi_running".as_ptr()) };
        (!sym.is_null()).then_some(sym as usize)
    });
    // SAFETY: libframe exports frame_mpi_running with this signature
    // (frame.h); the address is that function's.
    found.map(|addr| unsafe { std::mem::transmute::<usize, Running>(addr) })
}

/// Calls libframe: `Ok(None)` when no resilient function of
/// `frame_run_ulfm` runs on this thread (or libframe is not loaded).
fn ask(comm: *mut c_void) -> Result<Option<u64>, Failure> {
    let Some(call) = lookup() else {
        return Ok(None);
    };
    let mut epoch = 0u64;
    // SAFETY: `comm` is null or has room for one MPI_Comm; room for one
    // u64, as the call needs.
    match unsafe { call(comm, &mut epoch) } {
        0 => Ok(Some(epoch)),
        c if NOT_RUNNING.contains(&c) => Ok(None),
        c => Err(Failure::new(format!(
            "frame's resilient function runs on this thread, but libframe cannot say which entry (frame_mpi_running returned {c})"
        ))),
    }
}

/// The entry running on this thread: `None` outside frame's resilient
/// function under `frame_run_ulfm` (and without libframe). The first call
/// in an entry is collective over the working ranks (the program's
/// communicator is made then, unless the program made it).
pub fn running() -> Result<Option<Entry>, Failure> {
    let mut comm = std::mem::MaybeUninit::<MPI_Comm>::uninit();
    let Some(epoch) = ask(comm.as_mut_ptr().cast())? else {
        return Ok(None);
    };
    Ok(Some(Entry {
        // SAFETY: written by the successful call.
        comm: unsafe { comm.assume_init() },
        epoch,
    }))
}

/// The epoch of the entry running on this thread, if one does. A local
/// call.
pub fn epoch() -> Option<u64> {
    ask(std::ptr::null_mut()).ok().flatten()
}

/// Leaves the entry of frame's resilient function after a library call
/// met a failed process, as the program's own MPI calls do: raises MPI's
/// "process failed" error on the program's communicator of the entry the
/// library's session began in, whose handler (`FRAME_MPI_ENTER` of
/// `frame_mpi.h`) jumps back to the top of the resilient function, which
/// returns for the recovery. A local call. Returns when no session began
/// in the entry running, or when the program's handler returns (a
/// program that checks the codes of its calls itself).
///
/// # Safety
/// The handler may `longjmp` over the caller's frames: every frame between
/// the program and this call must hold nothing with a destructor.
pub unsafe fn leave() {
    #[cfg(feature = "ulfm")]
    if let Some(entry) = SESSION_ENTRY.with(std::cell::Cell::get) {
        if epoch() == Some(entry.epoch) {
            let code = frame_core::comm::mpi::ulfm::proc_failed_code();
            // SAFETY: the entry's live communicator (frame frees it when
            // the entry ends); the program's handler runs, as for a failed
            // call of its own.
            unsafe { mpi::ffi::MPI_Comm_call_errhandler(entry.comm, code) };
        }
    }
}

/// Whether a session begun in `epoch` (`None`: outside frame's resilient
/// function) is used inside an entry of it: its communicator holds the
/// spare processes too, and a failure would never let it go. A local call.
pub fn begun_outside(epoch: Option<u64>) -> bool {
    epoch.is_none() && self::epoch().is_some()
}

/// Whether a session begun in `epoch` (`None`: outside frame's resilient
/// function) belongs to an entry that a failure abandoned: the resilient
/// function now runs in a later epoch. A local call.
pub fn abandoned(epoch: Option<u64>) -> bool {
    let Some(began) = epoch else {
        return false;
    };
    self::epoch().is_some_and(|now| now != began)
}

/// `comm` made ready for a session begun in `entry` (`None`: outside
/// frame's resilient function): in an entry, every call on it fails once
/// a process of it failed, so that no rank waits in the library for a
/// rank that left for the recovery. That needs the library built with the
/// `ulfm` feature: without, a session in an entry is refused.
pub fn prepare(comm: MpiComm, entry: Option<&Entry>) -> Result<MpiComm, Failure> {
    let Some(entry) = entry else {
        return Ok(comm);
    };
    #[cfg(feature = "ulfm")]
    {
        SESSION_ENTRY.with(|e| e.set(Some(*entry)));
        Ok(comm.with_error_scope(frame_core::comm::mpi::ErrorScope::Communicator))
    }
    #[cfg(not(feature = "ulfm"))]
    {
        let _ = entry;
        Err(Failure::new(
        "this library was built without the ulfm feature, which a program under frame_run_ulfm needs (cargo build --features ulfm against Open MPI 5; docs/ULFM.md)",
        ))
    }
}

/// A library's session, which may belong to an abandoned entry.
pub trait Abandon: Sized {
    /// The epoch of the entry it began in (`None`: outside frame's
    /// resilient function).
    fn epoch(&self) -> Option<u64>;
    /// Lets go of it without a collective: the ranks it spanned are dead
    /// or in a later entry.
    fn abandon(self);
}

/// Lets go of the session in `slot` if it belongs to an entry a failure
/// abandoned, so that the new entry starts its own. A local call.
pub fn forget_abandoned<S: Abandon>(slot: &RefCell<Option<S>>) {
    let stale = slot.borrow().as_ref().is_some_and(|s| abandoned(s.epoch()));
    if !stale {
        return;
    }
    // Out of the slot before it goes: abandoning never runs borrowed.
    let taken = slot.borrow_mut().take();
    if let Some(s) = taken {
        s.abandon();
    }
}

/// The calls that begin and end a library's session, for its messages.
pub struct Calls {
    /// `SCR_Init`, `VELOC_Init`.
    pub init: &'static str,
    /// `SCR_Finalize`, `VELOC_Finalize`.
    pub finalize: &'static str,
}

/// The session in `slot`, ready for a call: one an abandoned entry left is
/// let go first; one begun outside frame's resilient function, which runs
/// now, is refused, as is none. A local call.
pub fn session<'a, S: Abandon>(
    slot: &'a RefCell<Option<S>>,
    calls: &Calls,
) -> Result<RefMut<'a, S>, Failure> {
    forget_abandoned(slot);
    let session = RefMut::filter_map(slot.borrow_mut(), Option::as_mut).map_err(|_| {
        Failure::new(format!(
            "{} was not called (or {} was, or a failure abandoned the entry of frame's resilient function that called it)",
            calls.init, calls.finalize
        ))
    })?;
    if begun_outside(session.epoch()) {
        return Err(Failure::new(format!(
            "{} was called outside frame's resilient function, which runs now: call it inside, on the entry's working ranks (docs/ULFM.md)",
            calls.init
        )));
    }
    Ok(session)
}

/// Takes the session out of `slot` for its end (see [`session`]).
pub fn take<S: Abandon>(slot: &RefCell<Option<S>>, calls: &Calls) -> Result<S, Failure> {
    drop(session(slot, calls)?);
    slot.borrow_mut()
        .take()
        .ok_or_else(|| Failure::new(format!("{} was not called", calls.init)))
}
