//! Where a node's manager keeps the level-1 files it is about to promote.
//!
//! When a promotion is queued, the manager links the node's ranks' files of
//! that checkpoint (data and record) into `<local_dir>/<job>/staging/ckpt-<id>/`.
//! Level 1 may then retire the checkpoint at any time (it never writes a
//! file that has other names: it only moves its own name of it aside until
//! the others are gone): the promotion reads the staged names, and removes
//! them when it is done.

use super::fsio::StorageError;
use super::{commit, names, open_rank_file_in as open_rank_file, Level};
use crate::format::Metadata;
use crate::safefs::{Dir, Kind};
use std::path::Path;

/// The staging directory under a job's directory.
pub(crate) const STAGING_DIR: &str = "staging";

/// Why level-1 files could not be staged.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StageError {
    /// A file or directory could not be used.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// The file on the node is of another attempt at that checkpoint than
    /// the one to promote.
    #[error("rank {rank}'s file of checkpoint {id} belongs to another attempt")]
    OtherAttempt {
        /// The rank whose file it is.
        rank: u32,
        /// The checkpoint.
        id: u64,
    },
}

/// A node's staged level-1 files of one job.
pub(crate) struct Staging {
    job_id: String,
    job: Dir,
    root: Dir,
}

impl Staging {
    /// Opens (creating) the staging directory of `job_id` under `local_dir`.
    /// `who` numbers the crash points.
    pub(crate) fn open(local_dir: &Path, job_id: &str, who: u32) -> Result<Self, StorageError> {
        let job = Dir::open(local_dir)?.counted_as(who).sub(job_id, false)?;
        let root = job.sub(STAGING_DIR, true)?;
        Ok(Self {
            job_id: job_id.to_string(),
            job,
            root,
        })
    }

    /// Links `ranks`' level-1 files of checkpoint `id` (each checked against
    /// its record and place, and of stamp `stamp`) into the staging area.
    pub(crate) fn stage(
        &self,
        id: u64,
        stamp: u64,
        ranks: &[u32],
        world: u32,
    ) -> Result<(), StageError> {
        let name = names::ckpt_dir(id);
        let l1 = (self.job.sub(names::L1_DIR, false))
            .and_then(|d| d.sub(&name, false))
            .map_err(StorageError::from)?;
        let to = self.root.sub(&name, true).map_err(StorageError::from)?;
        for &rank in ranks {
            let (_, meta) = open_rank_file(&l1, &self.job_id, id, rank, Level::L1, world)?;
            if meta.stamp != stamp {
                return Err(StageError::OtherAttempt { rank, id });
            }
            for file in [names::data_file(rank), names::record_file(rank)] {
                to.remove_file(&file).map_err(StorageError::from)?;
                l1.link(&file, &to, &file).map_err(StorageError::from)?;
            }
        }
        Ok(to.sync().map_err(StorageError::from)?)
    }

    /// `rank`'s staged record of checkpoint `id`, checked against its place
    /// and file, with the directory holding it.
    pub(crate) fn record(
        &self,
        id: u64,
        rank: u32,
        world: u32,
    ) -> Result<(Dir, Metadata), StorageError> {
        let ckpt = self.root.sub(&names::ckpt_dir(id), false)?;
        let (_, meta) = open_rank_file(&ckpt, &self.job_id, id, rank, Level::L1, world)?;
        Ok((ckpt, meta))
    }

    /// Removes the staged files of checkpoint `id`.
    pub(crate) fn unstage(&self, id: u64) -> Result<(), StorageError> {
        let name = names::ckpt_dir(id);
        if let Some(ckpt) = self.root.try_sub(&name)? {
            for (file, kind) in ckpt.entries()? {
                if kind == Kind::File {
                    ckpt.remove_file(&file)?;
                }
            }
        }
        self.root.remove_dir_if_empty(&name);
        Ok(())
    }

    /// Ids of the staged checkpoints.
    pub(crate) fn ids(&self) -> Vec<u64> {
        commit::ids(&self.root)
    }

    /// Removes the staging directory if it is empty.
    pub(crate) fn remove_if_empty(&self) {
        self.job.remove_dir_if_empty(STAGING_DIR);
    }
}
