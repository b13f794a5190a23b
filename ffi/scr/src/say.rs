//! The lines libscr prints itself, in frame's plain style
//! (`frame: warning: SCR: ...`).

use frame_log::Level;
use std::fmt::Display;

/// Something a user may want to know (a restart, with `SCR_DEBUG` > 0).
pub(crate) fn info(message: impl Display) {
    frame_interface::say("SCR", Level::INFO, message);
}

/// Something went wrong, or is ignored, and the program goes on.
pub(crate) fn warning(message: impl Display) {
    frame_interface::say("SCR", Level::WARN, message);
}
