//! Restoring on one rank alone: per-rank recovery, and rolling back within
//! a run to the newest checkpoint it committed.
//!
//! [`Checkpointer::recover`] is collective: every rank loads, and a rank
//! whose data is damaged sends all of them to an older checkpoint. The
//! calls here involve this rank alone, so that a program may restore on
//! some ranks and not on others, or region by region (as FTI programs do);
//! damaged data is then an error on that rank. While the checkpoint agreed
//! at init waits they restore it, and the next collective call ends the
//! recovery on every rank; afterwards they restore the newest checkpoint
//! the run committed.

use super::restore::{load_regions, LoadFailure};
use super::Checkpointer;
use crate::error::{problems, Error, Result};
use crate::format::CheckpointFile;

impl Checkpointer<'_> {
    /// Restores every protected region on this rank alone, from the
    /// checkpoint agreed at init while it waits, else from the newest
    /// checkpoint committed in this run, and returns its id. Not
    /// collective. Every stored region must be protected with its element
    /// type; `Vec` regions are resized to the stored length.
    pub fn recover_here(&mut self) -> Result<u64> {
        let regions = self.protected();
        let rank = self.comm.rank();
        let (id, file) = self.current_file()?;
        load_regions(&regions, id, file).map_err(|f| match f {
            LoadFailure::Mismatch(reason) => Error::RegionMismatch {
                id,
                problems: problems(vec![(rank, reason)]),
            },
            LoadFailure::Data(reason) => Error::Unreadable { id, reason },
        })?;
        self.restored_here();
        Ok(id)
    }

    /// The checkpoint a restore on this rank alone reads: the one agreed at
    /// init while it waits, else the newest committed in this run (opened
    /// once per checkpoint).
    pub(super) fn current_file(&mut self) -> Result<(u64, &CheckpointFile)> {
        if self.recovering() {
            let id = self.recovery_id().unwrap_or_default();
            return self.recovery_file().map_err(|f| Error::Unreadable {
                id,
                reason: f.text().to_string(),
            });
        }
        let Some(id) = self.stats.last_id else {
            return Err(Error::NothingToRecover);
        };
        if self.rollback.as_ref().map(|(held, _)| *held) != Some(id) {
            self.rollback = None;
            let (file, _) = self
                .store
                .open_checkpoint(id)
                .map_err(|e| Error::Unreadable {
                    id,
                    reason: e.to_string(),
                })?;
            self.rollback = Some((id, file));
        }
        match &self.rollback {
            Some((id, file)) => Ok((*id, file)),
            None => Err(Error::NothingToRecover),
        }
    }
}
