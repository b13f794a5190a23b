//! File-system steps shared by every level: private directories, durable
//! atomic replacement of small files, and storage errors that name the path.

use crate::format::FormatError;
use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// A storage operation failed; the error names the path.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StorageError {
    /// A directory could not be created or used.
    #[error("cannot use directory {}: {source}", path.display())]
    Dir {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    /// The storage is full (or a file-size limit was reached).
    #[error("no space left on the storage of {} (needed {needed} bytes): {source}", path.display())]
    NoSpace {
        /// The file being written.
        path: PathBuf,
        /// Bytes that were needed.
        needed: u64,
        /// The I/O error.
        source: io::Error,
    },
    /// Another I/O operation failed.
    #[error("cannot {op} {}: {source}", path.display())]
    Io {
        /// What was attempted.
        op: &'static str,
        /// The path.
        path: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    /// A checkpoint file or record is damaged or does not match.
    #[error(transparent)]
    Format(#[from] FormatError),
}

impl StorageError {
    /// Wraps an I/O error on `path`, classifying a full storage as `NoSpace`.
    pub(crate) fn io(op: &'static str, path: &Path, needed: u64, source: io::Error) -> Self {
        if crate::format::error_is_no_space(&source) {
            StorageError::NoSpace {
                path: path.to_path_buf(),
                needed,
                source,
            }
        } else {
            StorageError::Io {
                op,
                path: path.to_path_buf(),
                source,
            }
        }
    }

    /// Whether the storage ran out of space.
    pub fn is_no_space(&self) -> bool {
        match self {
            StorageError::NoSpace { .. } => true,
            StorageError::Format(f) => f.is_no_space(),
            _ => false,
        }
    }
}

/// Creates `path` and any missing parents with mode 0700, and checks that a
/// file can be created in it.
pub(crate) fn private_dir(path: &Path) -> Result<(), StorageError> {
    let dir_err = |source| StorageError::Dir {
        path: path.to_path_buf(),
        source,
    };
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
        .map_err(dir_err)?;
    if !fs::metadata(path).map_err(dir_err)?.is_dir() {
        return Err(dir_err(io::Error::new(
            io::ErrorKind::NotADirectory,
            "exists and is not a directory",
        )));
    }
    Ok(())
}

/// Checks that files can be created in `dir` (by creating and removing one).
pub(crate) fn check_writable(dir: &Path, tag: &str) -> Result<(), StorageError> {
    let probe = dir.join(format!(".probe-{}-{tag}", std::process::id()));
    let made = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&probe);
    match made {
        Ok(_) => fs::remove_file(&probe).map_err(|source| StorageError::Dir {
            path: dir.to_path_buf(),
            source,
        }),
        Err(source) => Err(StorageError::Dir {
            path: dir.to_path_buf(),
            source,
        }),
    }
}

/// Flushes a directory's entries (new names, renames) to stable storage.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), StorageError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|source| StorageError::Io {
            op: "sync directory",
            path: dir.to_path_buf(),
            source,
        })
}

/// Replaces `path` with `bytes` atomically and durably: write a temporary
/// file beside it, fsync it, rename it over `path`, fsync the directory.
/// `tag` makes the temporary name unique among concurrent writers.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8], tag: &str) -> Result<(), StorageError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = dir.join(format!(".{name}.tmp-{tag}"));
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()
    })();
    if let Err(e) = result {
        let _ = fs::remove_file(&tmp);
        return Err(StorageError::io("write", &tmp, bytes.len() as u64, e));
    }
    fs::rename(&tmp, path).map_err(|e| {
        let _ = fs::remove_file(&tmp);
        StorageError::io("rename into place", path, 0, e)
    })?;
    sync_dir(dir)
}

/// Removes a file; a missing file is not an error.
pub(crate) fn remove_if_present(path: &Path) -> Result<(), StorageError> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(StorageError::Io {
            op: "remove",
            path: path.to_path_buf(),
            source: e,
        }),
        _ => Ok(()),
    }
}

/// Removes a directory if it is empty; anything else is left alone.
pub(crate) fn remove_dir_if_empty(path: &Path) {
    let _ = fs::remove_dir(path);
}
