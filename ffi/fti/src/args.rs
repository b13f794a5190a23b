//! Checks of what C programs pass to FTI's calls: variable ids, checkpoint
//! levels (checkpoint ids are FTI's label only: frame numbers its
//! checkpoints itself, and takes any) and names.

use crate::status::Failure;
use frame_core::Level;
use std::ffi::CStr;
use std::os::raw::{c_char, c_int};

/// A variable id as frame's region id.
pub(crate) fn var_id(id: c_int) -> Result<u32, Failure> {
    u32::try_from(id).map_err(|_| Failure::new(format!("variable id {id} is negative")))
}

/// The level of `FTI_Checkpoint(id, level)` and `FTI_InitICP`.
pub(crate) fn checked_level(level: c_int) -> Result<Level, Failure> {
    // FTI's level ids: 1-4, their differential forms 5-8 (FTI_L4_DCP is
    // 8), and FTI_L4_H5_SINGLE (9), a level-4 checkpoint in one file.
    let number = match level {
        1..=4 => level,
        5..=8 => level - 4,
        9 => 4,
        _ => return Err(Failure::new(format!("level {level} is not 1 to 9"))),
    };
    Level::from_number(number as u8).ok_or_else(|| Failure::new(format!("level {level}")))
}

/// The name a C program passed (a variable's, a type's, a field's).
pub(crate) fn name_of(name: *const c_char) -> Result<String, Failure> {
    if name.is_null() {
        return Err(Failure::new("the name is null"));
    }
    // SAFETY: checked non-null; C passes a NUL-terminated string.
    Ok(unsafe { CStr::from_ptr(name) }
        .to_string_lossy()
        .into_owned())
}
