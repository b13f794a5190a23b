//! File checkpoints: the program begins a checkpoint, asks for the path of
//! each file it writes itself (with `fwrite`, MPI-IO, a library), writes
//! it, and ends the checkpoint; after a recovery it asks for the path of
//! each file by name.

use crate::state;
use crate::status::{guard, guard_value, Failure, FRAME_EINTERNAL, FRAME_OK};
use frame_core::Level;
use std::ffi::{c_char, c_int, CStr};
use std::path::Path;

/// The name a call was given.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string.
unsafe fn name_of<'a>(name: *const c_char) -> Result<&'a str, Failure> {
    if name.is_null() {
        return Err(Failure::invalid("the file name is null"));
    }
    // SAFETY: the caller passes a NUL-terminated string.
    unsafe { CStr::from_ptr(name) }
        .to_str()
        .map_err(|_| Failure::invalid("the file name is not UTF-8"))
}

/// Copies `path` and its NUL into `buf` of `size` bytes.
///
/// # Safety
/// `buf` is valid for writes of `size` bytes (or NULL).
unsafe fn give_path(path: &Path, buf: *mut c_char, size: usize) -> Result<c_int, Failure> {
    let text = path.to_string_lossy();
    let bytes = text.as_bytes();
    if buf.is_null() || bytes.len() >= size {
        return Err(Failure::invalid(format!(
            "the buffer of {size} bytes cannot hold the path {text} and its NUL ({} bytes)",
            bytes.len() + 1
        )));
    }
    // SAFETY: `buf` holds `size` > `bytes.len()` bytes (checked above).
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.cast::<u8>(), bytes.len());
        *buf.add(bytes.len()) = 0;
    }
    Ok(FRAME_OK)
}

/// Begins a checkpoint of files, kept at `level` (1 to 4) besides the
/// levels whose interval is due; it also holds the protected regions.
/// Until `frame_end_checkpoint`, `frame_snapshot` and `frame_checkpoint`
/// are refused. Not collective.
#[no_mangle]
pub extern "C" fn frame_begin_checkpoint(level: c_int) -> c_int {
    guard("frame_begin_checkpoint", || {
        let level = u8::try_from(level)
            .ok()
            .and_then(Level::from_number)
            .ok_or_else(|| Failure::invalid(format!("level {level} is not 1, 2, 3 or 4")))?;
        state::with_ckpt(|c| {
            c.begin_checkpoint(level)?;
            Ok(FRAME_OK)
        })
    })
}

/// Writes into `path` (a buffer of `size` bytes; 4096 is always enough)
/// the path at which to write file `name` of the checkpoint begun: a new,
/// empty, private file on the node's storage. `name` is one file name
/// (no `/`, not starting with `.`, at most 255 bytes). Not collective.
#[no_mangle]
pub unsafe extern "C" fn frame_checkpoint_file(
    name: *const c_char,
    path: *mut c_char,
    size: usize,
) -> c_int {
    guard("frame_checkpoint_file", || {
        // SAFETY: the caller passes a NUL-terminated string.
        let name = unsafe { name_of(name) }?;
        let file = state::with_ckpt(|c| Ok(c.checkpoint_file(name)?))?;
        // SAFETY: the caller passes a buffer of `size` bytes.
        unsafe { give_path(&file, path, size) }
    })
}

/// Ends the checkpoint begun: saves every file named (kept by the
/// checkpoint as written when it stays on the node, saved into it and
/// removed otherwise; either way gone from its path) with the protected
/// regions, and commits it on every rank. Returns the checkpoint's id
/// (positive), or a negative status. The program must have closed the
/// files, and must not write to them afterwards. Collective.
#[no_mangle]
pub extern "C" fn frame_end_checkpoint() -> i64 {
    guard_value("frame_end_checkpoint", i64::from(FRAME_EINTERNAL), || {
        state::with_ckpt(|c| {
            let id = c.end_checkpoint()?;
            Ok(i64::try_from(id).unwrap_or(i64::MAX))
        })
    })
}

/// After `frame_recover`, writes into `path` (a buffer of `size` bytes)
/// the path of file `name` as the restored checkpoint held it.
/// `FRAME_EINVAL` when it held no such file on this rank. Not collective.
#[no_mangle]
pub unsafe extern "C" fn frame_recovered_file(
    name: *const c_char,
    path: *mut c_char,
    size: usize,
) -> c_int {
    guard("frame_recovered_file", || {
        // SAFETY: the caller passes a NUL-terminated string.
        let name = unsafe { name_of(name) }?;
        let file = state::with_ckpt(|c| {
            c.recovered_file(name)
                .map_err(|e| Failure::invalid(e.to_string()))
        })?;
        // SAFETY: the caller passes a buffer of `size` bytes.
        unsafe { give_path(&file, path, size) }
    })
}
