//! Reading checkpoints back: `VELOC_Restart_test`, `VELOC_Restart_begin`,
//! the regions (`VELOC_Recover_size`, `_mem`, `_selective`),
//! `VELOC_Restart_end`, and `VELOC_Route_file` and `VELOC_Cleanup`.

use crate::checkpoint::{ids_of, select, FILE};
use crate::index::{self, Index};
use crate::session::{self, Restarting, Session};
use crate::status::{call, guard, Failure, VELOC_FAILURE};
use frame_core::{ElemType, RegionInfo};
use std::ffi::{c_char, c_int};

/// The version to restart from: the newest of `name` (at most `version`
/// unless it is 0) that every rank can restore, or `VELOC_FAILURE`.
/// Collective.
///
/// # Safety
/// `name` is null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn VELOC_Restart_test(name: *const c_char, version: c_int) -> c_int {
    guard("VELOC_Restart_test", VELOC_FAILURE, || {
        // SAFETY: as the caller promises.
        let name = unsafe { crate::init::text(name, "the checkpoint name") }
            .and_then(|n| crate::checkpoint::check(n, version).map(|_| n));
        session::with(|s| {
            s.agree(name.as_ref().map(|_| ()).map_err(|f| f.message.clone()))?;
            let name = name?;
            let most = (version > 0).then_some(i64::from(version));
            let ckpt = s.ckpt()?;
            let natural = ckpt.recovering().then(|| ckpt.recovery_id()).flatten();
            let found = match s.rank() {
                0 => {
                    let job = s.config.job.id.clone();
                    Index::load(&s.index_dir, &job)
                        .and_then(|index| index::restart_test(&index, natural, name, most))
                }
                _ => Ok(None),
            };
            s.agree(found.as_ref().map(|_| ()).map_err(Clone::clone))?;
            // Versions travel shifted by one: 0 says none.
            let found = s.rank_0s(found.ok().flatten().map_or(0, |v| v as u64 + 1))?;
            Ok(match found {
                0 => VELOC_FAILURE,
                v => c_int::try_from(v - 1).unwrap_or(VELOC_FAILURE),
            })
        })
    })
}

/// Begins restarting from `version` of `name`: every rank restores the
/// checkpoint's file, and the regions wait for `VELOC_Recover_mem` or
/// `_selective`. Collective.
///
/// # Safety
/// `name` is null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn VELOC_Restart_begin(name: *const c_char, version: c_int) -> c_int {
    call("VELOC_Restart_begin", || {
        // SAFETY: as the caller promises.
        let name = unsafe { crate::init::text(name, "the checkpoint name") }
            .and_then(|n| crate::checkpoint::check(n, version).map(|v| (n, v)));
        session::with(|s| begin(s, name))
    })
}

fn begin(s: &mut Session, name: Result<(&str, i64), Failure>) -> Result<(), Failure> {
    let busy = s.begun.is_some() || s.restarting.is_some();
    let asked = name.and_then(|n| match busy {
        true => Err(Failure::new(
            "a checkpoint or a restart is begun (end it first)",
        )),
        false => Ok(n),
    });
    s.agree(asked.as_ref().map(|_| ()).map_err(|f| f.message.clone()))?;
    let (name, version) = asked?;
    let id = match s.rank() {
        0 => Index::load(&s.index_dir, &s.config.job.id).and_then(|index| {
            index
                .find(name, version)
                .map(|v| v.id)
                .ok_or_else(|| format!("there is no version {version} of {name}"))
        }),
        _ => Ok(0),
    };
    s.agree(id.as_ref().map(|_| ()).map_err(Clone::clone))?;
    let id = s.rank_0s(id.unwrap_or(0))?;
    let ckpt = s.ckpt()?;
    if !(ckpt.recovering() && ckpt.recovery_id() == Some(id)) {
        s.restart_from(id)?;
    }
    let ckpt = s.ckpt()?;
    if ckpt.recovery_id() != Some(id) {
        return Err(Failure::shared(format!(
            "version {version} of {name} cannot be restored on every rank"
        )));
    }
    // Ids past i32::MAX are frame's own (the table of the routed file):
    // VeloC's ids are C ints.
    let all_stored = ckpt.stored_regions();
    let holds_file = all_stored.iter().any(|i| i32::try_from(i.id).is_err());
    let stored: Vec<_> = all_stored
        .into_iter()
        .filter(|i| i32::try_from(i.id).is_ok())
        .collect();
    for id in std::mem::take(&mut s.in_frame) {
        s.ckpt()?.unprotect(id);
    }
    if holds_file {
        // A routed file comes back with the whole checkpoint, every rank
        // at once: with it, every stored region the program protected.
        load_all(s, &stored, id, name, version)?;
    }
    s.restarting = Some(Restarting {
        stored,
        loaded: holds_file,
    });
    Ok(())
}

/// Restores checkpoint `id` (version `version` of `name`) whole: its file,
/// and every stored region into the program's, room checked on every
/// rank. Collective.
fn load_all(
    s: &mut Session,
    stored: &[RegionInfo],
    id: u64,
    name: &str,
    version: i64,
) -> Result<(), Failure> {
    let mut room = Ok(());
    for info in stored {
        let bytes = info.bytes() as usize;
        match s.regions.get(&info.id).copied() {
            Some(region) if region.bytes >= bytes => {
                // SAFETY: the program keeps protected memory valid, and it
                // holds at least the stored bytes.
                unsafe {
                    s.ckpt()?
                        .protect_raw(info.id, region.ptr, bytes, ElemType::Byte)
                };
                s.in_frame.insert(info.id);
            }
            Some(region) => {
                room = Err(format!(
                    "region {} holds {} bytes, and the checkpoint {bytes}",
                    info.id, region.bytes
                ))
            }
            None => {
                room = Err(format!(
                    "the checkpoint holds region {}, which is not protected",
                    info.id
                ))
            }
        }
    }
    s.agree(room)?;
    // frame falls back to an older checkpoint when one does not load: the
    // same on every rank, and not the version asked for.
    let got = s.ckpt()?.recover()?;
    if got != id {
        return Err(Failure::shared(format!(
            "version {version} of {name} could not be read back; frame's checkpoint {got} was restored instead"
        )));
    }
    Ok(())
}

/// The size in bytes of region `id` in the restart begun (0: none).
#[no_mangle]
pub extern "C" fn VELOC_Recover_size(id: c_int) -> c_int {
    guard("VELOC_Recover_size", 0, || {
        session::with(|s| {
            let r = s
                .restarting
                .as_ref()
                .ok_or_else(|| Failure::new("no restart is begun"))?;
            let bytes = u32::try_from(id)
                .ok()
                .and_then(|id| r.stored.iter().find(|i| i.id == id))
                .map_or(0, |i| i.bytes());
            Ok(c_int::try_from(bytes).unwrap_or(c_int::MAX))
        })
    })
}

/// Restores the regions `mode` selects with `ids`, among those the
/// checkpoint holds. Not collective.
///
/// # Safety
/// `ids` points to `count` integers.
#[no_mangle]
pub unsafe extern "C" fn VELOC_Recover_selective(
    mode: c_int,
    ids: *mut c_int,
    count: c_int,
) -> c_int {
    call("VELOC_Recover_selective", || {
        // SAFETY: as the caller promises.
        let given = unsafe { ids_of(ids, count) }?;
        session::with(|s| recover(s, mode, &given))
    })
}

/// Restores every region the checkpoint holds. Not collective.
#[no_mangle]
pub extern "C" fn VELOC_Recover_mem() -> c_int {
    call("VELOC_Recover_mem", || {
        session::with(|s| recover(s, 0, &[]))
    })
}

/// Restores the regions `mode` selects among those the checkpoint holds,
/// into the program's regions as they are now (loaded at
/// `VELOC_Restart_begin` when the checkpoint held a file: then checked).
fn recover(s: &mut Session, mode: c_int, given: &[c_int]) -> Result<(), Failure> {
    let Some(r) = s.restarting.as_ref() else {
        return Err(Failure::new(
            "no restart is begun (call VELOC_Restart_begin first)",
        ));
    };
    let loaded = r.loaded;
    let stored: Vec<(u32, usize)> = r
        .stored
        .iter()
        .map(|i| (i.id, i.bytes() as usize))
        .collect();
    let chosen = select(stored.iter().map(|(id, _)| *id), mode, given)?;
    for id in chosen {
        let bytes = stored.iter().find(|(i, _)| *i == id).map_or(0, |(_, b)| *b);
        let region = s.regions.get(&id).copied().ok_or_else(|| {
            Failure::new(format!(
                "the checkpoint holds region {id}, but it is not protected"
            ))
        })?;
        if loaded {
            if !s.in_frame.contains(&id) {
                return Err(Failure::new(format!("region {id} was not restored")));
            }
            continue;
        }
        if region.bytes < bytes {
            return Err(Failure::new(format!(
                "region {id} holds {} bytes, and the checkpoint {bytes}",
                region.bytes
            )));
        }
        // SAFETY: the program keeps protected memory valid, and it holds
        // at least the stored bytes.
        unsafe { s.ckpt()?.protect_raw(id, region.ptr, bytes, ElemType::Byte) };
        s.in_frame.insert(id);
        s.ckpt()?.recover_region(id)?;
    }
    Ok(())
}

/// Ends the restart begun.
#[no_mangle]
pub extern "C" fn VELOC_Restart_end(success: c_int) -> c_int {
    call("VELOC_Restart_end", || {
        session::with(|s| match s.restarting.take() {
            Some(_) if success != 0 => Ok(()),
            Some(_) => Err(Failure::new("the restart ended with success = 0")),
            None => Err(Failure::new("no restart is begun")),
        })
    })
}

/// Begins, restores every region and ends. Collective.
///
/// # Safety
/// `name` is null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn VELOC_Restart(name: *const c_char, version: c_int) -> c_int {
    call("VELOC_Restart", || {
        // SAFETY: as the caller promises.
        let name = unsafe { crate::init::text(name, "the checkpoint name") }
            .and_then(|n| crate::checkpoint::check(n, version).map(|v| (n, v)));
        session::with(|s| {
            begin(s, name)?;
            let restored = recover(s, 0, &[]);
            s.restarting = None;
            restored
        })
    })
}

/// Writes into `routed` (`VELOC_MAX_NAME` bytes) this rank's file of the
/// checkpoint begun, or of the restart begun, whatever `original` names.
///
/// # Safety
/// `original` is null or a NUL-terminated string; `routed` has room for
/// `VELOC_MAX_NAME` bytes.
#[no_mangle]
pub unsafe extern "C" fn VELOC_Route_file(original: *const c_char, routed: *mut c_char) -> c_int {
    call("VELOC_Route_file", || {
        // SAFETY: as the caller promises.
        unsafe { crate::init::text(original, "the file name") }?;
        if routed.is_null() {
            return Err(Failure::new("the buffer for the path is NULL"));
        }
        let path = session::with(|s| match (s.begun.is_some(), s.restarting.is_some()) {
            (true, _) => crate::checkpoint::route(s),
            (_, true) => Ok(s.ckpt()?.recovered_file(FILE)?),
            _ => Err(Failure::new("no checkpoint or restart is begun")),
        })?;
        let text = path.to_str().unwrap_or_default().as_bytes();
        if text.is_empty() || text.len() >= 1024 {
            return Err(Failure::new(format!(
                "{} does not fit VELOC_MAX_NAME",
                path.display()
            )));
        }
        // SAFETY: the buffer has room for VELOC_MAX_NAME bytes; the path
        // and its NUL take fewer.
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr(), routed.cast::<u8>(), text.len());
            *routed.add(text.len()) = 0;
        }
        Ok(())
    })
}

/// Forgets every version of `name`. Collective.
///
/// # Safety
/// `name` is null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn VELOC_Cleanup(name: *const c_char) -> c_int {
    call("VELOC_Cleanup", || {
        // SAFETY: as the caller promises.
        let name = unsafe { crate::init::text(name, "the checkpoint name") };
        session::with(|s| {
            s.agree(name.as_ref().map(|_| ()).map_err(|f| f.message.clone()))?;
            let name = name?;
            let local = match s.rank() {
                0 => Index::load(&s.index_dir, &s.config.job.id).and_then(|mut index| {
                    index.forget(name);
                    index.save(&s.index_dir, &s.config.job.id)
                }),
                _ => Ok(()),
            };
            s.agree(local)
        })
    })
}
