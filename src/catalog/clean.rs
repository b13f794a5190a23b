//! `frame clean`: removing a job's checkpoints for good.
//!
//! Only what frame creates is removed (checkpoint directories with their
//! rank files, held files, commit markers, group manifests and parity, as
//! `frame drop` removes one; pointers, spare files, the programs' files,
//! locks and probes), through checked directory
//! handles and without following links; anything else is left where it is
//! and reported. A job whose rank lock is held by a running process is not
//! touched.

use super::LevelDir;
use crate::level::commit::COMMITTED;
use crate::level::erasure::{is_parity_file, MANIFEST};
use crate::level::global::fence;
use crate::level::l1::remove_held;
use crate::level::names::{self, RankFile};
use crate::safefs::{Dir, FsError, Kind};
use std::path::PathBuf;

/// What `clean` removed from one level directory.
#[derive(Debug)]
pub struct Removal {
    /// The level directory.
    pub path: PathBuf,
    /// Checkpoints removed.
    pub checkpoints: Vec<u64>,
    /// Entries left in place because frame did not make them.
    pub kept: Vec<PathBuf>,
}

/// Whether `name` is a file frame makes in a level directory.
fn ours(name: &str) -> bool {
    name == names::POINTER
        || name == names::FENCE
        || names::is_temporary(name)
        || names::is_lock(name)
        || name.starts_with(".probe-rank-")
}

/// Removes the checkpoints of every level directory in `levels`. Refuses
/// (before removing anything) if a rank of one of them is running.
pub fn clean(levels: &[&LevelDir]) -> Result<Vec<Removal>, FsError> {
    open_idle(levels)?.iter().map(clean_level).collect()
}

/// Opens every level directory of `levels`, refusing (before anything is
/// removed) if a rank of one of them is running.
pub(super) fn open_idle(levels: &[&LevelDir]) -> Result<Vec<Dir>, FsError> {
    let mut opened = Vec::new();
    for level in levels {
        let dir = Dir::open(&level.path)?;
        for (name, kind) in dir.entries()? {
            if kind == Kind::File && names::is_lock(&name) && dir.is_locked(&name) {
                return Err(FsError::Locked {
                    path: dir.join(&name),
                    what: "a rank of this job is running; stop the job first".into(),
                });
            }
        }
        opened.push(dir);
    }
    Ok(opened)
}

fn clean_level(dir: &Dir) -> Result<Removal, FsError> {
    let mut removal = Removal {
        path: dir.path().to_path_buf(),
        checkpoints: Vec::new(),
        kept: Vec::new(),
    };
    for (name, kind) in dir.entries()? {
        if let Some(id) = names::parse_ckpt_dir(&name) {
            if kind == Kind::Dir {
                remove_local(dir, id, &mut removal)?;
            } else {
                // A link or file where a checkpoint directory should be.
                dir.remove_file(&name)?;
            }
            removal.checkpoints.push(id);
        } else if name == names::SPARE && kind == Kind::Dir {
            let spare = dir.sub(&name, false)?;
            for (file, _) in spare.entries()? {
                if file.starts_with("rank-") && file.ends_with(".fck") {
                    spare.remove_file(&file)?;
                } else {
                    removal.kept.push(spare.join(&file));
                }
            }
            dir.remove_dir_if_empty(&name);
        } else if name == names::FILES && kind == Kind::Dir {
            // The programs' own files of file checkpoints, one directory
            // per rank.
            let files = dir.sub(&name, false)?;
            for (rank_dir, kind) in files.entries()? {
                if kind != Kind::Dir || !rank_dir.starts_with("rank-") {
                    removal.kept.push(files.join(&rank_dir));
                    continue;
                }
                let sub = files.sub(&rank_dir, false)?;
                for (file, kind) in sub.entries()? {
                    if kind == Kind::File && names::check_file_name(&file).is_ok() {
                        sub.remove_file(&file)?;
                    } else {
                        removal.kept.push(sub.join(&file));
                    }
                }
                files.remove_dir_if_empty(&rank_dir);
            }
            dir.remove_dir_if_empty(&name);
        } else if kind == Kind::Dir && fence::is_set_aside(&name) {
            // What a move of the level-4 fence set aside.
            fence::sweep(dir)?;
        } else if ours(&name) && kind != Kind::Dir {
            dir.remove_file(&name)?;
        } else {
            removal.kept.push(dir.join(&name));
        }
    }
    // The level directory and its job directory go too once empty.
    let level_path = dir.path().to_path_buf();
    let _ = std::fs::remove_dir(&level_path);
    if let Some(job) = level_path.parent() {
        let _ = std::fs::remove_dir(job);
    }
    Ok(removal)
}

/// The level directories of `levels` that belong to `job` (all if `None`).
pub fn of_job<'a>(levels: &'a [LevelDir], job: Option<&str>) -> Vec<&'a LevelDir> {
    levels
        .iter()
        .filter(|l| job.is_none_or(|j| l.job.as_deref() == Some(j)))
        .collect()
}

/// Removes checkpoint `id` from a node-local level directory (levels 1 to
/// 3, or the managers' staging): marker, group manifest, records, then
/// data, temporaries and parity.
pub(super) fn remove_local(dir: &Dir, id: u64, removal: &mut Removal) -> Result<(), FsError> {
    let name = names::ckpt_dir(id);
    let Some(ckpt) = dir.try_sub(&name)? else {
        return Ok(());
    };
    ckpt.remove_file(COMMITTED)?;
    ckpt.remove_file(MANIFEST)?;
    let entries = ckpt.entries()?;
    let record = |n: &str| matches!(names::parse_rank_file(n), Some(RankFile::Record(_)));
    for (file, _) in entries.iter().filter(|(n, _)| record(n)) {
        ckpt.remove_file(file)?;
    }
    for (file, kind) in entries.iter().filter(|(n, _)| !record(n)) {
        let ours = names::parse_rank_file(file).is_some()
            || names::is_temporary(file)
            || is_parity_file(file);
        if let (Some(rank), Kind::Dir) = (names::parse_held_dir(file), kind) {
            removal.kept.extend(remove_held(&ckpt, rank)?);
        } else if ours && *kind != Kind::Dir {
            ckpt.remove_file(file)?;
        } else if file != COMMITTED && file != MANIFEST {
            removal.kept.push(ckpt.join(file));
        }
    }
    drop(ckpt);
    dir.remove_dir_if_empty(&name);
    Ok(())
}
