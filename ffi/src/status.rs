//! Status codes, the per-thread last error message, and the guard that
//! turns Rust errors and panics into codes.

use frame_core::comm::CommError;
use std::cell::RefCell;
use std::ffi::{c_char, c_int, CString};

/// Success.
pub const FRAME_OK: c_int = 0;
/// Success, and something was done: `frame_snapshot` wrote a checkpoint,
/// `frame_status` found a checkpoint to recover.
pub const FRAME_DONE: c_int = 1;
/// A failure of the library (storage, configuration, a peer); see
/// `frame_last_error`.
pub const FRAME_ERROR: c_int = -1;
/// A bad argument: a null pointer, an unknown type, a negative count or id.
pub const FRAME_EINVAL: c_int = -2;
/// A call out of order: before `frame_init`, after `frame_finalize`, from a
/// thread that did not initialise, or with a context that is not the live
/// one.
pub const FRAME_ESTATE: c_int = -3;
/// A failure elsewhere in the job interrupted the call: return from the
/// resilient function (with any value); `frame_run` enters it again once
/// the job recovered.
pub const FRAME_EINTERRUPTED: c_int = -4;
/// The protected regions do not match the checkpoint being restored.
pub const FRAME_EMISMATCH: c_int = -5;
/// There is no checkpoint to recover.
pub const FRAME_ENOREC: c_int = -6;
/// An internal error of the library (a bug); the call had no effect.
pub const FRAME_EINTERNAL: c_int = -7;
/// This libframe was built without what the call needs (`frame_run_ulfm`
/// without the `ulfm` feature).
pub const FRAME_EUNSUPPORTED: c_int = -8;

thread_local! {
    static LAST: RefCell<CString> = RefCell::new(CString::default());
}

/// A failed call: its code and message.
pub(crate) struct Failure {
    pub code: c_int,
    pub message: String,
}

impl Failure {
    pub fn new(code: c_int, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(FRAME_EINVAL, message)
    }

    pub fn state(message: impl Into<String>) -> Self {
        Self::new(FRAME_ESTATE, message)
    }
}

impl From<frame_core::Error> for Failure {
    fn from(e: frame_core::Error) -> Self {
        use frame_core::Error as E;
        let code = match &e {
            E::Comm(CommError::Interrupted { .. }) => FRAME_EINTERRUPTED,
            E::RegionMismatch { .. } => FRAME_EMISMATCH,
            E::NothingToRecover => FRAME_ENOREC,
            E::File { .. } => FRAME_EINVAL,
            _ => FRAME_ERROR,
        };
        Self::new(code, e.to_string())
    }
}

impl From<CommError> for Failure {
    fn from(e: CommError) -> Self {
        let code = if matches!(e, CommError::Interrupted { .. }) {
            FRAME_EINTERRUPTED
        } else {
            FRAME_ERROR
        };
        Self::new(code, e.to_string())
    }
}

fn remember(message: &str) {
    let text = CString::new(message.replace('\0', " ")).unwrap_or_default();
    LAST.with(|l| *l.borrow_mut() = text);
}

/// Runs `f`, turning its failure or panic into a status code and keeping
/// the message for `frame_last_error`.
pub(crate) fn guard(name: &str, f: impl FnOnce() -> Result<c_int, Failure>) -> c_int {
    guard_value(name, FRAME_EINTERNAL, f)
}

/// Like [`guard`] for calls returning another value; `internal` is what a
/// panic returns.
pub(crate) fn guard_value<T>(name: &str, internal: T, f: impl FnOnce() -> Result<T, Failure>) -> T
where
    T: From<c_int>,
{
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(Ok(v)) => v,
        Ok(Err(fail)) => {
            remember(&format!("{name}: {}", fail.message));
            T::from(fail.code)
        }
        Err(_) => {
            remember(&format!("{name}: internal error (a bug in frame)"));
            internal
        }
    }
}

/// The message of the last call that failed on this thread (an empty
/// string if none did). The text stays valid until the next failing call
/// on this thread.
#[no_mangle]
pub extern "C" fn frame_last_error() -> *const c_char {
    LAST.with(|l| l.borrow().as_ptr())
}
