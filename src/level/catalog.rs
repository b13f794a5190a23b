//! Finding checkpoints on disk without a running job: what `frame inspect`
//! lists and `frame verify` checks.
//!
//! A catalog walks a directory tree for checkpoint directories (`ckpt-<id>`)
//! and groups them by the level directory that holds them, reading the
//! metadata records and the `LATEST` pointer but no data.

use super::l1::parse_ckpt_dir;
use crate::format::{CheckpointFile, FormatError, Metadata};
use serde::Serialize;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// Directories deeper than this below the starting point are not visited.
const MAX_DEPTH: usize = 8;

/// One rank's files in a checkpoint directory.
#[derive(Debug, Serialize)]
pub struct RankFiles {
    /// Rank number parsed from the file names.
    pub rank: u32,
    /// The data file, if present.
    pub data: Option<PathBuf>,
    /// The metadata record's path, if present.
    pub record_path: Option<PathBuf>,
    /// The record, when it could be read.
    pub record: Option<Metadata>,
    /// Why the record could not be read.
    pub record_error: Option<String>,
}

/// A checkpoint directory and the rank files in it.
#[derive(Debug, Serialize)]
pub struct CheckpointDir {
    /// Checkpoint id.
    pub id: u64,
    /// The directory.
    pub path: PathBuf,
    /// Files per rank, in rank order.
    pub ranks: Vec<RankFiles>,
}

/// A directory holding checkpoints of one job at one level.
#[derive(Debug, Serialize)]
pub struct LevelDir {
    /// The directory.
    pub path: PathBuf,
    /// The `LATEST` pointer, if present and readable.
    pub latest: Option<u64>,
    /// Checkpoints, oldest first.
    pub checkpoints: Vec<CheckpointDir>,
}

/// A problem `verify` found.
#[derive(Debug)]
pub struct Problem {
    /// File or directory concerned.
    pub path: PathBuf,
    /// What is wrong.
    pub message: String,
}

/// Parses `rank-<digits>.fck` and `rank-<digits>.meta.json`.
fn parse_rank_file(name: &str) -> Option<(u32, bool)> {
    let rest = name.strip_prefix("rank-")?;
    let (digits, is_data) = match rest.strip_suffix(".fck") {
        Some(d) => (d, true),
        None => (rest.strip_suffix(".meta.json")?, false),
    };
    digits
        .bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| digits.parse().ok())
        .flatten()
        .map(|r| (r, is_data))
}

fn read_ckpt_dir(path: &Path, id: u64) -> io::Result<CheckpointDir> {
    let mut ranks: std::collections::BTreeMap<u32, RankFiles> = Default::default();
    for entry in fs::read_dir(path)?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some((rank, is_data)) = parse_rank_file(&name) else {
            continue;
        };
        let slot = ranks.entry(rank).or_insert_with(|| RankFiles {
            rank,
            data: None,
            record_path: None,
            record: None,
            record_error: None,
        });
        if is_data {
            slot.data = Some(entry.path());
        } else {
            match Metadata::read(entry.path()) {
                Ok(m) => slot.record = Some(m),
                Err(e) => slot.record_error = Some(e.to_string()),
            }
            slot.record_path = Some(entry.path());
        }
    }
    Ok(CheckpointDir {
        id,
        path: path.to_path_buf(),
        ranks: ranks.into_values().collect(),
    })
}

fn read_latest(dir: &Path) -> Option<u64> {
    let bytes = fs::read(dir.join("LATEST")).ok()?;
    let v: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    v.get("checkpoint_id")?.as_u64()
}

/// Walks `root` and returns every level directory found, sorted by path.
/// `root` may itself be a level directory or a checkpoint directory.
pub fn scan(root: &Path) -> io::Result<Vec<LevelDir>> {
    let meta = fs::metadata(root)?;
    if !meta.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::NotADirectory,
            format!("{} is not a directory", root.display()),
        ));
    }
    let mut levels: std::collections::BTreeMap<PathBuf, LevelDir> = Default::default();
    let mut stack = vec![(root.to_path_buf(), 0usize)];
    while let Some((dir, depth)) = stack.pop() {
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if let Some(id) = parse_ckpt_dir(&name) {
            let parent = dir.parent().unwrap_or(Path::new(".")).to_path_buf();
            let level = levels.entry(parent.clone()).or_insert_with(|| LevelDir {
                latest: read_latest(&parent),
                path: parent,
                checkpoints: Vec::new(),
            });
            level.checkpoints.push(read_ckpt_dir(&dir, id)?);
            continue;
        }
        if depth >= MAX_DEPTH || name == "spare" && depth > 0 {
            continue;
        }
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                stack.push((entry.path(), depth + 1));
            }
        }
    }
    let mut out: Vec<LevelDir> = levels.into_values().collect();
    for level in &mut out {
        level.checkpoints.sort_by_key(|c| c.id);
    }
    Ok(out)
}

/// Why a consistent file and record do not belong where they lie, if so:
/// another job's directory, another checkpoint's or another rank's name.
fn misplaced(
    level: &LevelDir,
    ckpt: &CheckpointDir,
    rank: u32,
    record: &Metadata,
) -> Option<String> {
    let job_dir = level
        .path
        .parent()
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy());
    if let Some(job) = job_dir.filter(|j| *j != record.job_id.as_str()) {
        return Some(format!(
            "belongs to job `{}` but lies in the directory of job `{job}`",
            record.job_id
        ));
    }
    if record.checkpoint_id != ckpt.id {
        return Some(format!(
            "holds checkpoint {} but lies in checkpoint {}'s directory",
            record.checkpoint_id, ckpt.id
        ));
    }
    if record.rank != rank {
        return Some(format!(
            "holds rank {}'s data under rank {rank}'s name",
            record.rank
        ));
    }
    None
}

/// Checks every checkpoint under `levels`: each data file's header and every
/// chunk CRC, each record against its file. Returns the problems and the
/// number of data files checked.
pub fn verify(levels: &[LevelDir]) -> (Vec<Problem>, usize) {
    let mut problems = Vec::new();
    let mut checked = 0;
    let mut flag = |path: &Path, message: String| {
        problems.push(Problem {
            path: path.to_path_buf(),
            message,
        })
    };
    for level in levels {
        if let Some(latest) = level.latest {
            if !level.checkpoints.iter().any(|c| c.id == latest) {
                flag(
                    &level.path,
                    format!("LATEST names checkpoint {latest}, which is missing"),
                );
            }
        }
        for ckpt in &level.checkpoints {
            let committed = level.latest.is_none_or(|l| ckpt.id <= l);
            for rank in &ckpt.ranks {
                if let (Some(path), Some(err)) = (&rank.record_path, &rank.record_error) {
                    flag(path, err.clone());
                }
                let Some(data) = &rank.data else {
                    if let Some(path) = &rank.record_path {
                        flag(path, "record without its data file".into());
                    }
                    continue;
                };
                checked += 1;
                let file = match CheckpointFile::open(data) {
                    Ok(f) => f,
                    Err(e) => {
                        flag(data, e.kind.to_string());
                        continue;
                    }
                };
                for e in file.verify() {
                    let FormatError { path, kind } = e;
                    flag(&path, kind.to_string());
                }
                match &rank.record {
                    Some(record) => {
                        if let Err(e) = record.check_file(&file) {
                            flag(data, e.kind.to_string());
                        } else if let Some(why) = misplaced(level, ckpt, rank.rank, record) {
                            flag(data, why);
                        }
                    }
                    None if rank.record_path.is_none() && committed => {
                        flag(data, "data file without its metadata record".into());
                    }
                    None => {}
                }
            }
        }
    }
    (problems, checked)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_file_names() {
        assert_eq!(parse_rank_file("rank-000012.fck"), Some((12, true)));
        assert_eq!(parse_rank_file("rank-3.meta.json"), Some((3, false)));
        assert_eq!(parse_rank_file("rank-x.fck"), None);
        assert_eq!(parse_rank_file(".rank-1.meta.json.tmp-1"), None);
        assert_eq!(parse_ckpt_dir("ckpt-00000000000000000042"), Some(42));
        assert_eq!(parse_ckpt_dir("ckpt-"), None);
    }
}
