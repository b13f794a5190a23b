//! Protecting variables, writing checkpoints and recovering them, as FTI's
//! calls do.

use crate::args::{checked_level, var_id};
use crate::session::{self, Session, Var};
use crate::status::{guard, guard_value, Failure, FTI_DONE, FTI_SCES};
use crate::types::{self, fti_id_t};
use frame_core::Level;
use std::os::raw::{c_int, c_void};

extern "C" {
    fn realloc(ptr: *mut c_void, size: usize) -> *mut c_void;
}

/// Protects `count` elements of type `tid` at `ptr` as variable `id`, or
/// changes the pointer, count or type of a protected one.
///
/// # Safety
/// `ptr` must stay valid for `count` elements of the type until the
/// variable is protected again or `FTI_Finalize` is called.
#[no_mangle]
pub unsafe extern "C" fn FTI_Protect(
    id: c_int,
    ptr: *mut c_void,
    count: i64,
    tid: fti_id_t,
) -> c_int {
    guard("FTI_Protect", || {
        let id = var_id(id)?;
        let layout = types::layout(tid)?;
        let count = usize::try_from(count)
            .map_err(|_| Failure::new(format!("variable {id}: count {count} is negative")))?;
        let ptr = if ptr.is_null() {
            if count > 0 {
                return Err(Failure::new(format!("variable {id}: the pointer is null")));
            }
            std::ptr::NonNull::<u64>::dangling().as_ptr().cast()
        } else {
            ptr.cast::<u8>()
        };
        if !(ptr as usize).is_multiple_of(layout.elem.size()) {
            return Err(Failure::new(format!(
                "variable {id}: the pointer is not aligned for its type"
            )));
        }
        session::with(|s| s.protect(id, Var { ptr, count, layout }))?;
        Ok(FTI_SCES)
    })
}

/// After a checkpoint at `level`, waits for its promotion when the
/// configuration makes that level synchronous (`inline_lN = 1`).
fn settle(s: &mut Session, level: Option<Level>) -> Result<(), Failure> {
    let sync = match level {
        Some(l) if l != Level::L1 => s.fti.inline[l.number() as usize - 2],
        Some(_) => false,
        None => s.waits_for_levels(),
    };
    if sync {
        s.ckpt.wait_for_promotions()?;
    }
    Ok(())
}

/// `FTI_Snapshot`'s recovery, collective: every protected variable from the
/// checkpoint found by `FTI_Init` (every rank loads; damaged data anywhere
/// sends all ranks to an older checkpoint or level), or, once this run wrote
/// checkpoints, from the newest of them.
fn recover_all(s: &mut Session) -> Result<c_int, Failure> {
    if s.single_recovery.is_some() {
        return recover_from_single_file(s);
    }
    if s.ckpt.recovering() {
        s.ckpt.recover()?;
    } else {
        s.ckpt.recover_here()?;
    }
    s.recovering = false;
    Ok(FTI_SCES)
}

/// On a restart from a single file: every protected variable's subset.
fn recover_from_single_file(s: &mut Session) -> Result<c_int, Failure> {
    for id in s.vars.keys().copied().collect::<Vec<_>>() {
        recover_var_from_single_file(s, id)?;
    }
    s.recovering = false;
    Ok(FTI_SCES)
}

/// On a restart from a single file: variable `id`'s subset.
fn recover_var_from_single_file(s: &Session, id: u32) -> Result<(), Failure> {
    let (Some(found), Some(var)) = (&s.single_recovery, s.vars.get(&id)) else {
        return Err(Failure::no_recovery(format!(
            "variable {id} is not protected"
        )));
    };
    let subset = s.datasets.subsets.get(&id).ok_or_else(|| {
        Failure::no_recovery(format!(
            "variable {id} is not part of a global data set (FTI_AddSubset): a restart from a single file cannot recover it"
        ))
    })?;
    // SAFETY: the program's protected buffer of `var.bytes()` bytes, which
    // nothing else uses during the call.
    let memory = unsafe { std::slice::from_raw_parts_mut(var.ptr, var.bytes()) };
    found.read(id, subset, memory, var.layout.width)
}

/// The protected variables' memory, for the single file.
fn memories(s: &Session) -> std::collections::BTreeMap<u32, crate::single_file::Memory<'_>> {
    s.vars
        .iter()
        .map(|(id, v)| {
            // SAFETY: the program's protected buffer of `v.bytes()` bytes.
            let memory = unsafe { std::slice::from_raw_parts(v.ptr.cast_const(), v.bytes()) };
            (*id, (memory, v.layout.width))
        })
        .collect()
}

/// Call once per iteration: on a restart the first call recovers the
/// protected variables; afterwards it writes a checkpoint when the
/// configured interval has passed. Returns `FTI_DONE` when it wrote one,
/// `FTI_SCES` when it did not, `FTI_NREC` or `FTI_NSCS` on failure.
/// Collective.
#[no_mangle]
pub extern "C" fn FTI_Snapshot() -> c_int {
    guard("FTI_Snapshot", || {
        session::with(|s| {
            if s.recovering {
                return recover_all(s);
            }
            if !s.fti.snapshots {
                return Ok(FTI_SCES);
            }
            match s.ckpt.snapshot()? {
                Some(_) => {
                    s.keys.checkpointed();
                    settle(s, None)?;
                    Ok(FTI_DONE)
                }
                None => Ok(FTI_SCES),
            }
        })
    })
}

/// Writes a checkpoint of the protected variables now, kept at `level`
/// (1 to 4; 5 to 8, FTI's differential forms of 1 to 4, count as 1 to 4).
/// frame numbers its checkpoints itself: any `id` is taken, as FTI takes
/// it. Returns `FTI_DONE`. Collective.
#[no_mangle]
pub extern "C" fn FTI_Checkpoint(id: c_int, level: c_int) -> c_int {
    guard("FTI_Checkpoint", || {
        let single = level == FTI_L4_H5_SINGLE;
        let level = checked_level(level)?;
        session::with(|s| {
            s.ckpt.checkpoint_at(level)?;
            s.last_checkpoint = Some((id, c_int::from(level.number())));
            s.keys.checkpointed();
            settle(s, Some(level))?;
            if let (true, Some(place)) = (single, &s.fti.single_file) {
                crate::single_file::write(s.comm, place, id, &s.datasets, &memories(s))?;
            }
            Ok(FTI_DONE)
        })
    })
}

/// FTI's level id of a checkpoint whose global data sets also go to one
/// file (with `h5_single_file_enable = 1`).
const FTI_L4_H5_SINGLE: c_int = 9;

/// 1 while a checkpoint found by `FTI_Init` waits to be recovered, 0
/// otherwise.
#[no_mangle]
pub extern "C" fn FTI_Status() -> c_int {
    guard_value(
        "FTI_Status",
        |_| 0,
        || session::with(|s| Ok(c_int::from(s.recovering))),
    )
}

/// Loads every protected variable on this rank: from the checkpoint found
/// by `FTI_Init`, or, once this run wrote checkpoints, from the newest of
/// them (a rollback within the run). Each stored variable must be
/// protected with its stored size (see `FTI_GetStoredSize` and
/// `FTI_Realloc`). Not collective, as in FTI: other ranks may recover
/// variable by variable, or not at all. `FTI_NREC` when there is nothing
/// to load or it does not fit.
#[no_mangle]
pub extern "C" fn FTI_Recover() -> c_int {
    guard("FTI_Recover", || {
        session::with(|s| {
            if s.single_recovery.is_some() && s.recovering {
                return recover_from_single_file(s);
            }
            s.ckpt.recover_here().map_err(|e| match e {
                frame_core::Error::RegionMismatch { .. } | frame_core::Error::Unreadable { .. } => {
                    Failure::no_recovery(e.to_string())
                }
                e => Failure::from(e),
            })?;
            s.recovering = false;
            Ok(FTI_SCES)
        })
    })
}

/// Starts recovering variables one by one.
#[no_mangle]
pub extern "C" fn FTI_RecoverVarInit() -> c_int {
    guard("FTI_RecoverVarInit", || {
        session::with(|s| {
            if !s.recovering {
                return Err(Failure::no_recovery("there is no checkpoint to recover"));
            }
            s.recovering_vars = true;
            Ok(FTI_SCES)
        })
    })
}

/// Loads variable `id` alone from the checkpoint found by `FTI_Init`.
#[no_mangle]
pub extern "C" fn FTI_RecoverVar(id: c_int) -> c_int {
    guard("FTI_RecoverVar", || {
        let id = var_id(id)?;
        session::with(|s| {
            if !s.recovering {
                return Err(Failure::no_recovery("there is no checkpoint to recover"));
            }
            if s.single_recovery.is_some() {
                recover_var_from_single_file(s, id)?;
            } else {
                s.ckpt.recover_region(id)?;
            }
            Ok(FTI_SCES)
        })
    })
}

/// Ends recovering variables one by one. As in FTI, the restart stays
/// pending (`FTI_Status` still says so): a variable that failed can be
/// resized with `FTI_Realloc` and recovered again after a new
/// `FTI_RecoverVarInit`.
#[no_mangle]
pub extern "C" fn FTI_RecoverVarFinalize() -> c_int {
    guard("FTI_RecoverVarFinalize", || {
        session::with(|s| {
            if !s.recovering_vars {
                return Err(Failure::new("FTI_RecoverVarInit was not called"));
            }
            s.recovering_vars = false;
            Ok(FTI_SCES)
        })
    })
}

/// The size in bytes of variable `id` in the checkpoint to recover; 0 when
/// there is none or it does not hold the variable.
#[no_mangle]
pub extern "C" fn FTI_GetStoredSize(id: c_int) -> i64 {
    guard_value(
        "FTI_GetStoredSize",
        |_| 0,
        || {
            let id = var_id(id)?;
            session::with(|s| Ok(stored_size(s, id)?.unwrap_or(0) as i64))
        },
    )
}

fn stored_size(s: &Session, id: u32) -> Result<Option<usize>, Failure> {
    if !s.recovering {
        return Ok(None);
    }
    if s.single_recovery.is_some() {
        let width = s.vars.get(&id).map(|v| v.layout.width);
        let elements = s.datasets.subsets.get(&id).and_then(|t| t.elements());
        return Ok(width
            .zip(elements)
            .and_then(|(w, n)| usize::try_from(n).ok()?.checked_mul(w)));
    }
    Ok(s.ckpt.stored_region(id).map(|r| r.bytes() as usize))
}

/// On a restart, resizes the buffer of protected variable `id` (allocated
/// with `malloc`) to its stored size with `realloc`, protects the new
/// buffer, and returns it; the variable can then be recovered. Outside a
/// restart, returns `ptr` unchanged. Returns NULL on failure (`ptr` is then
/// still valid and still protected).
///
/// # Safety
/// `ptr` must be the protected pointer of variable `id`, from `malloc`.
#[no_mangle]
pub unsafe extern "C" fn FTI_Realloc(id: c_int, ptr: *mut c_void) -> *mut c_void {
    guard_value(
        "FTI_Realloc",
        |_| std::ptr::null_mut(),
        || {
            let id = var_id(id)?;
            session::with(|s| {
                let var = *s
                    .vars
                    .get(&id)
                    .ok_or_else(|| Failure::new(format!("variable {id} is not protected")))?;
                if var.ptr != ptr.cast() && var.count > 0 {
                    return Err(Failure::new(format!(
                        "variable {id} is protected with another pointer"
                    )));
                }
                let Some(bytes) = stored_size(s, id)? else {
                    return Ok(ptr);
                };
                if !bytes.is_multiple_of(var.layout.width) {
                    return Err(Failure::new(format!(
                    "variable {id} is stored with {bytes} bytes, not a whole number of its {}-byte elements",
                    var.layout.width
                )));
                }
                // SAFETY: the caller guarantees `ptr` came from malloc.
                let new = unsafe { realloc(ptr, bytes.max(1)) };
                if new.is_null() {
                    return Err(Failure::new(format!(
                        "cannot allocate {bytes} bytes for variable {id}"
                    )));
                }
                s.protect(
                    id,
                    Var {
                        ptr: new.cast(),
                        count: bytes / var.layout.width,
                        ..var
                    },
                )?;
                Ok(new)
            })
        },
    )
}
