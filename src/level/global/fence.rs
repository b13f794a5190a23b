//! The fence of a job's level-4 directory, the storage every node writes:
//! the newest run and epoch of the job that wrote there (`FENCE`), and
//! what moving it forward does to the checkpoints older epochs left
//! unfinished.
//!
//! Only a run's rank 0 moves the fence, as the ranks of a new epoch start
//! and before any of them writes ([`advance`]); managers only check it
//! ([`check`]). A write that belongs to an older epoch is refused: it
//! comes from a process of a node the job gave up on that outlived its
//! lease (frozen, or cut off, and thawed), and must not overwrite what the
//! job restored or wrote since. Writes outside a runtime carry no fence
//! and are not checked.
//!
//! A check cannot be atomic with the write it guards: a writer frozen
//! right after its check passed would land its write once thawed. So
//! moving the fence also sets aside every checkpoint directory without a
//! commit marker (renamed to a temporary name, then removed): a late
//! writer holds the directory it opened before its check, and whatever it
//! renames into place lands in the set-aside directory, which no reader
//! looks at. A writer that opens its directory after the fence moved is
//! refused by its check. Chunk files are named by their content, so a
//! late one changes nothing.

use super::names;
use crate::level::commit::COMMITTED;
use crate::level::fsio::{write_small, StorageError};
use crate::safefs::{Dir, FsError, Kind};
use serde::{Deserialize, Serialize};

/// Which run of a job, and which epoch of that run, a write belongs to:
/// a run launched later, or a later epoch of the same run, is newer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Fence {
    /// When the run was launched (nanoseconds since the Unix epoch, by
    /// the launcher's clock).
    pub launch: u64,
    /// The runtime's epoch within it.
    pub epoch: u64,
}

/// Marks the name of a checkpoint directory set aside by a fence move
/// (`.<ckpt dir>.tmp-fenced-<launch>-<epoch>`, a temporary name).
const SET_ASIDE: &str = ".tmp-fenced-";

/// The fence written in `dir`, if any (unreadable: none).
pub(crate) fn current(dir: &Dir) -> Option<Fence> {
    let bytes = dir.read_capped(names::FENCE, 256).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Checks that a write of `mine` may go to `dir`: refuses one older than
/// the fence. The fence stays where it is.
pub(crate) fn check(dir: &Dir, mine: Fence) -> Result<(), StorageError> {
    match current(dir) {
        Some(now) if now > mine => Err(StorageError::Fenced {
            path: dir.path().to_path_buf(),
            epoch: mine.epoch,
            current: now.epoch,
            later_run: now.launch > mine.launch,
        }),
        _ => Ok(()),
    }
}

/// Moves the fence of `dir` forward to `mine` (refusing if it is already
/// past it) and, when it moved, sets aside the checkpoint directories
/// older epochs left without a commit marker. Called by a run's rank 0
/// before any rank of epoch `mine` writes.
pub(crate) fn advance(dir: &Dir, mine: Fence) -> Result<(), StorageError> {
    check(dir, mine)?;
    if current(dir) == Some(mine) {
        return Ok(());
    }
    let body = serde_json::to_vec(&mine).unwrap_or_default();
    // A temporary file of this write's own: two writers sharing one could
    // rename the other's half-written file into place.
    let tag = format!(
        "fence-{:016x}",
        getrandom::u64().unwrap_or_else(|_| u64::from(std::process::id()))
    );
    write_small(dir, names::FENCE, &body, &tag)?;
    Ok(set_aside(dir, mine)?)
}

/// Renames every checkpoint directory of `dir` without a commit marker to
/// a set-aside name, then removes everything set aside (by this move or
/// an earlier one whose late writers have since been refused).
fn set_aside(dir: &Dir, mine: Fence) -> Result<(), FsError> {
    for (name, kind) in dir.entries()? {
        if kind != Kind::Dir || names::parse_ckpt_dir(&name).is_none() {
            continue;
        }
        let Some(ckpt) = dir.try_sub(&name)? else {
            continue;
        };
        if ckpt.kind(COMMITTED).is_none() {
            let aside = format!(".{name}{SET_ASIDE}{}-{}", mine.launch, mine.epoch);
            match dir.rename(&name, dir, &aside) {
                // Removed since the listing (level 4's retention, or a
                // manager sweeping): nothing is left to set aside, and
                // no writer can add to a directory that is gone.
                Err(e) if e.is_not_found() => {}
                other => other?,
            }
        }
    }
    sweep(dir)
}

/// Removes the directories fence moves set aside in `dir`, with their
/// files (a late writer may still be adding one: what it leaves goes at
/// the next sweep).
pub(crate) fn sweep(dir: &Dir) -> Result<(), FsError> {
    for (name, kind) in dir.entries()? {
        if kind != Kind::Dir || !is_set_aside(&name) {
            continue;
        }
        if let Some(aside) = dir.try_sub(&name)? {
            for (entry, kind) in aside.entries()? {
                if kind != Kind::Dir {
                    aside.remove_file(&entry)?;
                }
            }
        }
        dir.remove_dir_if_empty(&name);
    }
    Ok(())
}

/// Whether `name` is a checkpoint directory a fence move set aside.
pub(crate) fn is_set_aside(name: &str) -> bool {
    name.strip_prefix('.')
        .and_then(|n| n.split_once(SET_ASIDE))
        .is_some_and(|(ckpt, _)| names::parse_ckpt_dir(ckpt).is_some())
}

#[cfg(test)]
mod tests;
