//! The fence of a job's level-4 directory, the storage every node writes:
//! the newest run and epoch of the job that wrote there (`FENCE`). A
//! write that belongs to an older one is refused: it comes from a process
//! of a node the job gave up on that outlived its lease (a clock or
//! scheduling accident), and must not overwrite what the job restored or
//! wrote since. Writes outside a runtime carry no fence and are not
//! checked.
//!
//! The check is made right before each write's commit point (a rank's
//! manifest, the commit marker), and the fence moves forward as the
//! recovered ranks start and as live managers write: a write that passed
//! the check a moment before the fence moved can still land, which the
//! leases make a second line of defence against, not the first.

use super::names;
use crate::level::fsio::{write_small, StorageError};
use crate::safefs::Dir;
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

/// The fence written in `dir`, if any (unreadable: none).
pub(crate) fn current(dir: &Dir) -> Option<Fence> {
    let bytes = dir.read_capped(names::FENCE, 256).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Checks that a write of `mine` may go to `dir`, moving the fence
/// forward to it when it is newer; refuses one older than the fence.
pub(crate) fn pass(dir: &Dir, mine: Fence) -> Result<(), StorageError> {
    match current(dir) {
        Some(now) if now > mine => Err(StorageError::Fenced {
            path: dir.path().to_path_buf(),
            epoch: mine.epoch,
            current: now.epoch,
            later_run: now.launch > mine.launch,
        }),
        Some(now) if now == mine => Ok(()),
        _ => {
            let body = serde_json::to_vec(&mine).unwrap_or_default();
            write_small(dir, names::FENCE, &body, "fence")
        }
    }
}
