//! Staging: files the program writes in its node's stage directory, moved
//! to the global file system by `FTI_SendFile` (`enable_staging = 1`); how
//! a file moves, and when, is `stage`'s.

use crate::session::{self, Session};
use crate::stage::MAX_REQUESTS;
use crate::status::{guard, guard_value, Failure, FTI_NSCS, FTI_SCES};
use std::ffi::CStr;
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
/// directory) to `rpath` on the global file system (in the background with
/// `head = 1`), and returns the request's id for `FTI_GetStageStatus`;
/// `FTI_NSCS` when staging is off, a path is null, `lpath` is not a file,
/// or a move within the call failed (the file stays where it was).
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
            if !from.is_file() {
                return Err(Failure::new(format!("{} is not a file", from.display())));
            }
            let what = format!("{} to {}", from.display(), to.display());
            s.staging
                .send(from, to)
                .map_err(|e| Failure::new(format!("{what}: {e}")))
        })
    })
}

/// The state of request `id`: `FTI_SI_PEND` or `FTI_SI_ACTV` while it is in
/// flight, then `FTI_SI_SCES` or `FTI_SI_FAIL` once (the request is then
/// forgotten), `FTI_SI_NINI` for an id not in use; `FTI_NSCS` when staging
/// is off.
#[no_mangle]
pub extern "C" fn FTI_GetStageStatus(id: c_int) -> c_int {
    guard_value(
        "FTI_GetStageStatus",
        |_| FTI_NSCS,
        || {
            session::with(|s| {
                enabled(s)?;
                Ok(s.staging.status(id))
            })
        },
    )
}
