//! Storage errors shared by every level; each names the path concerned.

use crate::format::FormatError;
use crate::safefs::FsError;
use std::io;
use std::path::{Path, PathBuf};

/// A storage operation failed; the error names the path.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StorageError {
    /// A file-system operation failed, or a file or directory is not safe
    /// to use (a symbolic link, someone else's, writable by others) or is
    /// locked by another process.
    #[error(transparent)]
    Fs(FsError),
    /// The storage is full (or a file-size limit was reached).
    #[error("no space left on the storage of {}{}: {cause}", path.display(), needed_note(*needed))]
    NoSpace {
        /// The file being written.
        path: PathBuf,
        /// Bytes that were needed, when the write knew.
        needed: Option<u64>,
        /// The I/O error (part of the message, so not a separate source).
        cause: io::Error,
    },
    /// A checkpoint file or record is damaged or does not match.
    #[error(transparent)]
    Format(#[from] FormatError),
    /// A write of an epoch the job has left behind (see the level-4
    /// fence): it comes from a node the job gave up on.
    #[error("refused to write in {}: this write belongs to epoch {epoch}, and the job has moved on to epoch {current}{} (it comes from a node the job gave up on)", path.display(), if *later_run { " of a later run" } else { "" })]
    Fenced {
        /// The level-4 directory.
        path: PathBuf,
        /// The writer's epoch.
        epoch: u64,
        /// The job's epoch, as the fence says.
        current: u64,
        /// The fence is a later run's.
        later_run: bool,
    },
}

/// ` (needed N bytes)` when the size a write needed is known.
fn needed_note(needed: Option<u64>) -> String {
    needed.map_or(String::new(), |n| format!(" (needed {n} bytes)"))
}

impl From<FsError> for StorageError {
    fn from(e: FsError) -> Self {
        StorageError::from_fs(e, 0)
    }
}

impl StorageError {
    /// Wraps a file-system error, classifying a full storage as `NoSpace`;
    /// `needed` is the size the operation needed (0: not known).
    pub(crate) fn from_fs(e: FsError, needed: u64) -> Self {
        match e {
            FsError::Io { path, cause, .. } if crate::safefs::is_no_space(&cause) => {
                StorageError::NoSpace {
                    path,
                    needed: (needed > 0).then_some(needed),
                    cause,
                }
            }
            other => StorageError::Fs(other),
        }
    }

    /// Wraps an I/O error of `op` on `path`, classifying a full storage as `NoSpace`.
    pub(crate) fn io(op: &'static str, path: &Path, needed: u64, source: io::Error) -> Self {
        Self::from_fs(
            FsError::Io {
                op,
                path: path.to_path_buf(),
                cause: source,
            },
            needed,
        )
    }

    /// Whether the storage ran out of space.
    pub fn is_no_space(&self) -> bool {
        match self {
            StorageError::NoSpace { .. } => true,
            StorageError::Format(f) => f.is_no_space(),
            StorageError::Fs(f) => f.is_no_space(),
            StorageError::Fenced { .. } => false,
        }
    }
}

/// Writes the small file `name` of `dir` atomically (see
/// `Dir::write_atomic`); a full storage is reported with the bytes the
/// file needed.
pub(crate) fn write_small(
    dir: &crate::safefs::Dir,
    name: &str,
    bytes: &[u8],
    tag: &str,
) -> Result<(), StorageError> {
    dir.write_atomic(name, bytes, tag)
        .map_err(|e| StorageError::from_fs(e, bytes.len() as u64))
}

#[cfg(test)]
mod tests;
