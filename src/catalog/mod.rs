//! Finding checkpoints on disk without a running job: what `frame inspect`
//! lists, `frame ls` sums up per checkpoint, `frame verify` checks, and
//! `frame clean` and `frame drop` remove.
//!
//! A catalog walks a directory tree, never following symbolic links, for
//! level directories (`<job>/l<N>/`, holding `LATEST` or `ckpt-<id>`
//! directories) and reads their metadata records and pointers but no data.
//! A job's level-1 checkpoints are spread over the node directories of its
//! run (`<local_dir>/node-<n>/<job>/l1`); [`verify`](fn@verify) puts them back together.

mod clean;
mod drop;
mod findings;
mod l3_l4;
mod listing;
mod verify;

#[cfg(test)]
mod tests;

pub use clean::{clean, of_job, Removal};
pub use drop::drop_checkpoint;
pub use findings::{Finding, Report, Severity};
pub use listing::{list, LevelState, Listed};
pub use verify::verify;

use crate::format::{Metadata, MAX_RECORD};
use crate::level::names::{self, RankFile};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// Directories deeper than this below the starting point are not visited.
const MAX_DEPTH: usize = 8;

/// One rank's files in a checkpoint directory.
#[derive(Debug, Default, Serialize)]
pub struct RankFiles {
    /// Rank number parsed from the file names.
    pub rank: u32,
    /// The data file, if present.
    pub data: Option<PathBuf>,
    /// Why the data file cannot be used as one (a link, not a regular file).
    pub data_error: Option<String>,
    /// The metadata record's path, if present.
    pub record_path: Option<PathBuf>,
    /// The record, when it could be read.
    pub record: Option<Metadata>,
    /// Why the record could not be read.
    pub record_error: Option<String>,
    /// Bytes of the program's files held beside the data file (level 1,
    /// a checkpoint of files that stayed on its node).
    pub held_bytes: u64,
}

/// A checkpoint directory and the rank files in it.
#[derive(Debug, Serialize)]
pub struct CheckpointDir {
    /// Checkpoint id.
    pub id: u64,
    /// The directory.
    pub path: PathBuf,
    /// Why the directory itself cannot be trusted (a symbolic link).
    pub error: Option<String>,
    /// Files per rank, in rank order (at level 4, the record comes from
    /// the rank's manifest, and `data` is the manifest).
    pub ranks: Vec<RankFiles>,
    /// Whether a sound commit marker of this checkpoint is there (levels 2
    /// to 4).
    pub committed: bool,
    /// The redundancy scheme and parameters the marker records (`None`
    /// without a marker, and in markers that predate recorded rules).
    pub rule: Option<crate::topology::Rule>,
    /// Parity shard files (level 3).
    pub parity: Vec<PathBuf>,
    /// The group manifest (level 3).
    pub group: Option<PathBuf>,
}

/// What a level directory's `LATEST` pointer says.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum Pointer {
    /// There is none.
    Missing,
    /// It names a job and a checkpoint.
    Names {
        /// Job id.
        job_id: String,
        /// Checkpoint id.
        checkpoint_id: u64,
    },
    /// It cannot be read or trusted.
    Bad(String),
}

/// A directory holding checkpoints of one job at one level.
#[derive(Debug, Serialize)]
pub struct LevelDir {
    /// The directory.
    pub path: PathBuf,
    /// The job, from the name of the directory holding it.
    pub job: Option<String>,
    /// The level, from its name (`l1` to `l4`).
    pub level: Option<u8>,
    /// The `LATEST` pointer, if present and readable.
    pub latest: Option<u64>,
    /// What `LATEST` holds.
    pub pointer: Pointer,
    /// Checkpoints, oldest first.
    pub checkpoints: Vec<CheckpointDir>,
    /// Only some of the directory's checkpoints are listed (the scan started
    /// at one checkpoint directory).
    #[serde(skip)]
    pub partial: bool,
}

fn is_link(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

/// Why frame would refuse to use `path` in a tree owned by uid `owner`: a
/// file or directory of another user, or a directory others may write to.
fn distrust(path: &Path, owner: u32) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let m = fs::symlink_metadata(path).ok()?;
    if m.file_type().is_symlink() {
        return None;
    }
    if m.uid() != owner {
        return Some(format!(
            "owned by uid {}, not by the job's user (uid {owner})",
            m.uid()
        ));
    }
    let mode = m.mode() & 0o7777;
    if m.is_dir() && mode & 0o022 != 0 {
        return Some(format!("writable by other users (mode {mode:04o})"));
    }
    None
}

fn read_pointer(dir: &Path) -> Pointer {
    let path = dir.join(names::POINTER);
    match fs::symlink_metadata(&path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Pointer::Missing,
        Ok(m) if m.file_type().is_symlink() => {
            return Pointer::Bad("is a symbolic link".into());
        }
        _ => {}
    }
    let bytes = match crate::safefs::read_nofollow(&path, crate::level::l1::MAX_POINTER) {
        Ok(b) => b,
        Err(e) => return Pointer::Bad(e.to_string()),
    };
    match serde_json::from_slice::<crate::level::l1::Pointer>(&bytes) {
        Ok(p) => Pointer::Names {
            job_id: p.job_id,
            checkpoint_id: p.checkpoint_id,
        },
        Err(e) => Pointer::Bad(format!("unreadable: {e}")),
    }
}

fn read_record(path: &Path) -> Result<Metadata, String> {
    let bytes = crate::safefs::read_nofollow(path, MAX_RECORD).map_err(|e| {
        if is_link(path) {
            "is a symbolic link (frame never follows links it did not create)".to_string()
        } else {
            e.to_string()
        }
    })?;
    Metadata::from_json(&bytes, path).map_err(|e| e.kind.to_string())
}

fn read_ckpt_dir(path: &Path, id: u64, owner: u32) -> CheckpointDir {
    let mut dir = CheckpointDir {
        id,
        path: path.to_path_buf(),
        error: None,
        ranks: Vec::new(),
        committed: false,
        rule: None,
        parity: Vec::new(),
        group: None,
    };
    if is_link(path) {
        dir.error = Some("is a symbolic link (frame never follows links it did not create)".into());
        return dir;
    }
    if let Some(why) = distrust(path, owner) {
        dir.error = Some(why);
        return dir;
    }
    let entries = match fs::read_dir(path) {
        Ok(e) => e,
        Err(e) => {
            dir.error = Some(format!("cannot be listed: {e}"));
            return dir;
        }
    };
    let mut ranks: BTreeMap<u32, RankFiles> = BTreeMap::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == crate::level::commit::COMMITTED {
            let marker = distrust(&entry.path(), owner)
                .is_none()
                .then(|| {
                    crate::safefs::read_nofollow(&entry.path(), crate::level::commit::MAX_MARKER)
                })
                .and_then(Result::ok)
                .and_then(|b| serde_json::from_slice::<crate::level::commit::Commit>(&b).ok())
                .filter(|c| c.checkpoint_id == id);
            dir.committed = marker.is_some();
            dir.rule = marker.and_then(|c| c.layout).and_then(|l| l.rule);
            continue;
        }
        if crate::level::erasure::is_parity_file(&name) {
            dir.parity.push(entry.path());
            continue;
        }
        if name == crate::level::erasure::MANIFEST {
            dir.group = Some(entry.path());
            continue;
        }
        if let Some(rank) = crate::level::global::parse_manifest_file(&name) {
            let file_path = entry.path();
            let record = distrust(&file_path, owner).map_or_else(
                || {
                    crate::safefs::read_nofollow(&file_path, MAX_RECORD)
                        .map_err(|e| e.to_string())
                        .and_then(|b| {
                            serde_json::from_slice::<crate::level::global::Manifest>(&b)
                                .map_err(|e| format!("unreadable manifest: {e}"))
                        })
                        .map(|m| m.record)
                },
                Err,
            );
            let (record, record_error) = match record {
                Ok(m) => (Some(m), None),
                Err(e) => (None, Some(e)),
            };
            ranks.insert(
                rank,
                RankFiles {
                    rank,
                    data: Some(file_path.clone()),
                    record_path: Some(file_path),
                    record,
                    record_error,
                    ..RankFiles::default()
                },
            );
            continue;
        }
        if let Some(rank) = names::parse_held_dir(&name) {
            ranks
                .entry(rank)
                .or_insert_with(|| RankFiles {
                    rank,
                    ..RankFiles::default()
                })
                .held_bytes = held_bytes(&entry.path());
            continue;
        }
        let Some(kind) = names::parse_rank_file(&name) else {
            continue;
        };
        let rank = match kind {
            RankFile::Data(r) | RankFile::Record(r) => r,
        };
        let slot = ranks.entry(rank).or_insert_with(|| RankFiles {
            rank,
            ..RankFiles::default()
        });
        let file_path = entry.path();
        match kind {
            RankFile::Data(_) => {
                let regular = fs::symlink_metadata(&file_path).is_ok_and(|m| m.is_file());
                if !regular {
                    slot.data_error = Some(if is_link(&file_path) {
                        "is a symbolic link (frame never follows links it did not create)".into()
                    } else {
                        "is not a regular file".into()
                    });
                } else if let Some(why) = distrust(&file_path, owner) {
                    slot.data_error = Some(why);
                }
                slot.data = Some(file_path);
            }
            RankFile::Record(_) => {
                match distrust(&file_path, owner).map_or_else(|| read_record(&file_path), Err) {
                    Ok(m) => slot.record = Some(m),
                    Err(e) => slot.record_error = Some(e),
                }
                slot.record_path = Some(file_path);
            }
        }
    }
    dir.ranks = ranks.into_values().collect();
    dir.parity.sort();
    dir
}

/// Bytes of the program's files in held directory `dir` (links and
/// anything else not counted).
fn held_bytes(dir: &Path) -> u64 {
    let Ok(entries) = fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .filter(|e| names::check_file_name(&e.file_name().to_string_lossy()).is_ok())
        .filter_map(|e| fs::symlink_metadata(e.path()).ok())
        .filter(|m| m.is_file())
        .map(|m| m.len())
        .sum()
}

/// Whether `dir` looks like a level directory (holds a pointer or checkpoints).
fn holds_checkpoints(dir: &Path) -> bool {
    let Ok(entries) = fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|e| {
        let name = e.file_name();
        let name = name.to_string_lossy();
        name == names::POINTER || names::parse_ckpt_dir(&name).is_some()
    })
}

fn read_level_dir(path: &Path) -> LevelDir {
    use std::os::unix::fs::MetadataExt;
    let owner = fs::symlink_metadata(path).map_or(u32::MAX, |m| m.uid());
    let job = path
        .parent()
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned());
    let level = path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix('l'))
        .and_then(|n| n.parse::<u8>().ok())
        .filter(|l| (1..=4).contains(l));
    let pointer = match distrust(&path.join(names::POINTER), owner) {
        Some(why) => Pointer::Bad(why),
        None => read_pointer(path),
    };
    let mut checkpoints: Vec<CheckpointDir> = fs::read_dir(path)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    names::parse_ckpt_dir(&name).map(|id| read_ckpt_dir(&e.path(), id, owner))
                })
                .collect()
        })
        .unwrap_or_default();
    checkpoints.sort_by_key(|c| c.id);
    LevelDir {
        path: path.to_path_buf(),
        job,
        level,
        latest: match &pointer {
            Pointer::Names { checkpoint_id, .. } => Some(*checkpoint_id),
            _ => None,
        },
        pointer,
        checkpoints,
        partial: false,
    }
}

/// What a walk of a directory tree found.
#[derive(Debug, Default)]
pub struct Tree {
    /// Every level directory, sorted by path.
    pub levels: Vec<LevelDir>,
    /// Symbolic links met on the way (not followed).
    pub links: Vec<PathBuf>,
}

/// Walks `root` (without following links) and returns every level
/// directory found. `root` may itself be a level directory or a checkpoint
/// directory.
pub fn scan(root: &Path) -> io::Result<Tree> {
    // A shared RAM disk (/dev/shm): this user's files are in their private
    // directory there, and nobody else's are looked at.
    // Anything else is scanned as given (what it holds is judged below).
    let root = crate::safefs::private_root_existing(root).unwrap_or_else(|_| root.to_path_buf());
    let root = root.as_path();
    let meta = fs::metadata(root)?;
    if !meta.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::NotADirectory,
            format!("{} is not a directory", root.display()),
        ));
    }
    let mut found: Vec<PathBuf> = Vec::new();
    let mut links: Vec<PathBuf> = Vec::new();
    let start = root.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if names::parse_ckpt_dir(start).is_some() {
        // A checkpoint directory: its parent is the level directory.
        if let Some(parent) = root.parent() {
            found.push(parent.to_path_buf());
        }
    } else {
        let mut stack = vec![(root.to_path_buf(), 0usize)];
        while let Some((dir, depth)) = stack.pop() {
            if holds_checkpoints(&dir) {
                found.push(dir);
                continue;
            }
            if depth >= MAX_DEPTH {
                continue;
            }
            let Ok(entries) = fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let t = entry.file_type().ok();
                if t.is_some_and(|t| t.is_dir()) && entry.file_name() != names::SPARE {
                    stack.push((entry.path(), depth + 1));
                } else if t.is_some_and(|t| t.is_symlink()) {
                    links.push(entry.path());
                }
            }
        }
    }
    let mut out: Vec<LevelDir> = found.iter().map(|p| read_level_dir(p)).collect();
    if names::parse_ckpt_dir(start).is_some() {
        for level in &mut out {
            level.checkpoints.retain(|c| c.path == root);
            level.partial = true;
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    links.sort();
    Ok(Tree { levels: out, links })
}
