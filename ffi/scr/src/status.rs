//! SCR's return codes, and the guard every C entry point runs under: an
//! error becomes a code and one line on standard error (SCR programs have
//! no other way to learn why), and a panic never crosses into C.

use std::cell::Cell;
use std::os::raw::c_int;

/// Success.
pub const SCR_SUCCESS: c_int = 0;
/// Failure (SCR's header names no constant for it).
pub const SCR_FAILURE: c_int = 1;

/// A failed call: what went wrong, and whether every rank failed alike.
#[derive(Debug)]
pub(crate) struct Failure {
    pub message: String,
    /// Every rank failed with this message (a collective call's agreed
    /// outcome): rank 0 alone prints it.
    pub shared: bool,
}

impl Failure {
    /// This rank's own failure.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            shared: false,
        }
    }

    /// A failure every rank returns alike.
    pub fn shared(message: impl Into<String>) -> Self {
        Self {
            shared: true,
            ..Self::new(message)
        }
    }
}

impl From<frame_core::Error> for Failure {
    fn from(e: frame_core::Error) -> Self {
        let shared = e.is_collective();
        Self {
            message: e.to_string(),
            shared,
        }
    }
}

impl From<frame_core::comm::CommError> for Failure {
    fn from(e: frame_core::comm::CommError) -> Self {
        Self::new(e.to_string())
    }
}

impl From<frame_core::config::ConfigError> for Failure {
    fn from(e: frame_core::config::ConfigError) -> Self {
        Self::new(e.to_string())
    }
}

/// Runs `f` for the C call `name`: `SCR_SUCCESS`, or `SCR_FAILURE` with
/// the failure said.
pub(crate) fn guard(name: &str, f: impl FnOnce() -> Result<(), Failure>) -> c_int {
    guard_value(name, SCR_FAILURE, || f().map(|()| SCR_SUCCESS))
}

/// Like [`guard`] for calls returning something else: `failed` is
/// returned on failure.
pub(crate) fn guard_value<T>(name: &str, failed: T, f: impl FnOnce() -> Result<T, Failure>) -> T {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(Ok(v)) => v,
        Ok(Err(fail)) => {
            report(name, &fail);
            failed
        }
        Err(_) => {
            report(name, &Failure::new("internal error (a bug in frame)"));
            failed
        }
    }
}

thread_local! {
    static RANK: Cell<Option<usize>> = const { Cell::new(None) };
}

/// This process's rank, once `SCR_Init` knows it (for messages).
pub(crate) fn set_rank(rank: Option<usize>) {
    RANK.with(|r| r.set(rank));
}

/// This process's rank, if known.
pub(crate) fn rank() -> Option<usize> {
    RANK.with(Cell::get)
}

/// Prints a failure of `name`: one shared by every rank on rank 0 alone,
/// a rank's own naming the rank.
fn report(name: &str, fail: &Failure) {
    match (fail.shared, rank()) {
        (true, Some(r)) if r > 0 => {}
        (true, _) | (false, None) => crate::say::error(format_args!("{name}: {}", fail.message)),
        (false, Some(r)) => crate::say::error(format_args!("rank {r}: {name}: {}", fail.message)),
    }
}
