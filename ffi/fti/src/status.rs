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

/// A failed call: its code, what went wrong, and which rank says so.
#[derive(Debug)]
pub(crate) struct Failure {
    pub code: c_int,
    pub message: String,
    pub said_by: SaidBy,
}

/// Which rank prints a failure: a job's ranks that fail alike print one
/// line between them, not one each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SaidBy {
    /// This rank's own failure: it prints it, naming itself.
    This,
    /// Every rank failed alike (a collective call's agreed outcome): the
    /// lowest rank, rank 0, prints it for all.
    Lowest,
    /// Another rank prints the cause: this one says nothing.
    Another,
}

impl Failure {
    /// A failure with `FTI_NSCS`.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            code: FTI_NSCS,
            message: message.into(),
            said_by: SaidBy::This,
        }
    }

    /// Nothing to recover (`FTI_NREC`).
    pub fn no_recovery(message: impl Into<String>) -> Self {
        Self {
            code: FTI_NREC,
            ..Self::new(message)
        }
    }

    /// The same failure, printed by `who`.
    pub fn said_by(mut self, who: SaidBy) -> Self {
        self.said_by = who;
        self
    }
}

impl From<frame_core::Error> for Failure {
    fn from(e: frame_core::Error) -> Self {
        let who = if e.is_collective() {
            SaidBy::Lowest
        } else {
            SaidBy::This
        };
        let failure = match e {
            // FTI's code for checkpoints that exist but cannot be restored.
            frame_core::Error::NothingToRecover | frame_core::Error::NotRecoverable { .. } => {
                Self::no_recovery(e.to_string())
            }
            // FTI calls protected regions variables.
            frame_core::Error::Region { id, reason } => {
                Self::new(format!("variable {id} {reason}"))
            }
            e => Self::new(e.to_string()),
        };
        failure.said_by(who)
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
            report(name, &fail);
            on_failure(fail.code)
        }
        Err(_) => {
            report(name, &Failure::new("internal error (a bug in frame)"));
            on_failure(FTI_NSCS)
        }
    }
}

thread_local! {
    static RANK: Cell<Option<usize>> = const { Cell::new(None) };
}

/// This process's rank, once `FTI_Init` knows it (for messages).
pub(crate) fn set_rank(rank: usize) {
    RANK.with(|r| r.set(Some(rank)));
}

/// This process's rank, if `FTI_Init` set it (for messages).
pub(crate) fn rank() -> Option<usize> {
    RANK.with(Cell::get)
}

/// Prints a failure of `name` where it is said (see [`SaidBy`]): this
/// rank's own names the rank; one every rank hit alike is printed by
/// rank 0 alone.
fn report(name: &str, fail: &Failure) {
    match (fail.said_by, rank()) {
        (SaidBy::Another, _) => {}
        (SaidBy::Lowest, Some(r)) if r > 0 => {}
        (SaidBy::Lowest, _) | (SaidBy::This, None) => {
            crate::say::error(format_args!("{name}: {}", fail.message))
        }
        (SaidBy::This, Some(r)) => {
            crate::say::error(format_args!("rank {r}: {name}: {}", fail.message))
        }
    }
}
