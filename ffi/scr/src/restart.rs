//! Reading a checkpoint back: `SCR_Have_restart`, `SCR_Start_restart`,
//! `SCR_Complete_restart`, choosing one by name (`SCR_Current`) or
//! forgetting one (`SCR_Drop`, `SCR_Delete`), and `SCR_Route_file` in
//! every phase.

use crate::index::Index;
use crate::session::{self, Phase, Restored, Session};
use crate::status::{guard, Failure, SCR_FAILURE};
use crate::table::{stored_name, Table, TABLE_FILE};
use std::os::raw::{c_char, c_int};
use std::path::PathBuf;

/// `SCR_MAX_FILENAME`: the room in a program's buffer for a path or a
/// name, with its NUL.
pub(crate) const MAX_FILENAME: usize = 1024;

/// Copies `text` and a NUL into the program's buffer `out`
/// ([`MAX_FILENAME`] bytes); an error when it does not fit.
///
/// # Safety
/// `out` is null or has room for `MAX_FILENAME` bytes.
unsafe fn write_text(out: *mut c_char, text: &str, what: &str) -> Result<(), Failure> {
    if out.is_null() {
        return Err(Failure::new(format!("the buffer for the {what} is NULL")));
    }
    if text.len() >= MAX_FILENAME || text.contains('\0') {
        return Err(Failure::new(format!(
            "the {what} {text:?} does not fit in SCR_MAX_FILENAME ({MAX_FILENAME}) bytes"
        )));
    }
    // SAFETY: the buffer has room for MAX_FILENAME bytes, and the text
    // and its NUL take fewer.
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr(), out.cast::<u8>(), text.len());
        *out.add(text.len()) = 0;
    }
    Ok(())
}

/// Writes into `file` where to write (in a dataset being written) or read
/// (in a restart) the file `name` (relative to the working directory, or
/// absolute, below the prefix); outside both, `name` unchanged. Local.
///
/// # Safety
/// `name` is null or a NUL-terminated string; `file` is null or has room
/// for `SCR_MAX_FILENAME` bytes.
#[no_mangle]
pub unsafe extern "C" fn SCR_Route_file(name: *const c_char, file: *mut c_char) -> c_int {
    guard("SCR_Route_file", || {
        // SAFETY: as the caller promises.
        let name = unsafe { crate::init::text(name, "the file name") }?;
        let path = session::with(|s| route(s, name))?;
        let path = path
            .to_str()
            .ok_or_else(|| Failure::new(format!("{} is not UTF-8", path.display())))?;
        // SAFETY: as the caller promises.
        unsafe { write_text(file, path, "path") }
    })
}

fn route(s: &mut Session, name: &str) -> Result<PathBuf, Failure> {
    let below = |s: &Session| {
        crate::paths::below_prefix(name, &s.cwd, &s.conf.prefix).map_err(Failure::new)
    };
    match s.phase {
        Phase::Idle => Ok(PathBuf::from(name)),
        Phase::Output(_) => {
            let rel = below(s)?;
            crate::output::route(s, &rel)
        }
        Phase::Restart => {
            let rel = below(s)?;
            let restored = s
                .restored
                .as_ref()
                .ok_or_else(|| Failure::new("no checkpoint is restored"))?;
            let n = restored.table.find(&rel).ok_or_else(|| {
                Failure::new(format!(
                    "checkpoint {:?} holds no file {rel:?} of this rank",
                    restored.table.name
                ))
            })?;
            Ok(s.ckpt()?.recovered_file(&stored_name(n))?)
        }
    }
}

/// The checkpoint a restart reads, restored now if it is not yet: its
/// name, or `None` when there is none. Collective.
fn have(s: &mut Session) -> Result<Option<String>, Failure> {
    if !matches!(s.phase, Phase::Idle) {
        return Err(Failure::new(
            "a dataset or a restart is in progress (complete it first)",
        ));
    }
    if let Some(r) = &s.restored {
        return Ok(Some(r.table.name.clone()));
    }
    if s.exhausted || !s.ckpt()?.recovering() {
        return Ok(None);
    }
    let ckpt = s.ckpt()?;
    let id = ckpt.recover()?;
    let table = ckpt
        .recovered_file(TABLE_FILE)
        .map_err(|e| e.to_string())
        .and_then(|p| Table::read(&p));
    s.agree(table.as_ref().map(|_| ()).map_err(Clone::clone))?;
    let table = table.map_err(Failure::new)?;
    if s.rank() == 0 && s.conf.debug > 0 {
        crate::say::info(format_args!(
            "restoring checkpoint {:?} (frame's checkpoint {id})",
            table.name
        ));
    }
    let name = table.name.clone();
    s.restored = Some(Restored { id, table });
    Ok(Some(name))
}

/// Sets `*flag` to 1 when there is a checkpoint to restart from, and
/// writes its name into `name` (unless NULL). The checkpoint's files are
/// restored onto level-1 storage now. Collective.
///
/// # Safety
/// `flag` is null or points to an int; `name` is null or has room for
/// `SCR_MAX_FILENAME` bytes.
#[no_mangle]
pub unsafe extern "C" fn SCR_Have_restart(flag: *mut c_int, name: *mut c_char) -> c_int {
    if !flag.is_null() {
        // SAFETY: checked non-null; the program passes room for an int.
        unsafe { *flag = 0 };
    }
    guard("SCR_Have_restart", || {
        // Every rank takes part before its own arguments are checked.
        let found = session::with(have)?;
        if flag.is_null() {
            return Err(Failure::new("the flag pointer is NULL"));
        }
        // SAFETY: checked non-null; the program passes room for an int.
        unsafe { *flag = c_int::from(found.is_some()) };
        match (found, name.is_null()) {
            // SAFETY: as the caller promises.
            (Some(n), false) => unsafe { write_text(name, &n, "checkpoint name") },
            _ => Ok(()),
        }
    })
}

/// Starts reading the checkpoint back; writes its name into `name`
/// (unless NULL). Collective.
///
/// # Safety
/// `name` is null or has room for `SCR_MAX_FILENAME` bytes.
#[no_mangle]
pub unsafe extern "C" fn SCR_Start_restart(name: *mut c_char) -> c_int {
    guard("SCR_Start_restart", || {
        let found = session::with(|s| {
            let found = have(s)?.ok_or_else(|| {
                Failure::shared("there is no checkpoint to restart from (ask SCR_Have_restart)")
            })?;
            s.phase = Phase::Restart;
            Ok(found)
        })?;
        match name.is_null() {
            true => Ok(()),
            // SAFETY: as the caller promises.
            false => unsafe { write_text(name, &found, "checkpoint name") },
        }
    })
}

/// Ends the restart. When a rank passes `valid` = 0, the call fails and
/// the next `SCR_Have_restart` offers the next older checkpoint (or none).
/// Collective.
#[no_mangle]
pub extern "C" fn SCR_Complete_restart(valid: c_int) -> c_int {
    let mut invalid = false;
    let code = guard("SCR_Complete_restart", || {
        session::with(|s| {
            if !matches!(s.phase, Phase::Restart) {
                return Err(Failure::new(
                    "no restart is in progress (call SCR_Start_restart first)",
                ));
            }
            s.phase = Phase::Idle;
            let restored = s.restored.take();
            if s.all(valid != 0)? {
                // Restarted: no other restart is offered.
                s.exhausted = true;
                return Ok(());
            }
            invalid = true;
            let id = restored.as_ref().map(|r| r.id);
            if s.rank() == 0 {
                let name = restored.as_ref().map_or("", |r| r.table.name.as_str());
                crate::say::warning(format_args!(
                    "checkpoint {name:?} was not valid on every rank; the next restart reads an older one"
                ));
                // Never offered again, in this run or the next.
                let dropped = Index::load(&s.conf.prefix).and_then(|mut index| {
                    index.drop_named(name);
                    index.save(&s.conf.prefix)
                });
                if let Err(e) = dropped {
                    crate::say::warning(format_args!(
                        "the index of names does not record that {name:?} was refused: {e}"
                    ));
                }
            }
            crate::init::choose(s, None, id)
        })
    });
    match invalid {
        true => SCR_FAILURE,
        false => code,
    }
}

/// Names the checkpoint the next restart reads. Collective.
///
/// # Safety
/// `name` is null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn SCR_Current(name: *const c_char) -> c_int {
    guard("SCR_Current", || {
        // SAFETY: as the caller promises.
        let name = unsafe { crate::init::text(name, "the checkpoint name") }.map(str::to_string);
        session::with(|s| {
            s.idle("SCR_Current")?;
            s.same_name(&name, "SCR_Current")?;
            let name = name?;
            if s.restored.as_ref().is_some_and(|r| r.table.name == name) {
                return Ok(());
            }
            crate::init::choose(s, Some(&name), None)
        })
    })
}

/// Forgets dataset `name`: it is never restarted from. Collective.
///
/// # Safety
/// `name` is null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn SCR_Drop(name: *const c_char) -> c_int {
    // SAFETY: as the caller promises.
    guard("SCR_Drop", || unsafe { forget(name) })
}

/// Forgets dataset `name`; its checkpoint's copies go as frame's
/// retention retires them. Collective.
///
/// # Safety
/// `name` is null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn SCR_Delete(name: *const c_char) -> c_int {
    // SAFETY: as the caller promises.
    guard("SCR_Delete", || unsafe { forget(name) })
}

/// Drops `name` from the index (on rank 0), then picks the restart again
/// if none is restored yet. Collective.
///
/// # Safety
/// `name` is null or a NUL-terminated string.
unsafe fn forget(name: *const c_char) -> Result<(), Failure> {
    // SAFETY: as the caller promises.
    let name = unsafe { crate::init::text(name, "the dataset name") }.map(str::to_string);
    session::with(|s| {
        s.idle("SCR_Drop or SCR_Delete")?;
        s.same_name(&name, "SCR_Drop or SCR_Delete")?;
        let name = name?;
        let local = match s.rank() {
            0 => Index::load(&s.conf.prefix).and_then(|mut index| match index.drop_named(&name) {
                Some(_) => index.save(&s.conf.prefix),
                None => Ok(()),
            }),
            _ => Ok(()),
        };
        s.agree(local)?;
        if s.restored.is_none() && !s.exhausted {
            crate::init::choose(s, None, None)?;
        }
        Ok(())
    })
}
