//! A Reinit-style global-restart runtime.
//!
//! A job is a root (the launcher: `frame run`, or a program embedding
//! [`Launch`]), one daemon per node, and the ranks. When a rank or a node
//! dies, the root broadcasts a REINIT with a new epoch and placement:
//! survivors roll back to the resilient function's entry, failed ranks are
//! respawned (on their node, or on a spare node if theirs died), everyone
//! meets at a world barrier, and the resilient function is entered again with
//! the failure information.
//!
//! ```no_run
//! use frame_runtime::State;
//!
//! fn main() -> std::process::ExitCode {
//!     frame_runtime::run(|ctx| {
//!         if ctx.state() != State::New {
//!             eprintln!("rank {} back after failures of {:?}", ctx.rank(), ctx.failed_ranks());
//!         }
//!         for iteration in 0..1000 {
//!             ctx.fault_point(iteration)?;
//!             // compute, communicate through ctx.comm(), checkpoint ...
//!         }
//!         Ok::<(), frame::comm::CommError>(())
//!     })
//! }
//! ```
//!
//! Survivors notice a REINIT at their next communication call (blocked calls
//! wake up) or [`Context::fault_point`]: the call fails with
//! [`CommError::Interrupted`](frame::comm::CommError::Interrupted), the
//! resilient function returns (or unwinds), and [`run`] re-enters it. There is
//! no `longjmp`. Messages of an old epoch are never delivered in a new one.

#![warn(missing_docs)]
#![warn(unreachable_pub)]

mod agent;
mod context;
mod crowding;
mod daemon;
mod handoff;
mod idle;
pub mod inject;
mod manager_process;
pub mod placement;
mod proto;
mod rank;
mod root;
mod rundir;
mod team;
#[cfg(feature = "ulfm")]
pub mod ulfm;

pub use context::Context;
pub use daemon::serve_if_daemon;
pub use handoff::{role, Role, Transport};
pub use idle::{process_cpu_time, set_idle_hook};
pub use inject::Injection;
pub use root::{Launch, LaunchArgs, Launcher, Outcome, RecoveryMode, RunError};
pub use team::{set_helper, HelperError, Team};

use serde::{Deserialize, Serialize};
use std::fmt::Display;
use std::process::ExitCode;

/// How a rank entered the resilient function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum State {
    /// First start of the job.
    New,
    /// A survivor, rolled back after a failure elsewhere.
    Reinited,
    /// A replacement for a rank that failed.
    Restarted,
}

impl std::fmt::Display for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            State::New => "NEW",
            State::Reinited => "REINITED",
            State::Restarted => "RESTARTED",
        })
    }
}

/// Text of a panic payload (a rank's or a helper's function).
pub(crate) fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "panic".into())
}

/// Errors of a rank's runtime (not of the application).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RuntimeError {
    /// The process was started with an incomplete environment.
    #[error("runtime environment: {0}")]
    Environment(String),
    /// The node daemon could not be reached.
    #[error("node daemon: {0}")]
    Daemon(String),
    /// An I/O error.
    #[error("runtime I/O error: {0}")]
    Io(#[from] std::io::Error),
}

/// Runs the resilient function `f` of this process and returns the exit code.
///
/// - Started by a runtime as a rank: waits for the world barrier, calls `f`,
///   and calls it again after every recovery (with state `Reinited`, or
///   `Restarted` in a replacement process). Returns when every rank finished.
///   An error from `f` that is not caused by a recovery stops the whole job.
/// - Started as a daemon (the runtime starts programs that embed it as their
///   own daemons): serves as the node daemon and never calls `f`.
/// - Started on its own: calls `f` once, as the only rank.
pub fn run<F, E>(f: F) -> ExitCode
where
    F: FnMut(&mut Context<'_>) -> Result<(), E>,
    E: Display,
{
    ExitCode::from(run_status(f))
}

/// [`run`], with the exit status as a number (for the C interface): 0 on
/// success.
pub fn run_status<F, E>(f: F) -> u8
where
    F: FnMut(&mut Context<'_>) -> Result<(), E>,
    E: Display,
{
    match role() {
        Role::Daemon => daemon::main(),
        Role::Manager => manager_process::main_code(),
        Role::Rank => rank::main(f),
        Role::Launcher => rank::standalone(f),
    }
}
