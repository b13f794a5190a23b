//! Variable ids by name: `FTI_setIDFromString` and `FTI_getIDFromString`.
//!
//! As in FTI, a name gets the next id in the order names and variables
//! were registered (so a program that registers the same names in the
//! same order gets the same ids in every run), and keeps it for the
//! session. frame's checkpoints do not store the names: after a restart a
//! name is known once the program registers it again.

use crate::args::name_of;
use crate::session;
use crate::status::{guard_value, Failure, FTI_NSCS};
use std::os::raw::{c_char, c_int};

/// The id of variable `name`: the one it was given, or a new one (the
/// number of variables and names registered so far, or the next id above
/// that no variable uses). `FTI_NSCS` on failure.
///
/// # Safety
/// `name` must be null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn FTI_setIDFromString(name: *const c_char) -> c_int {
    guard_value(
        "FTI_setIDFromString",
        |_| FTI_NSCS,
        || {
            let name = name_of(name)?;
            session::with(|s| {
                if let Some(id) = s.names.get(&name) {
                    return Ok(*id as c_int);
                }
                let taken =
                    |id: u32| s.vars.contains_key(&id) || s.names.values().any(|n| *n == id);
                let registered = s.vars.len()
                    + s.names
                        .values()
                        .filter(|id| !s.vars.contains_key(id))
                        .count();
                let mut id = u32::try_from(registered).unwrap_or(u32::MAX);
                while taken(id) {
                    id = id
                        .checked_add(1)
                        .ok_or_else(|| Failure::new("no variable id is left"))?;
                }
                let out =
                    c_int::try_from(id).map_err(|_| Failure::new("no variable id is left"))?;
                s.names.insert(name, id);
                Ok(out)
            })
        },
    )
}

/// The id `FTI_setIDFromString` gave `name` in this session, or -1.
///
/// # Safety
/// `name` must be null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn FTI_getIDFromString(name: *const c_char) -> c_int {
    guard_value(
        "FTI_getIDFromString",
        |_| FTI_NSCS,
        || {
            let name = name_of(name)?;
            session::with(|s| Ok(s.names.get(&name).map_or(-1, |id| *id as c_int)))
        },
    )
}
