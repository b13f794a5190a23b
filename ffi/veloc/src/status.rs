//! VeloC's return codes, and the guard every C entry point runs under (see
//! `frame_interface::guard`): an error becomes `VELOC_FAILURE` and one line
//! on standard error, and a panic never crosses into C.

use frame_log::Level;
use std::os::raw::c_int;

pub(crate) use frame_interface::{set_rank, Failure};

/// Success.
pub const VELOC_SUCCESS: c_int = 0;
/// Failure.
pub const VELOC_FAILURE: c_int = -1;

/// Runs `f` for the C call `name`: its value, or `failed` with the failure
/// said.
pub(crate) fn guard<T: Copy>(name: &str, failed: T, f: impl FnOnce() -> Result<T, Failure>) -> T {
    frame_interface::guard("VeloC", name, failed, f)
}

/// [`guard`] for calls that return `VELOC_SUCCESS` or `VELOC_FAILURE`.
pub(crate) fn call(name: &str, f: impl FnOnce() -> Result<(), Failure>) -> c_int {
    guard(name, VELOC_FAILURE, || f().map(|()| VELOC_SUCCESS))
}

/// An error line of libveloc's.
pub(crate) fn error(message: impl std::fmt::Display) {
    frame_interface::say("VeloC", Level::ERROR, message);
}

/// A warning of libveloc's.
pub(crate) fn warning(message: impl std::fmt::Display) {
    frame_interface::say("VeloC", Level::WARN, message);
}
