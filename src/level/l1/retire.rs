//! Removing a rank's level-1 checkpoints: retention once every rank has
//! committed a newer one, the abandoned copy of a failed checkpoint, the
//! checkpoints newer than a restored one, and everything at the end of a
//! job. The record always goes first, so a removal cut short leaves a
//! checkpoint recovery passes over, never a damaged one.

use super::{held, L1Store};
use crate::level::names::{self, L1_DIR, POINTER, SPARE};
use crate::level::slot::Slot;
use crate::level::StorageError;

impl L1Store {
    /// Ids of checkpoint directories holding a file of this rank, ascending.
    fn own_ids(&self) -> Result<Vec<u64>, StorageError> {
        let rank = self.owner.rank;
        let (data, record) = (names::data_file(rank), names::record_file(rank));
        let held = names::held_dir(rank);
        let mut ids = Vec::new();
        for (name, _) in self.root.entries()? {
            let Some(id) = names::parse_ckpt_dir(&name) else {
                continue;
            };
            let Ok(Some(d)) = self.root.try_sub(&name) else {
                continue;
            };
            if [&data, &record, &held].iter().any(|n| d.kind(n).is_some()) {
                ids.push(id);
            }
        }
        Ok(ids)
    }

    /// Retires this rank's checkpoints older than the newest `keep_last`
    /// committed ones, leftovers included. Call only once every rank has
    /// committed the newest.
    pub fn retain(&mut self, keep_last: usize) -> Result<(), StorageError> {
        let Some(&oldest) = self.committed.iter().rev().take(keep_last.max(1)).min() else {
            return Ok(());
        };
        self.committed.retain(|id| *id >= oldest);
        for id in self.own_ids()?.into_iter().filter(|id| *id < oldest) {
            self.retire(id)?;
        }
        // Lent files a higher level let go since count as spares now.
        self.trim_spares()
    }

    /// Removes this rank's copy of checkpoint `id` after a failed write
    /// elsewhere (the checkpoint never became restorable).
    pub fn abort(&mut self, id: u64) -> Result<(), StorageError> {
        self.committed.remove(&id);
        self.retire(id)
    }

    /// Makes this rank's copy of checkpoint `id` invisible (its record goes
    /// first), then recycles its data file.
    fn retire(&mut self, id: u64) -> Result<(), StorageError> {
        self.background.wait_for(id);
        let dir_name = names::ckpt_dir(id);
        let slot = self.live.remove(&id);
        let Some(ckpt) = self.root.try_sub(&dir_name)? else {
            return Ok(());
        };
        let rank = self.owner.rank;
        let record = names::record_file(rank);
        ckpt.remove_file(&record)?;
        ckpt.remove_file(&names::temporary(&record, rank))?;
        let data = names::data_file(rank);
        let slot = slot
            .filter(|s| s.still_in(&ckpt))
            .or_else(|| Slot::adopt(&ckpt, &data, Some(id), rank));
        match slot {
            Some(slot) => self.recycle(slot, &ckpt)?,
            None => ckpt.remove_file(&data)?,
        }
        // The held files go last (they count for nothing without the
        // record), and off the program's path.
        self.remove_held_later(id, ckpt)
    }

    /// Removes this rank's checkpoints newer than `id`: after recovery they
    /// can never be restored consistently. Unsafe entries (links, foreign
    /// directories) are left alone.
    pub fn discard_newer(&mut self, id: u64) -> Result<(), StorageError> {
        self.committed.retain(|c| *c <= id);
        for newer in self.own_ids()?.into_iter().filter(|i| *i > id) {
            self.retire(newer)?;
        }
        Ok(())
    }

    /// First step of removing the job's files at the end of a run: the
    /// pointer goes, so no tool takes a checkpoint being removed for the
    /// newest one.
    pub fn forget_pointer(&mut self) -> Result<(), StorageError> {
        Ok(self.root.remove_file(POINTER)?)
    }

    /// Second step: removes every file of this rank (checkpoints oldest
    /// first, then spares), then the job's directories if nothing else is
    /// left in them. A kill part way leaves either the newest checkpoint
    /// whole or an incomplete one, never a damaged one.
    pub fn remove_all(&mut self) -> Result<(), StorageError> {
        self.background.wait_all();
        let rank = self.owner.rank;
        for id in self.own_ids()? {
            let name = names::ckpt_dir(id);
            if let Some(ckpt) = self.root.try_sub(&name)? {
                let record = names::record_file(rank);
                ckpt.remove_file(&record)?;
                ckpt.remove_file(&names::temporary(&record, rank))?;
                held::remove_held(&ckpt, rank)?;
                ckpt.remove_file(&names::data_file(rank))?;
            }
            self.root.remove_dir_if_empty(&name);
        }
        self.live.clear();
        self.committed.clear();
        for slot in std::mem::take(&mut self.spares) {
            self.spare.remove_file(&slot.name)?;
        }
        let files = self.file_names()?;
        self.remove_files(files.iter().map(String::as_str))?;
        self.root.remove_dir_if_empty(names::FILES);
        self.root.remove_file(&names::lock_file(rank))?;
        self.root.remove_dir_if_empty(SPARE);
        self.job.remove_dir_if_empty(L1_DIR);
        self.base.remove_dir_if_empty(&self.owner.job_id);
        Ok(())
    }
}
