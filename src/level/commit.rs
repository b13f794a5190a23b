//! The commit markers of levels 2 to 4 and the listing of a level's
//! checkpoint directories.

use super::fsio::{write_small, StorageError};
use super::names;
use crate::safefs::{Dir, Kind};
use crate::topology::Layout;
use serde::{Deserialize, Serialize};

/// The marker of a checkpoint committed at a level.
pub(crate) const COMMITTED: &str = "COMMITTED";

/// Contents of a [`COMMITTED`] marker.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Commit {
    /// Job id.
    pub job_id: String,
    /// Checkpoint id.
    pub checkpoint_id: u64,
    /// Level.
    pub level: u8,
    /// The checkpoint's stamp.
    pub stamp: u64,
    /// Where the checkpoint's ranks were, and the group settings, when it
    /// was promoted (absent in markers that predate it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layout: Option<Layout>,
}

/// Largest marker read (a layout of a million ranks fits): by the levels'
/// stores and by the catalog alike.
pub(crate) const MAX_MARKER: u64 = 16 << 20;

/// Writes the marker of checkpoint `id` committed at `level` in its
/// directory `ckpt`, already open.
pub(crate) fn mark_in(
    ckpt: &Dir,
    job_id: &str,
    level: super::Level,
    (id, stamp): (u64, u64),
    layout: Option<Layout>,
) -> Result<(), StorageError> {
    let commit = Commit {
        job_id: job_id.to_string(),
        checkpoint_id: id,
        level: level.number(),
        stamp,
        layout,
    };
    let bytes = serde_json::to_vec(&commit).unwrap_or_default();
    write_small(ckpt, COMMITTED, &bytes, "commit")
}

/// Writes the marker of checkpoint `id` committed at `level` under `root`
/// (nothing if its directory is gone).
pub(crate) fn mark_level(
    root: &Dir,
    job_id: &str,
    level: super::Level,
    (id, stamp): (u64, u64),
    layout: Option<Layout>,
) -> Result<(), StorageError> {
    match root.try_sub(&names::ckpt_dir(id))? {
        Some(ckpt) => mark_in(&ckpt, job_id, level, (id, stamp), layout),
        None => Ok(()),
    }
}

/// The sound markers of `level` under `root`, by ascending checkpoint id.
pub(crate) fn commits(root: &Dir, job_id: &str, level: super::Level) -> Vec<Commit> {
    ids(root)
        .into_iter()
        .filter_map(|id| read(root, job_id, id))
        .filter(|c| c.level == level.number())
        .collect()
}

/// The marker of checkpoint `id` under `root`, if present and sound.
pub(crate) fn read(root: &Dir, job_id: &str, id: u64) -> Option<Commit> {
    root.try_sub(&names::ckpt_dir(id))
        .ok()
        .flatten()
        .and_then(|d| d.read_capped(COMMITTED, MAX_MARKER).ok())
        .and_then(|b| serde_json::from_slice::<Commit>(&b).ok())
        .filter(|c| c.checkpoint_id == id && c.job_id == job_id)
}

/// Ids of the checkpoints marked committed under `root`, ascending.
pub(crate) fn committed(root: &Dir, job_id: &str) -> Vec<u64> {
    ids(root)
        .into_iter()
        .filter(|id| read(root, job_id, *id).is_some())
        .collect()
}

/// Ids of every checkpoint directory under `root`, ascending.
pub(crate) fn ids(root: &Dir) -> Vec<u64> {
    let mut ids: Vec<u64> = root
        .entries()
        .unwrap_or_default()
        .into_iter()
        .filter(|(_, k)| *k == Kind::Dir)
        .filter_map(|(n, _)| names::parse_ckpt_dir(&n))
        .collect();
    ids.sort_unstable();
    ids
}

/// The oldest checkpoint to keep when the newest `keep_last` committed ones
/// are kept, or `None` while fewer are committed.
pub(crate) fn oldest_kept(committed: &[u64], keep_last: usize) -> Option<u64> {
    let keep = keep_last.max(1);
    (committed.len() >= keep).then(|| committed[committed.len() - keep])
}
