//! The lines libscr prints itself, in frame's plain style
//! (`frame: warning: SCR: ...`).

use frame_log::{Level, Style};
use std::fmt::Display;

fn line(level: Level, message: impl Display) {
    frame_log::say(Style::Plain, level, format_args!("SCR: {message}"));
}

/// Something a user may want to know (a restart, with `SCR_DEBUG` > 0).
pub(crate) fn info(message: impl Display) {
    line(Level::INFO, message);
}

/// Something went wrong, or is ignored, and the program goes on.
pub(crate) fn warning(message: impl Display) {
    line(Level::WARN, message);
}

/// A call failed.
pub(crate) fn error(message: impl Display) {
    line(Level::ERROR, message);
}
