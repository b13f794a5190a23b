//! Checks of the numbers C programs pass to FTI's calls: variable ids and
//! checkpoint levels.

use crate::status::Failure;
use frame_core::Level;
use std::os::raw::c_int;

/// A variable id as frame's region id.
pub(crate) fn var_id(id: c_int) -> Result<u32, Failure> {
    u32::try_from(id).map_err(|_| Failure::new(format!("variable id {id} is negative")))
}

/// The level of `FTI_Checkpoint(id, level)` and `FTI_InitICP`.
pub(crate) fn checked_level(id: c_int, level: c_int) -> Result<Level, Failure> {
    if id <= 0 {
        return Err(Failure::new(format!("checkpoint id {id} is not positive")));
    }
    let number = match level {
        1..=4 => level,
        5..=8 => level - 4,
        _ => {
            return Err(Failure::new(format!(
                "level {level} is not 1 to 4 (or 5 to 8)"
            )))
        }
    };
    Level::from_number(number as u8).ok_or_else(|| Failure::new(format!("level {level}")))
}
