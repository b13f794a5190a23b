//! The per-thread state behind the C calls: the live context of
//! `frame_run` (while the resilient function runs) and the checkpointer of
//! `frame_init`.
//!
//! A context handle given to C is a token, never dereferenced: a call
//! checks it against the live context of its thread, so a null, stale or
//! foreign handle is an error rather than a crash. The checkpointer
//! borrows the live context's communicator; `frame_run` drops it before
//! that context ends, whatever the C code did.

use crate::status::Failure;
use frame_core::comm::{Comm, LocalComm};
use frame_core::Checkpointer;
use frame_runtime::Context;
use std::cell::RefCell;

/// The opaque context handle of the C interface.
pub struct FrameCtx {
    _private: [u8; 0],
}

/// The context of the running resilient function on this thread.
struct Live {
    token: usize,
    ctx: *const Context<'static>,
}

/// What `frame_init` set up on this thread.
pub(crate) enum Ckpt {
    /// Initialised: the checkpointer, and the communicator it owns when no
    /// runtime gave one (freed after the checkpointer).
    Ready {
        ckpt: Box<Checkpointer<'static>>,
        owned: Option<*mut LocalComm>,
    },
    /// `frame_finalize` was called.
    Finalized,
}

thread_local! {
    static LIVE: RefCell<Option<Live>> = const { RefCell::new(None) };
    static CKPT: RefCell<Option<Ckpt>> = const { RefCell::new(None) };
    static NEXT_TOKEN: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Makes `ctx` the live context of this thread for the duration of `f`,
/// which gets its handle; afterwards the checkpointer made in it (if any)
/// is dropped.
pub(crate) fn with_live<R>(ctx: &mut Context<'_>, f: impl FnOnce(*mut FrameCtx) -> R) -> R {
    // Tokens are odd numbers, never 0 (null) nor a real address's
    // alignment; a new one per entry makes earlier handles stale.
    let token = NEXT_TOKEN.with(|n| {
        let t = n.get().wrapping_add(2) | 1;
        n.set(t);
        t
    });
    let ptr: *const Context<'_> = ctx;
    // SAFETY: only erases the lifetime; the pointer is cleared before the
    // context ends (below).
    let ptr = unsafe { std::mem::transmute::<*const Context<'_>, *const Context<'static>>(ptr) };
    LIVE.with(|l| *l.borrow_mut() = Some(Live { token, ctx: ptr }));
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            drop_checkpointer();
            LIVE.with(|l| *l.borrow_mut() = None);
        }
    }
    let _reset = Reset;
    f(token as *mut FrameCtx)
}

/// The live context of this thread, if a resilient function runs on it,
/// for the duration of `f` (for calls that take no handle).
pub(crate) fn live_context<R>(f: impl FnOnce(Option<&Context<'static>>) -> R) -> R {
    let ptr = LIVE.with(|l| l.borrow().as_ref().map(|live| live.ctx));
    // SAFETY: as in `context`: the live context of this thread, kept
    // alive by `with_live` until it is cleared.
    f(ptr.map(|p| unsafe { &*p }))
}

/// The live context behind `handle`, for the duration of `f`.
pub(crate) fn context<R>(
    handle: *mut FrameCtx,
    f: impl FnOnce(&Context<'static>) -> Result<R, Failure>,
) -> Result<R, Failure> {
    let ptr = LIVE.with(|l| {
        l.borrow()
            .as_ref()
            .filter(|live| live.token == handle as usize)
            .map(|live| live.ctx)
    });
    match ptr {
        // SAFETY: the pointer is the live context of this thread, set by
        // `with_live` whose caller keeps it alive until it is cleared.
        Some(p) => f(unsafe { &*p }),
        None if handle.is_null() => Err(Failure::invalid("the context is null")),
        None => Err(Failure::state(
            "the context is not the live one of this thread (stale, from another thread, or not from frame_run)",
        )),
    }
}

/// The communicator of the live context behind `handle`.
pub(crate) fn comm_of(handle: *mut FrameCtx) -> Result<&'static dyn Comm, Failure> {
    // SAFETY: see `context`; the reference is used only within the C call
    // that passed the handle, while the context is live.
    let ptr: *const (dyn Comm + 'static) =
        context(handle, |c| {
            let p: *const (dyn Comm + '_) = c.comm();
            // SAFETY: only erases the lifetime; see above.
            Ok(unsafe {
                std::mem::transmute::<*const (dyn Comm + '_), *const (dyn Comm + 'static)>(p)
            })
        })?;
    // SAFETY: as above: the live context's communicator, used within the
    // C call that passed the handle.
    Ok(unsafe { &*ptr })
}

/// Stores a new checkpointer for this thread (replacing a finalized one).
pub(crate) fn install(
    ckpt: Checkpointer<'static>,
    owned: Option<*mut LocalComm>,
) -> Result<(), Failure> {
    CKPT.with(|c| {
        let mut c = c.borrow_mut();
        if matches!(*c, Some(Ckpt::Ready { .. })) {
            return Err(Failure::state(
                "frame_init was already called (call frame_finalize first)",
            ));
        }
        *c = Some(Ckpt::Ready {
            ckpt: Box::new(ckpt),
            owned,
        });
        Ok(())
    })
}

/// Whether this thread holds an initialised checkpointer.
pub(crate) fn initialised() -> bool {
    CKPT.with(|c| matches!(*c.borrow(), Some(Ckpt::Ready { .. })))
}

/// Runs `f` on this thread's checkpointer.
pub(crate) fn with_ckpt<R>(
    f: impl FnOnce(&mut Checkpointer<'static>) -> Result<R, Failure>,
) -> Result<R, Failure> {
    CKPT.with(|c| match &mut *c.borrow_mut() {
        Some(Ckpt::Ready { ckpt, .. }) => f(ckpt),
        Some(Ckpt::Finalized) => Err(Failure::state("frame_finalize was already called")),
        None => Err(Failure::state("frame_init was not called on this thread")),
    })
}

/// Takes this thread's checkpointer out (leaving it finalized).
pub(crate) fn take() -> Result<(Checkpointer<'static>, Option<*mut LocalComm>), Failure> {
    CKPT.with(|c| {
        let mut c = c.borrow_mut();
        match c.take() {
            Some(Ckpt::Ready { ckpt, owned }) => {
                *c = Some(Ckpt::Finalized);
                Ok((*ckpt, owned))
            }
            Some(Ckpt::Finalized) => {
                *c = Some(Ckpt::Finalized);
                Err(Failure::state("frame_finalize was already called"))
            }
            None => Err(Failure::state("frame_init was not called on this thread")),
        }
    })
}

/// Frees a communicator made by `frame_init` without a runtime.
pub(crate) fn free_owned(owned: Option<*mut LocalComm>) {
    if let Some(p) = owned {
        // SAFETY: made by `Box::into_raw` in `frame_init`, freed once, after
        // the checkpointer that borrowed it was dropped.
        drop(unsafe { Box::from_raw(p) });
    }
}

/// Drops this thread's checkpointer, if any, and forgets its state: the
/// context it borrowed is about to end.
fn drop_checkpointer() {
    let old = CKPT.with(|c| c.borrow_mut().take());
    if let Some(Ckpt::Ready { ckpt, owned }) = old {
        drop(ckpt);
        free_owned(owned);
    }
}
