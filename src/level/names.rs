//! The names of the files and directories of a level directory.
//!
//! ```text
//! LATEST                          newest checkpoint committed on the node (a hint)
//! ckpt-<id, 20 digits>/
//!     rank-<rank, 6 digits>.fck        data file (docs/FORMAT.md)
//!     rank-<rank, 6 digits>.meta.json  metadata record
//!     rank-<rank, 6 digits>.files/     level 1 only: the program's files
//!         <name>                       held as written (a file checkpoint
//!         .seal                        that stays on its node), and
//!                                      their CRCs
//! spare/rank-<rank, 6 digits>.<n>.fck  retired files kept for reuse
//! files/rank-<rank, 6 digits>/<name>    the program's own files: written
//!                                  before a file checkpoint, restored after
//! .lock-rank-<rank, 6 digits>     held by the process that is the rank
//! ```

/// The pointer file naming the newest checkpoint committed on a node.
pub(crate) const POINTER: &str = "LATEST";
/// The fence of a level-4 directory (see `global::fence`).
pub(crate) const FENCE: &str = "FENCE";
/// The directory of reusable files.
pub(crate) const SPARE: &str = "spare";
/// The directory of level 1 under a job's directory.
pub(crate) const L1_DIR: &str = "l1";
/// The directory of the program's own files (one subdirectory per rank).
pub(crate) const FILES: &str = "files";
/// The longest name of a program's file.
pub(crate) const MAX_FILE_NAME: usize = 255;

/// The directory of `rank`'s own files under [`FILES`].
pub(crate) fn files_of(rank: u32) -> String {
    format!("rank-{rank:06}")
}

/// Why `name` cannot name a program's file in a checkpoint (one path
/// component of 1 to 255 bytes, not `.` or `..`, not starting with `.`,
/// which frame's own temporaries do, no `/` and no NUL).
pub(crate) fn check_file_name(name: &str) -> Result<(), BadFileName> {
    let why = if name.is_empty() {
        "is empty"
    } else if name.len() > MAX_FILE_NAME {
        "is longer than 255 bytes"
    } else if name.starts_with('.') {
        "starts with `.`"
    } else if name.contains('/') {
        "contains `/` (one file name, no directories)"
    } else if name.contains('\0') {
        "contains a NUL byte"
    } else {
        return Ok(());
    };
    Err(BadFileName {
        name: name.to_string(),
        why,
    })
}

/// A name that cannot name a program's file ([`check_file_name`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("file name {name:?} {why}")]
pub(crate) struct BadFileName {
    /// The name.
    name: String,
    /// What is wrong with it.
    why: &'static str,
}

/// The directory in a level-1 checkpoint directory of the files `rank`
/// holds there as the program wrote them.
pub(crate) fn held_dir(rank: u32) -> String {
    format!("rank-{rank:06}.files")
}

/// Parses `rank-<digits>.files` directory names.
pub(crate) fn parse_held_dir(name: &str) -> Option<u32> {
    name.strip_prefix("rank-")?
        .strip_suffix(".files")
        .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|d| d.parse().ok())
}

/// The CRCs of the held files, in their directory (a name no program's
/// file can have).
pub(crate) const SEAL: &str = ".seal";

/// Directory of checkpoint `id`.
pub(crate) fn ckpt_dir(id: u64) -> String {
    format!("ckpt-{id:020}")
}

/// Parses `ckpt-<digits>` directory names.
pub(crate) fn parse_ckpt_dir(name: &str) -> Option<u64> {
    name.strip_prefix("ckpt-")
        .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|d| d.parse().ok())
}

/// Data file of `rank`.
pub(crate) fn data_file(rank: u32) -> String {
    format!("rank-{rank:06}.fck")
}

/// Metadata record of `rank`.
pub(crate) fn record_file(rank: u32) -> String {
    format!("rank-{rank:06}.meta.json")
}

/// The temporary name `write_atomic` uses for `name`, written by `rank`.
pub(crate) fn temporary(name: &str, rank: u32) -> String {
    format!(".{name}.tmp-{rank}")
}

/// Whether `name` is a temporary of some atomic replacement.
pub(crate) fn is_temporary(name: &str) -> bool {
    name.starts_with('.') && name.contains(".tmp-")
}

/// Lock file of `rank`.
pub(crate) fn lock_file(rank: u32) -> String {
    format!(".lock-rank-{rank:06}")
}

/// Whether `name` is a rank's lock file.
pub(crate) fn is_lock(name: &str) -> bool {
    name.starts_with(".lock-rank-")
}

/// Write probe of `rank`.
pub(crate) fn probe_file(rank: u32) -> String {
    format!(".probe-rank-{rank:06}")
}

/// Prefix of `rank`'s spare files.
pub(crate) fn spare_prefix(rank: u32) -> String {
    format!("rank-{rank:06}.")
}

/// What a file in a checkpoint directory is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RankFile {
    /// A data file.
    Data(u32),
    /// A metadata record.
    Record(u32),
}

/// Parses `rank-<digits>.fck` and `rank-<digits>.meta.json`.
pub(crate) fn parse_rank_file(name: &str) -> Option<RankFile> {
    let rest = name.strip_prefix("rank-")?;
    let (digits, data) = match rest.strip_suffix(".fck") {
        Some(d) => (d, true),
        None => (rest.strip_suffix(".meta.json")?, false),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let rank = digits.parse().ok()?;
    Some(if data {
        RankFile::Data(rank)
    } else {
        RankFile::Record(rank)
    })
}

#[cfg(test)]
mod tests;
