//! Staging: files the program writes in its node's stage directory, moved
//! to the global file system by `FTI_SendFile` (`enable_staging = 1`).
//!
//! A file is copied in bounded pieces (by the kernel, `copy_file_range`
//! where it can) to a new file beside its destination, synced, renamed to
//! its destination, and only then removed from the stage directory: a
//! failure at any point leaves the program's file where it was. The move
//! happens within the call (also with `head = 1`, where FTI's heads move
//! files in the background), so `FTI_GetStageStatus` finds it finished.

use crate::session::{self, Session};
use crate::stage::{MAX_REQUESTS, SI_NINI, SI_SCES};
use crate::status::{guard, guard_value, Failure, FTI_NSCS, FTI_SCES};
use std::ffi::CStr;
use std::io::Write;
use std::os::raw::{c_char, c_int};
use std::path::{Path, PathBuf};

fn enabled(s: &Session) -> Result<&Path, Failure> {
    s.staging
        .dir
        .as_deref()
        .ok_or_else(|| Failure::new("staging is off (set enable_staging = 1)"))
}

fn path_of(p: *const c_char, what: &str) -> Result<PathBuf, Failure> {
    if p.is_null() {
        return Err(Failure::new(format!("the {what} path is null")));
    }
    // SAFETY: checked non-null; C passes a NUL-terminated string.
    let s = unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
    if s.is_empty() {
        return Err(Failure::new(format!("the {what} path is empty")));
    }
    Ok(PathBuf::from(s))
}

/// Moves `from` to `to`: a copy beside `to`, synced and renamed, then
/// `from` removed.
fn move_file(from: &Path, to: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut src = std::fs::File::open(from)?;
    let name = to
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| std::io::Error::other("the destination names no file"))?;
    let tmp = to.with_file_name(format!(".{name}.frame-{}", std::process::id()));
    let copied = (|| {
        let mut dst = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&tmp)?;
        std::io::copy(&mut src, &mut dst)?;
        dst.flush()?;
        dst.sync_all()?;
        std::fs::rename(&tmp, to)
    })();
    if copied.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    copied?;
    if let Some(dir) = to.parent() {
        std::fs::File::open(dir)?.sync_all()?;
    }
    std::fs::remove_file(from)
}

/// Copies the path of the node's stage directory into `stage_dir` (at most
/// `max_len` bytes with its NUL). `FTI_NSCS` when staging is off or the
/// buffer is too small.
///
/// # Safety
/// `stage_dir` must be null or point to `max_len` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn FTI_GetStageDir(stage_dir: *mut c_char, max_len: c_int) -> c_int {
    guard("FTI_GetStageDir", || {
        if stage_dir.is_null() {
            return Err(Failure::new("the buffer is null"));
        }
        session::with(|s| {
            let dir = enabled(s)?.as_os_str().as_encoded_bytes().to_vec();
            let room = usize::try_from(max_len).unwrap_or(0);
            if room < dir.len() + 1 {
                return Err(Failure::new(format!(
                    "the stage directory's path takes {} bytes, the buffer {max_len}",
                    dir.len() + 1
                )));
            }
            // SAFETY: the caller gave `max_len` writable bytes, and the
            // path with its NUL fits in them.
            unsafe {
                std::ptr::copy_nonoverlapping(dir.as_ptr(), stage_dir.cast::<u8>(), dir.len());
                *stage_dir.add(dir.len()) = 0;
            }
            Ok(FTI_SCES)
        })
    })
}

/// Moves the file `lpath` (written by the program, normally in the stage
/// directory) to `rpath` on the global file system, and returns the
/// request's id for `FTI_GetStageStatus`; `FTI_NSCS` when staging is off,
/// a path is null, or the move failed (the file stays where it was).
///
/// # Safety
/// `lpath` and `rpath` must be null or NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn FTI_SendFile(lpath: *const c_char, rpath: *const c_char) -> c_int {
    guard("FTI_SendFile", || {
        let from = path_of(lpath, "local")?;
        let to = path_of(rpath, "remote")?;
        session::with(|s| {
            enabled(s)?;
            if s.staging.waiting() >= MAX_REQUESTS {
                return Err(Failure::new(format!(
                    "{MAX_REQUESTS} requests wait for FTI_GetStageStatus"
                )));
            }
            move_file(&from, &to).map_err(|e| {
                Failure::new(format!("{} to {}: {e}", from.display(), to.display()))
            })?;
            Ok(s.staging.finished(SI_SCES))
        })
    })
}

/// The state of request `id`: `FTI_SI_SCES` once (the request is then
/// forgotten), `FTI_SI_NINI` for an id not in use;
/// `FTI_NSCS` when staging is off.
#[no_mangle]
pub extern "C" fn FTI_GetStageStatus(id: c_int) -> c_int {
    guard_value(
        "FTI_GetStageStatus",
        |_| FTI_NSCS,
        || {
            session::with(|s| {
                enabled(s)?;
                Ok(s.staging.take(id).unwrap_or(SI_NINI))
            })
        },
    )
}
