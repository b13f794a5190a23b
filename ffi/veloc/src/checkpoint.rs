//! Writing checkpoints: `VELOC_Checkpoint_begin`, choosing the regions
//! (`_mem`, `_selective`), `VELOC_Route_file`, `_end`, and the waits.
//!
//! A VeloC checkpoint (a name and a version) is one of frame's
//! checkpoints: the chosen regions, and this rank's file when the program
//! routed one. Rank 0 records which of frame's checkpoints holds the
//! version (see [`crate::index`]).

use crate::index::{Index, Version};
use crate::session::{self, Begun, Session};
use crate::status::{call, guard, Failure, VELOC_FAILURE};
use frame_core::{ElemType, Level};
use std::ffi::{c_char, c_int};

/// `VELOC_CKPT_SOME` and `VELOC_CKPT_REST` (as the `RECOVER` ones).
pub(crate) const SOME: c_int = 1;
pub(crate) const REST: c_int = 2;

/// The name frame keeps a rank's routed file under.
pub(crate) const FILE: &str = "veloc-file";

/// Checks a checkpoint's name and version as VeloC does.
pub(crate) fn check(name: &str, version: c_int) -> Result<i64, Failure> {
    let valid = !name.is_empty()
        && name.len() < 128
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.');
    if !valid {
        return Err(Failure::new(format!(
            "checkpoint name {name:?} is not 1 to 127 of [a-zA-Z0-9_.]"
        )));
    }
    if version < 0 {
        return Err(Failure::new(format!("version {version} is negative")));
    }
    Ok(i64::from(version))
}

/// The program's `count` ids at `ids`.
///
/// # Safety
/// `ids` points to `count` integers (or is NULL with `count` 0).
pub(crate) unsafe fn ids_of(ids: *const c_int, count: c_int) -> Result<Vec<c_int>, Failure> {
    match (ids.is_null(), usize::try_from(count)) {
        (_, Ok(0)) => Ok(Vec::new()),
        // SAFETY: as the caller promises.
        (false, Ok(n)) => Ok(unsafe { std::slice::from_raw_parts(ids, n) }.to_vec()),
        _ => Err(Failure::new(format!("{count} ids at {ids:?}"))),
    }
}

/// The ids `mode` selects among `all` with the program's `given` ones.
pub(crate) fn select(
    all: impl Iterator<Item = u32>,
    mode: c_int,
    given: &[c_int],
) -> Result<Vec<u32>, Failure> {
    let given: Vec<u32> = given
        .iter()
        .filter_map(|i| u32::try_from(*i).ok())
        .collect();
    Ok(match mode {
        0 => all.collect(),
        SOME => all.filter(|id| given.contains(id)).collect(),
        REST => all.filter(|id| !given.contains(id)).collect(),
        other => {
            return Err(Failure::new(format!(
                "mode {other} is not ALL, SOME or REST"
            )))
        }
    })
}

/// Begins checkpoint `version` of `name`.
///
/// # Safety
/// `name` is null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn VELOC_Checkpoint_begin(name: *const c_char, version: c_int) -> c_int {
    call("VELOC_Checkpoint_begin", || {
        // SAFETY: as the caller promises.
        let name = unsafe { crate::init::text(name, "the checkpoint name") }?;
        session::with(|s| begin(s, name, version))
    })
}

fn begin(s: &mut Session, name: &str, version: c_int) -> Result<(), Failure> {
    if s.begun.is_some() || s.restarting.is_some() {
        return Err(Failure::new(
            "a checkpoint or a restart is begun (end it first)",
        ));
    }
    let version = check(name, version)?;
    s.ckpt()?.begin_checkpoint(Level::L1)?;
    s.begun = Some(Begun {
        name: name.to_string(),
        version,
        selection: Vec::new(),
        file: None,
    });
    Ok(())
}

/// Saves the regions `mode` selects with `ids` in the checkpoint begun.
///
/// # Safety
/// `ids` points to `count` integers.
#[no_mangle]
pub unsafe extern "C" fn VELOC_Checkpoint_selective(
    mode: c_int,
    ids: *mut c_int,
    count: c_int,
) -> c_int {
    call("VELOC_Checkpoint_selective", || {
        // SAFETY: as the caller promises.
        let given = unsafe { ids_of(ids, count) }?;
        session::with(|s| choose(s, mode, &given))
    })
}

/// Saves every protected region in the checkpoint begun.
#[no_mangle]
pub extern "C" fn VELOC_Checkpoint_mem() -> c_int {
    call("VELOC_Checkpoint_mem", || {
        session::with(|s| choose(s, 0, &[]))
    })
}

/// Chooses the regions of the checkpoint begun.
fn choose(s: &mut Session, mode: c_int, given: &[c_int]) -> Result<(), Failure> {
    let chosen = select(s.regions.keys().copied(), mode, given)?;
    let Some(begun) = s.begun.as_mut() else {
        return Err(Failure::new(
            "no checkpoint is begun (call VELOC_Checkpoint_begin first)",
        ));
    };
    if chosen.is_empty() {
        return Err(Failure::new("no protected region is selected"));
    }
    begun.selection = chosen;
    Ok(())
}

/// This rank's file in the checkpoint begun (the same for any name).
pub(crate) fn route(s: &mut Session) -> Result<std::path::PathBuf, Failure> {
    if let Some(path) = s.begun.as_ref().and_then(|b| b.file.clone()) {
        return Ok(path);
    }
    let path = s.ckpt()?.checkpoint_file(FILE)?;
    if let Some(b) = s.begun.as_mut() {
        b.file = Some(path.clone());
    }
    Ok(path)
}

/// Ends the checkpoint begun: it commits when every rank passes
/// `success` = 1, and is dropped otherwise. In sync mode, returns once
/// every level due holds it. Collective.
#[no_mangle]
pub extern "C" fn VELOC_Checkpoint_end(success: c_int) -> c_int {
    call("VELOC_Checkpoint_end", || {
        session::with(|s| end(s, success != 0))
    })
}

fn end(s: &mut Session, success: bool) -> Result<(), Failure> {
    let Some(begun) = s.begun.take() else {
        return Err(Failure::new("no checkpoint is begun"));
    };
    let mut all = [u64::from(success)];
    s.comm
        .all_reduce_u64(&mut all, frame_core::comm::ReduceOp::Min)?;
    if all[0] == 0 {
        s.ckpt()?.cancel_checkpoint()?;
        return Err(Failure::shared(format!(
            "version {} of {} is not kept: a rank passed success = 0",
            begun.version, begun.name
        )));
    }
    // frame saves what its registry holds: the regions chosen, no other.
    let stale: Vec<u32> = s.in_frame.iter().copied().collect();
    for id in stale {
        s.ckpt()?.unprotect(id);
    }
    s.in_frame.clear();
    for id in &begun.selection {
        let region = s.regions[id];
        // SAFETY: the program keeps protected memory valid while it is
        // protected (VELOC_Mem_protect's contract).
        unsafe {
            s.ckpt()?
                .protect_raw(*id, region.ptr, region.bytes, ElemType::Byte)
        };
        s.in_frame.insert(*id);
    }
    let id = s.ckpt()?.end_checkpoint()?;
    if s.rank() == 0 {
        let dir = s.index_dir.clone();
        let recorded = std::fs::create_dir_all(&dir)
            .map_err(|e| format!("{}: {e}", dir.display()))
            .and_then(|()| Index::load(&dir))
            .and_then(|mut index| {
                index.add(Version {
                    id,
                    name: begun.name.clone(),
                    version: begun.version,
                });
                index.save(&dir)
            });
        if let Err(e) = recorded {
            crate::status::warning(format_args!(
                "version {} of {} is kept, but the index of versions is not updated: {e}",
                begun.version, begun.name
            ));
        }
    }
    if s.file.synchronous {
        s.ckpt()?.wait_for_promotions()?;
    }
    Ok(())
}

/// Waits until every level due holds the checkpoints written. Collective.
#[no_mangle]
pub extern "C" fn VELOC_Checkpoint_wait() -> c_int {
    call("VELOC_Checkpoint_wait", || {
        session::with(|s| Ok(s.ckpt()?.wait_for_promotions()?))
    })
}

/// 1 once every level due holds the checkpoints written (frame waits for
/// them here). Collective.
#[no_mangle]
pub extern "C" fn VELOC_Checkpoint_finished() -> c_int {
    guard("VELOC_Checkpoint_finished", VELOC_FAILURE, || {
        session::with(|s| s.ckpt()?.wait_for_promotions().map_err(Failure::from))?;
        Ok(1)
    })
}

/// Waits, begins, saves every region and ends. Collective.
///
/// # Safety
/// `name` is null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn VELOC_Checkpoint(name: *const c_char, version: c_int) -> c_int {
    call("VELOC_Checkpoint", || {
        // SAFETY: as the caller promises.
        let name = unsafe { crate::init::text(name, "the checkpoint name") }?;
        session::with(|s| {
            s.ckpt()?.wait_for_promotions()?;
            begin(s, name, version)?;
            if let Err(e) = choose(s, 0, &[]) {
                s.begun = None;
                s.ckpt()?.cancel_checkpoint()?;
                return Err(e);
            }
            end(s, true)
        })
    })
}
