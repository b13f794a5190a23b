//! The small JSON files the libraries keep (their indexes of names): read
//! with a cap on their size, never through a link, and replaced whole by a
//! private file written beside them and renamed over them.

use serde::de::DeserializeOwned;
use serde::Serialize;
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;

/// Parses the JSON in `file` (at `path`, for messages), reading at most
/// `max` bytes: a larger file is an error, never held whole.
pub fn read<T: DeserializeOwned>(file: std::fs::File, path: &Path, max: u64) -> Result<T, String> {
    let mut text = Vec::new();
    file.take(max + 1)
        .read_to_end(&mut text)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if text.len() as u64 > max {
        return Err(format!("{}: larger than {max} bytes", path.display()));
    }
    serde_json::from_slice(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// The value in the file at `path` (not followed if a link), or the
/// default when there is none.
pub fn load<T: DeserializeOwned + Default>(path: &Path, max: u64) -> Result<T, String> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path);
    match file {
        Ok(f) => read(f, path, max),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(T::default()),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// Replaces the file at `path` with `value` (its directory made, mode
/// 0700, if missing): a private file written beside it, synced, then
/// renamed over it.
pub fn save<T: Serialize>(path: &Path, value: &T) -> Result<(), String> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut temp = path.as_os_str().to_owned();
    temp.push(format!(".{}", std::process::id()));
    let temp = std::path::PathBuf::from(temp);
    let text = serde_json::to_vec_pretty(value).map_err(|e| e.to_string())?;
    let _ = std::fs::remove_file(&temp);
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&temp)
        .and_then(|mut f| {
            f.write_all(&text)?;
            f.sync_all()
        })
        .and_then(|()| std::fs::rename(&temp, path));
    written.map_err(|e| {
        let _ = std::fs::remove_file(&temp);
        format!("{}: {e}", path.display())
    })
}

#[cfg(test)]
mod tests;
