//! A failed call, said once: by the rank that failed, naming it, or by
//! rank 0 alone when every rank failed alike.

use frame_log::{Level, Style};
use std::cell::Cell;
use std::fmt::Display;

/// A failed call: what went wrong, and whether every rank failed alike.
#[derive(Debug)]
pub struct Failure {
    /// What went wrong (empty: said already).
    pub message: String,
    /// Every rank returns this failure: rank 0 alone says it.
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

    /// A failure every rank returns alike, which rank 0 said already.
    pub fn said() -> Self {
        Self::shared(String::new())
    }
}

impl From<frame_core::Error> for Failure {
    fn from(e: frame_core::Error) -> Self {
        Self {
            shared: e.is_collective(),
            message: e.to_string(),
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

thread_local! {
    static RANK: Cell<Option<usize>> = const { Cell::new(None) };
}

/// This process's rank, once the library's init knows it (for messages).
pub fn set_rank(rank: Option<usize>) {
    RANK.with(|r| r.set(rank));
}

/// One line of the library of API `api` (`SCR`, `VeloC`), in frame's
/// plain style: `frame: warning: SCR: ...`.
pub fn say(api: &str, level: Level, message: impl Display) {
    frame_log::say(Style::Plain, level, format_args!("{api}: {message}"));
}

/// Runs `f` for the C call `call` of API `api`: its value, or `failed`
/// with the failure said (see [`Failure`]).
pub fn guard<T>(api: &str, call: &str, failed: T, f: impl FnOnce() -> Result<T, Failure>) -> T {
    let fail = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(Ok(v)) => return v,
        Ok(Err(fail)) => fail,
        Err(_) => Failure::new("internal error (a bug in frame)"),
    };
    match (fail.shared, RANK.with(Cell::get)) {
        (true, _) if fail.message.is_empty() => {}
        (true, Some(r)) if r > 0 => {}
        (true, _) | (false, None) => {
            say(api, Level::ERROR, format_args!("{call}: {}", fail.message))
        }
        (false, Some(r)) => say(
            api,
            Level::ERROR,
            format_args!("rank {r}: {call}: {}", fail.message),
        ),
    }
    failed
}
