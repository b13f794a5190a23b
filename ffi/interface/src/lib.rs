//! What frame's libraries for other checkpointing APIs share (libscr and
//! libveloc: programs written for SCR or VeloC, relinked against frame).
//!
//! - [`Failure`] and [`guard`]: a failed C call becomes the API's code and
//!   one line on standard error, said once for every rank when all failed
//!   alike, and a panic never crosses into C;
//! - [`agree`] and [`rank_0s`]: the agreements a collective call makes
//!   before it takes a branch, so that no rank is left in a collective;
//! - [`json_file`]: the small private files the libraries keep (their
//!   indexes of names), read bounded and replaced whole;
//! - [`c_text`]: a C string a program passes, checked;
//! - `entry` (with the `mpi` feature): the entry of frame's resilient
//!   function running on this thread, for online recovery;
//! - `program_comm` (with the `mpi` feature): the library's duplicate of
//!   the program's communicator, made without the program's handler.

mod agreement;
#[cfg(feature = "mpi")]
pub mod entry;
mod failure;
pub mod json_file;
#[cfg(feature = "mpi")]
pub mod program_comm;

pub use agreement::{agree, all, rank_0s};
pub use failure::{guard, say, set_rank, Failure};

/// The C string at `text`, or a failure naming `what` (NULL, not UTF-8).
///
/// # Safety
/// `text` is null or a NUL-terminated string that outlives `'a`.
pub unsafe fn c_text<'a>(text: *const std::ffi::c_char, what: &str) -> Result<&'a str, Failure> {
    if text.is_null() {
        return Err(Failure::new(format!("{what} is NULL")));
    }
    // SAFETY: checked non-null; the caller passes a NUL-terminated string.
    unsafe { std::ffi::CStr::from_ptr(text) }
        .to_str()
        .map_err(|_| Failure::new(format!("{what} is not UTF-8")))
}
