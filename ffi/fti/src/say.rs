//! The lines libfti prints itself, worded like the library's events:
//! `[ frame-FTI  Warning ] : ...` (see the crate `frame-log`), and nothing once the
//! configuration's verbosity silenced frame.

use frame_log::{Level, Style};
use std::fmt::Display;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set by `FTI_Init` from the configuration (`verbosity = 4`).
static SILENT: AtomicBool = AtomicBool::new(false);

/// Whether the configuration's verbosity silences frame's messages.
pub(crate) fn silent() -> bool {
    SILENT.load(Ordering::Relaxed)
}

/// Silences (or not) frame's messages.
pub(crate) fn set_silent(silent: bool) {
    SILENT.store(silent, Ordering::Relaxed);
}

/// One message: its first line after the level's prefix, any further
/// lines indented below it.
fn line(level: Level, message: impl Display) {
    if !silent() {
        frame_log::say(Style::Fti, level, message);
    }
}

/// Something a user may want to know (an execution left alone, a restart
/// from a single file).
pub(crate) fn info(message: impl Display) {
    line(Level::INFO, message);
}

/// Something went wrong and the program goes on.
pub(crate) fn warning(message: impl Display) {
    line(Level::WARN, message);
}

/// A call failed.
pub(crate) fn error(message: impl Display) {
    line(Level::ERROR, message);
}
