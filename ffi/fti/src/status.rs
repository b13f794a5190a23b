//! FTI's return codes, and the guard every C entry point runs under: an
//! error becomes a code and a message on standard error (FTI programs have
//! no other way to get one), and a panic never crosses into C.

use std::cell::Cell;
use std::os::raw::c_int;

/// Success.
pub const FTI_SCES: c_int = 0;
/// Failure.
pub const FTI_NSCS: c_int = -1;
/// A checkpoint was written.
pub const FTI_DONE: c_int = 1;
/// Nothing to recover.
pub const FTI_NREC: c_int = -2;

/// A failed call: its code and what went wrong.
#[derive(Debug)]
pub(crate) struct Failure {
    pub code: c_int,
    pub message: String,
}

impl Failure {
    /// A failure with `FTI_NSCS`.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            code: FTI_NSCS,
            message: message.into(),
        }
    }

    /// Nothing to recover (`FTI_NREC`).
    pub fn no_recovery(message: impl Into<String>) -> Self {
        Self {
            code: FTI_NREC,
            message: message.into(),
        }
    }
}

impl From<frame_core::Error> for Failure {
    fn from(e: frame_core::Error) -> Self {
        match e {
            // FTI's code for checkpoints that exist but cannot be restored.
            frame_core::Error::NothingToRecover | frame_core::Error::NotRecoverable { .. } => {
                Self::no_recovery(e.to_string())
            }
            // FTI calls protected regions variables.
            frame_core::Error::Region { id, reason } => {
                Self::new(format!("variable {id} {reason}"))
            }
            e => Self::new(e.to_string()),
        }
    }
}

impl From<frame_core::comm::CommError> for Failure {
    fn from(e: frame_core::comm::CommError) -> Self {
        Self::new(e.to_string())
    }
}

/// Runs `f` for the C call `name`; a failure prints its message (unless
/// the configuration silenced frame) and returns its code.
pub(crate) fn guard(name: &str, f: impl FnOnce() -> Result<c_int, Failure>) -> c_int {
    guard_value(name, |code| code, f)
}

/// Like [`guard`] for calls returning something else: `on_failure` turns
/// the failure's code into the value returned.
pub(crate) fn guard_value<T>(
    name: &str,
    on_failure: impl FnOnce(c_int) -> T,
    f: impl FnOnce() -> Result<T, Failure>,
) -> T {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(Ok(v)) => v,
        Ok(Err(fail)) => {
            report(name, &fail.message);
            on_failure(fail.code)
        }
        Err(_) => {
            report(name, "internal error (a bug in frame)");
            on_failure(FTI_NSCS)
        }
    }
}

thread_local! {
    static RANK: Cell<Option<usize>> = const { Cell::new(None) };
    static SILENT: Cell<bool> = const { Cell::new(false) };
}

/// This process's rank, once `FTI_Init` knows it (for messages).
pub(crate) fn set_rank(rank: usize) {
    RANK.with(|r| r.set(Some(rank)));
}

/// This process's rank, if `FTI_Init` set it (for messages).
pub(crate) fn rank() -> Option<usize> {
    RANK.with(Cell::get)
}

/// Whether the configuration's verbosity silences frame's messages.
pub(crate) fn silent() -> bool {
    SILENT.with(Cell::get)
}

/// Silences (or not) frame's messages.
pub(crate) fn set_silent(silent: bool) {
    SILENT.with(|s| s.set(silent));
}

/// Prints a failure of `name`, with the rank when one is known.
fn report(name: &str, message: &str) {
    if silent() {
        return;
    }
    match RANK.with(Cell::get) {
        Some(rank) => eprintln!("frame (FTI): rank {rank}: {name}: {message}"),
        None => eprintln!("frame (FTI): {name}: {message}"),
    }
}
