//! Node-local copies of rank files kept by levels 2 and 3.
//!
//! Under `<local_dir>/<job_id>/l<N>/` (N = 2 or 3):
//!
//! ```text
//! ckpt-<id>/rank-<r>.fck          a rank's data file: a partner's, copied
//!                                 in pieces; the node's own ranks', a
//!                                 second name (hard link) of the staged
//!                                 level-1 file, which nothing rewrites
//!                                 once it has other names
//! ckpt-<id>/rank-<r>.meta.json    its record, rewritten for level N
//! ckpt-<id>/COMMITTED             the level committed this checkpoint on
//!                                 every node (written once the ranks agree)
//! ```
//!
//! A file is kept data first, then record (each atomically and durably),
//! so a file with a record is whole; a data file without one is a leftover.
//! Every record read back is checked against its place and its file before
//! use. Only the manager of the node writes here; ranks read during
//! recovery.

use super::commit::{self, Commit};
use super::fsio::{write_small, StorageError};
use super::names;
use super::stream::{Arriving, Pieces};
use super::Level;
use crate::format::{CheckpointFile, Metadata};
use crate::safefs::{Dir, Kind};
use crate::topology::Layout;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// A sound copy found in a level directory.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Held {
    /// Checkpoint id.
    pub id: u64,
    /// Rank whose data it is.
    pub rank: u32,
    /// The checkpoint's stamp.
    pub stamp: u64,
}

/// One node's directory of copies at level 2 or 3.
pub struct CopyStore {
    level: Level,
    job_id: String,
    root: Dir,
}

/// The directory name of `level` under a job's directory.
pub(crate) fn level_dir(level: Level) -> String {
    format!("l{}", level.number())
}

impl CopyStore {
    /// Opens (creating if needed) the level directory of `job_id` under
    /// `local_dir`. `who` numbers the crash points of its operations.
    pub fn open(
        local_dir: &Path,
        job_id: &str,
        level: Level,
        who: u32,
    ) -> Result<Self, StorageError> {
        let base = Dir::open_or_create(local_dir)?.counted_as(who);
        let root = base.sub(job_id, true)?.sub(&level_dir(level), true)?;
        Ok(Self {
            level,
            job_id: job_id.to_string(),
            root,
        })
    }

    /// Opens the level directory if it exists (for readers: nothing is created).
    pub fn open_existing(
        local_dir: &Path,
        job_id: &str,
        level: Level,
    ) -> Result<Option<Self>, StorageError> {
        if !local_dir.exists() {
            return Ok(None);
        }
        let base = Dir::open(local_dir)?;
        let Some(job) = base.try_sub(job_id)? else {
            return Ok(None);
        };
        let Some(root) = job.try_sub(&level_dir(level))? else {
            return Ok(None);
        };
        Ok(Some(Self {
            level,
            job_id: job_id.to_string(),
            root,
        }))
    }

    /// The level directory.
    pub fn root(&self) -> &Path {
        self.root.path()
    }

    /// The directory of checkpoint `id` (created if `create`).
    pub(crate) fn checkpoint_dir(&self, id: u64, create: bool) -> Result<Dir, StorageError> {
        Ok(self.root.sub(&names::ckpt_dir(id), create)?)
    }

    /// The job id.
    pub(crate) fn job_id(&self) -> &str {
        &self.job_id
    }

    /// The level.
    pub fn level(&self) -> Level {
        self.level
    }

    fn record_for(&self, meta: &Metadata) -> Metadata {
        let mut m = meta.clone();
        m.level = self.level.number();
        m
    }

    /// Starts keeping a copy of a rank's file, described by `meta`, whose
    /// bytes arrive in pieces (`IncomingCopy::write`): its record goes
    /// first (an earlier copy's record must never pair with new data), the
    /// data is written under a temporary name and checked on the way, and
    /// `IncomingCopy::finish` names it and writes the record.
    pub fn begin_put(&self, meta: &Metadata) -> Result<IncomingCopy, StorageError> {
        let ckpt = self.root.sub(&names::ckpt_dir(meta.checkpoint_id), true)?;
        let (data, record) = (names::data_file(meta.rank), names::record_file(meta.rank));
        ckpt.remove_file(&record)?;
        let arriving = Arriving::begin(&ckpt, &data, meta.file_len, &meta.rank.to_string())?;
        Ok(IncomingCopy {
            ckpt,
            arriving,
            record: self.record_for(meta),
            level: self.level,
        })
    }

    /// Keeps a node's own rank file at this level without copying it: a
    /// second name (hard link) of the file `meta` describes in `from`
    /// (the staged level-1 file, which nothing rewrites once it has other
    /// names), then its record.
    pub fn link_from(&self, from: &Dir, meta: &Metadata) -> Result<(), StorageError> {
        let ckpt = self.root.sub(&names::ckpt_dir(meta.checkpoint_id), true)?;
        let (data, record) = (names::data_file(meta.rank), names::record_file(meta.rank));
        ckpt.remove_file(&record)?;
        ckpt.remove_file(&data)?;
        from.link(&data, &ckpt, &data)?;
        ckpt.sync()?;
        let tag = format!("l{}", self.level.number());
        write_small(&ckpt, &record, &self.record_for(meta).to_json(), &tag)?;
        Ok(())
    }

    /// Every sound copy here (record and file header checked), with the
    /// problems of the others as `(id, reason)`.
    pub fn scan(&self, world_size: u32) -> (Vec<Held>, Vec<(u64, String)>) {
        let (mut held, mut bad) = (Vec::new(), Vec::new());
        let entries = match self.root.entries() {
            Ok(e) => e,
            Err(e) => return (held, vec![(0, e.to_string())]),
        };
        for (name, kind) in entries {
            let Some(id) = names::parse_ckpt_dir(&name) else {
                continue;
            };
            if kind != Kind::Dir {
                continue;
            }
            let Ok(ckpt) = self.root.sub(&name, false) else {
                continue;
            };
            for (file, _) in ckpt.entries().unwrap_or_default() {
                let Some(names::RankFile::Record(rank)) = names::parse_rank_file(&file) else {
                    continue;
                };
                match self.open_in(&ckpt, id, rank, world_size) {
                    Ok((_, meta)) => held.push(Held {
                        id,
                        rank,
                        stamp: meta.stamp,
                    }),
                    Err(e) => bad.push((id, e.to_string())),
                }
            }
        }
        (held, bad)
    }

    fn open_in(
        &self,
        ckpt: &Dir,
        id: u64,
        rank: u32,
        world_size: u32,
    ) -> Result<(CheckpointFile, Metadata), StorageError> {
        super::l1::open_rank_file(ckpt, &self.job_id, id, rank, self.level, world_size)
    }

    /// Opens `rank`'s copy of checkpoint `id` for reading in pieces (its
    /// record and header checked; its chunks are checked by whoever
    /// receives the pieces), with its record turned back into a level-1
    /// record.
    pub fn open_copy(
        &self,
        id: u64,
        rank: u32,
        world_size: u32,
    ) -> Result<(Metadata, Pieces), StorageError> {
        let ckpt = self.root.sub(&names::ckpt_dir(id), false)?;
        let (_, mut meta) = self.open_in(&ckpt, id, rank, world_size)?;
        let pieces = Pieces::open(&ckpt, &names::data_file(rank), meta.file_len)?;
        meta.level = Level::L1.number();
        Ok((meta, pieces))
    }

    /// Checks `rank`'s copy of checkpoint `id` whole, chunk by chunk.
    pub fn verify(&self, id: u64, rank: u32, world_size: u32) -> Result<(), StorageError> {
        let ckpt = self.root.sub(&names::ckpt_dir(id), false)?;
        let (file, _) = self.open_in(&ckpt, id, rank, world_size)?;
        match file.verify().into_iter().next() {
            Some(problem) => Err(problem.into()),
            None => Ok(()),
        }
    }

    /// Records that checkpoint `id` is committed at this level.
    pub fn mark_committed(
        &self,
        id: u64,
        stamp: u64,
        layout: Option<Layout>,
    ) -> Result<(), StorageError> {
        commit::mark_level(&self.root, &self.job_id, self.level, (id, stamp), layout)
    }

    /// Ids of the checkpoints marked committed here, ascending.
    pub fn committed(&self) -> Vec<u64> {
        commit::committed(&self.root, &self.job_id)
    }

    /// The sound commit markers here, by ascending checkpoint id.
    pub fn commits(&self) -> Vec<Commit> {
        commit::commits(&self.root, &self.job_id, self.level)
    }

    /// Ids of every checkpoint directory here, ascending.
    pub fn ids(&self) -> Vec<u64> {
        commit::ids(&self.root)
    }

    /// Removes every checkpoint older than the oldest of the newest
    /// `keep_last` committed ones (nothing while fewer are committed).
    pub fn retain(&self, keep_last: usize) -> Result<(), StorageError> {
        match commit::oldest_kept(&self.committed(), keep_last) {
            Some(oldest) => self.retire_below(oldest),
            None => Ok(()),
        }
    }

    /// Removes every checkpoint older than `id`, committed or not (a commit
    /// at another level retired them: `retention.levels`).
    pub fn retire_below(&self, id: u64) -> Result<(), StorageError> {
        for old in self.ids().into_iter().filter(|old| *old < id) {
            self.remove(old)?;
        }
        Ok(())
    }

    /// Removes checkpoint `id` here: marker and records first, then data.
    pub fn remove(&self, id: u64) -> Result<(), StorageError> {
        let name = names::ckpt_dir(id);
        let Some(ckpt) = self.root.try_sub(&name)? else {
            return Ok(());
        };
        ckpt.remove_file(commit::COMMITTED)?;
        // The group manifest first: without it the parity is unusable.
        ckpt.remove_file(super::erasure::MANIFEST)?;
        let files = ckpt.entries()?;
        let mut order: Vec<&String> = files.iter().map(|(n, _)| n).collect();
        // Records before data, so no record is left without its file.
        order.sort_by_key(|n| !n.ends_with(".meta.json"));
        for file in order {
            let ours = names::parse_rank_file(file).is_some()
                || names::is_temporary(file)
                || super::erasure::is_parity_file(file);
            if ours {
                ckpt.remove_file(file)?;
            }
        }
        drop(ckpt);
        self.root.remove_dir_if_empty(&name);
        Ok(())
    }

    /// Removes every checkpoint here, then the directory if it is empty.
    pub fn remove_all(self) -> Result<(), StorageError> {
        for id in self.ids() {
            self.remove(id)?;
        }
        Ok(())
    }
}

/// A copy being received (see [`CopyStore::begin_put`]).
pub struct IncomingCopy {
    ckpt: Dir,
    arriving: Arriving,
    record: Metadata,
    level: Level,
}

impl IncomingCopy {
    /// Checks and writes the next piece of the file.
    pub fn write(&mut self, piece: &[u8]) -> Result<(), StorageError> {
        self.arriving.write(piece)
    }

    /// Ends the copy: the file must be whole, sound and the one its record
    /// describes; then it is named, and its record written.
    pub fn finish(self) -> Result<(), StorageError> {
        let m = &self.record;
        let path = self.ckpt.join(&names::data_file(m.rank));
        self.arriving.finish(|h| {
            if (h.checkpoint_id, h.rank, h.stamp) == (m.checkpoint_id, m.rank, m.stamp) {
                Ok(())
            } else {
                Err(crate::format::FormatError::new(
                    &path,
                    crate::format::FormatErrorKind::Metadata(format!(
                        "the file received is checkpoint {} of rank {}, its record says checkpoint {} of rank {}",
                        h.checkpoint_id, h.rank, m.checkpoint_id, m.rank
                    )),
                )
                .into())
            }
        })?;
        let tag = format!("l{}", self.level.number());
        write_small(&self.ckpt, &names::record_file(m.rank), &m.to_json(), &tag)?;
        Ok(())
    }
}
