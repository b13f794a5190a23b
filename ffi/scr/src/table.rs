//! What one rank's checkpoint holds: the dataset's name and flags, and the
//! program's files by their paths below the prefix. frame keeps a
//! checkpoint's files under plain names (`scr-file-<n>`); the table, saved
//! as one more file of the checkpoint ([`TABLE_FILE`]), maps each back to
//! the path the program knows, so the checkpoint names itself at every
//! level it reaches.

use serde::{Deserialize, Serialize};
use std::path::Path;

/// The table's own file in each rank's checkpoint.
pub(crate) const TABLE_FILE: &str = "scr-dataset.json";

/// The largest table read back (a program's paths, at most
/// `frame::format::file_table::MAX_FILES` of them, fit many times over).
const MAX_BYTES: u64 = 64 << 20;

/// One rank's files in one dataset.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Table {
    /// The dataset's name.
    pub name: String,
    /// Its `SCR_FLAG_*` flags.
    pub flags: i32,
    /// The program's files, by path relative to the prefix; file `n` is
    /// saved as [`stored_name`]`(n)`.
    pub files: Vec<String>,
}

/// The name frame keeps file `n` of a dataset under.
pub(crate) fn stored_name(n: usize) -> String {
    format!("scr-file-{n}")
}

impl Table {
    /// The number of the file at `path` (relative to the prefix), added
    /// if new.
    pub fn number(&mut self, path: &str) -> usize {
        match self.files.iter().position(|f| f == path) {
            Some(n) => n,
            None => {
                self.files.push(path.to_string());
                self.files.len() - 1
            }
        }
    }

    /// The number of the file at `path`, if the dataset holds it.
    pub fn find(&self, path: &str) -> Option<usize> {
        self.files.iter().position(|f| f == path)
    }

    /// Writes the table into `path` (a file frame handed out).
    pub fn write(&self, path: &Path) -> Result<(), String> {
        let text = serde_json::to_vec(self).map_err(|e| e.to_string())?;
        std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Reads the table frame restored at `path`.
    pub fn read(path: &Path) -> Result<Self, String> {
        let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
        frame_interface::json_file::read(file, path, MAX_BYTES)
    }
}
