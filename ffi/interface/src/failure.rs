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
    /// The call met a failed process or a revoked communicator: under
    /// frame's resilient function, the program leaves for the recovery.
    pub interrupted: bool,
}

impl Failure {
    /// This rank's own failure.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            shared: false,
            interrupted: false,
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
            interrupted: matches!(&e, frame_core::Error::Comm(c) if interrupts(c)),
            message: e.to_string(),
        }
    }
}

impl From<frame_core::comm::CommError> for Failure {
    fn from(e: frame_core::comm::CommError) -> Self {
        Self {
            interrupted: interrupts(&e),
            ..Self::new(e.to_string())
        }
    }
}

/// Whether `e` says that a process failed (or a rank revoked the
/// communicator after seeing one) rather than that the call was wrong.
fn interrupts(e: &frame_core::comm::CommError) -> bool {
    use frame_core::comm::CommError;
    matches!(
        e,
        CommError::Broken(_) | CommError::PeerFailed { .. } | CommError::Interrupted { .. }
    )
}

impl From<frame_core::config::ConfigError> for Failure {
    fn from(e: frame_core::config::ConfigError) -> Self {
        Self::new(e.to_string())
    }
}

thread_local! {
    static RANK: Cell<Option<usize>> = const { Cell::new(None) };
    /// The failure of a call that is leaving the entry of frame's
    /// resilient function (see [`guard`]).
    #[cfg(feature = "mpi")]
    static PENDING: Cell<Option<Failure>> = const { Cell::new(None) };
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
/// with the failure said (see [`Failure`]). A failure that met a failed
/// process, in an entry of frame's resilient function, leaves the entry
/// instead, as the program's own MPI calls do (see `entry::leave`): the
/// C entry points call this last, with nothing left to drop.
pub fn guard<T: Copy>(
    api: &str,
    call: &str,
    failed: T,
    f: impl FnOnce() -> Result<T, Failure>,
) -> T {
    let fail = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(Ok(v)) => return v,
        Ok(Err(fail)) => fail,
        Err(_) => Failure::new("internal error (a bug in frame)"),
    };
    #[cfg(feature = "mpi")]
    let fail = match fail.interrupted {
        true => {
            // Kept off the stack, which the program's handler may jump
            // over; said below if the handler returns.
            PENDING.with(|p| p.set(Some(fail)));
            // SAFETY: this frame and its callers in the library hold
            // nothing with a destructor from here (`T` is Copy).
            unsafe { crate::entry::leave() };
            match PENDING.with(Cell::take) {
                Some(fail) => fail,
                None => return failed,
            }
        }
        false => fail,
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
