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
        valid: true,
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

/// Chooses the regions of the checkpoint begun, as they are now. A
/// failure marks the checkpoint invalid: ending it drops it everywhere.
fn choose(s: &mut Session, mode: c_int, given: &[c_int]) -> Result<(), Failure> {
    let chosen =
        select(s.regions.keys().copied(), mode, given).and_then(|ids| match ids.is_empty() {
            true => Err(Failure::new("no protected region is selected")),
            false => Ok(ids),
        });
    let Some(begun) = s.begun.as_mut() else {
        return Err(Failure::new(
            "no checkpoint is begun (call VELOC_Checkpoint_begin first)",
        ));
    };
    match chosen {
        Ok(ids) => {
            begun.selection = ids.into_iter().map(|id| (id, s.regions[&id])).collect();
            Ok(())
        }
        Err(e) => {
            begun.valid = false;
            Err(e)
        }
    }
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

/// Ends the checkpoint begun on every rank: every rank enters the
/// agreement, begun or not, so that none is left in a collective.
fn end(s: &mut Session, success: bool) -> Result<(), Failure> {
    let begun = s.begun.take();
    let local = match &begun {
        None => Some("no checkpoint is begun"),
        Some(b) if !b.valid => Some("its regions could not be chosen"),
        Some(_) if !success => Some("it passed success = 0"),
        Some(_) => None,
    };
    let all = frame_interface::all(s.comm, local.is_none())?;
    if !all {
        if begun.is_some() {
            s.ckpt()?.cancel_checkpoint()?;
        }
        let (name, version) = begun.map_or((String::new(), -1), |b| (b.name, b.version));
        return Err(match local {
            Some(why) => Failure::new(format!("version {version} of {name} is not kept: {why}")),
            None => Failure::said(),
        });
    }
    let Some(begun) = begun else {
        unreachable!("every rank began");
    };
    // frame saves what its registry holds: the regions chosen, as they
    // were when chosen, and no other.
    let stale: Vec<u32> = s.in_frame.iter().copied().collect();
    for id in stale {
        s.ckpt()?.unprotect(id);
    }
    s.in_frame.clear();
    for (id, region) in &begun.selection {
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
        let job = s.config.job.id.clone();
        let recorded = Index::load(&dir, &job).and_then(|mut index| {
            index.add(Version {
                id,
                name: begun.name.clone(),
                version: begun.version,
            });
            index.save(&dir, &job)
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
            // Every rank goes on to end, which agrees on the outcome.
            let local = begin(s, name, version).and_then(|()| choose(s, 0, &[]));
            let ended = end(s, local.is_ok());
            local.and(ended)
        })
    })
}
