//! SCR's return codes, and the guard every C entry point runs under (see
//! `frame_interface::guard`): an error becomes `1` and one line on
//! standard error, and a panic never crosses into C.

use std::os::raw::c_int;

pub(crate) use frame_interface::{set_rank, Failure};

/// Success.
pub const SCR_SUCCESS: c_int = 0;
/// Failure (SCR's header names no constant for it).
pub const SCR_FAILURE: c_int = 1;

/// Runs `f` for the C call `name`: `SCR_SUCCESS`, or `SCR_FAILURE` with
/// the failure said.
pub(crate) fn guard(name: &str, f: impl FnOnce() -> Result<(), Failure>) -> c_int {
    guard_value(name, SCR_FAILURE, || f().map(|()| SCR_SUCCESS))
}

/// Like [`guard`] for calls returning something else: `failed` is
/// returned on failure.
pub(crate) fn guard_value<T: Copy>(
    name: &str,
    failed: T,
    f: impl FnOnce() -> Result<T, Failure>,
) -> T {
    frame_interface::guard("SCR", name, failed, f)
}
