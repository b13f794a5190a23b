//! The entry of the resilient function running on this thread: the
//! runtime's context while `run` has the program's function running, and
//! what was made from it that must go before it ends (checkpointers borrow
//! its communicator).
//!
//! Python objects can outlive the call they were made in, so a `Context`,
//! `Comm` or `Checkpointer` holds a token, never the context itself: a
//! call checks the token against the live entry, and a stale object raises
//! `frame.StateError` instead of reaching a context that is gone.

use crate::errors;
use frame_runtime::Context;
use pyo3::PyResult;
use std::cell::{Cell, RefCell};

/// Identifies one entry of the resilient function (never 0).
pub(crate) type Token = u64;

struct Entry {
    token: Token,
    ctx: *const Context<'static>,
    /// Run when the entry ends, newest first.
    on_exit: Vec<Box<dyn FnOnce()>>,
}

thread_local! {
    static ENTRY: RefCell<Option<Entry>> = const { RefCell::new(None) };
    static LAST_TOKEN: Cell<Token> = const { Cell::new(0) };
}

/// Makes `ctx` the live context of this thread while `f` runs, with a new
/// token; then runs the exit hooks registered meanwhile and forgets it.
pub(crate) fn enter<R>(ctx: &mut Context<'_>, f: impl FnOnce(Token) -> R) -> PyResult<R> {
    if ENTRY.with(|e| e.borrow().is_some()) {
        return Err(errors::state(
            "frame.run was called inside the resilient function of another frame.run",
        ));
    }
    let token = LAST_TOKEN.with(|t| {
        t.set(t.get() + 1);
        t.get()
    });
    let ptr: *const Context<'_> = ctx;
    // SAFETY: only erases the lifetime; the pointer is forgotten before
    // this function returns (by `Leave`, even when `f` unwinds), and the
    // caller keeps the context alive until then.
    let ptr = unsafe { std::mem::transmute::<*const Context<'_>, *const Context<'static>>(ptr) };
    ENTRY.with(|e| {
        *e.borrow_mut() = Some(Entry {
            token,
            ctx: ptr,
            on_exit: Vec::new(),
        })
    });
    struct Leave;
    impl Drop for Leave {
        fn drop(&mut self) {
            let hooks = ENTRY.with(|e| {
                e.borrow_mut()
                    .as_mut()
                    .map(|entry| std::mem::take(&mut entry.on_exit))
                    .unwrap_or_default()
            });
            for hook in hooks.into_iter().rev() {
                hook();
            }
            ENTRY.with(|e| *e.borrow_mut() = None);
        }
    }
    let _leave = Leave;
    Ok(f(token))
}

/// The token of the live entry, if the resilient function is running.
pub(crate) fn current() -> Option<Token> {
    ENTRY.with(|e| e.borrow().as_ref().map(|entry| entry.token))
}

/// Runs `f` with the live context of entry `token`.
pub(crate) fn with_context<R>(
    token: Token,
    f: impl FnOnce(&Context<'static>) -> PyResult<R>,
) -> PyResult<R> {
    let ptr = ENTRY.with(|e| {
        e.borrow()
            .as_ref()
            .filter(|entry| entry.token == token)
            .map(|entry| entry.ctx)
    });
    match ptr {
        // SAFETY: the live context of this thread, kept alive by `enter`'s
        // caller until the entry ends; the reference does not leave `f`.
        Some(p) => f(unsafe { &*p }),
        None => Err(errors::state(
            "this context belongs to an entry of the resilient function that has ended (a context, its communicator and the checkpointers made from it are valid only inside the call that received it)",
        )),
    }
}

/// Has `hook` run when entry `token` ends.
pub(crate) fn on_exit(token: Token, hook: Box<dyn FnOnce()>) -> PyResult<()> {
    ENTRY.with(|e| match e.borrow_mut().as_mut() {
        Some(entry) if entry.token == token => {
            entry.on_exit.push(hook);
            Ok(())
        }
        _ => Err(errors::state(
            "this context belongs to an entry of the resilient function that has ended",
        )),
    })
}
