//! The reading side of level 1: what a rank holds, and opening a checkpoint
//! after checking that its record and file belong where they were found.

use super::super::{Held, Inventory};
use super::{L1Store, Pointer};
use crate::format::{CheckpointFile, Metadata, Place, MAX_RECORD};
use crate::level::fsio::StorageError;
use crate::level::names::{self, POINTER};
use crate::level::stream::Pieces;
use crate::level::Level;
use crate::safefs::{Dir, Kind};

impl L1Store {
    /// What this rank holds: every checkpoint whose file and record are
    /// present, consistent and in their place (valid), whose record is
    /// present but something is wrong (damaged), or whose data file lies
    /// there without a record (incomplete: an interrupted write or removal).
    /// Only headers are read. Leftover temporary files of this rank are
    /// removed on the way. The node's `LATEST` pointer is the rank's
    /// evidence of a committed checkpoint (`Inventory::committed`); a
    /// pointer that cannot be read counts as damage (it blocks a fresh
    /// start, never a restore).
    pub fn inventory(&mut self) -> Inventory {
        let mut inv = Inventory::default();
        self.read_pointer(&mut inv);
        let entries = match self.root.entries() {
            Ok(e) => e,
            Err(e) => {
                inv.damaged.push((0, e.to_string()));
                return inv;
            }
        };
        for (name, kind) in entries {
            let Some(id) = names::parse_ckpt_dir(&name) else {
                continue;
            };
            let path = self.root.join(&name);
            if kind != Kind::Dir {
                let what = match kind {
                    Kind::Symlink => {
                        "a symbolic link (frame never follows links it did not create)"
                    }
                    _ => "not a directory",
                };
                inv.damaged
                    .push((id, format!("{} is {what}", path.display())));
                continue;
            }
            match self.root.sub(&name, false) {
                Ok(ckpt) => self.classify(id, &ckpt, &mut inv),
                Err(e) => inv.damaged.push((id, e.to_string())),
            }
        }
        inv
    }

    /// Records what the node's `LATEST` pointer says in `inv`.
    fn read_pointer(&self, inv: &mut Inventory) {
        let path = self.root.join(POINTER);
        let bad = match self.root.kind(POINTER) {
            None => return,
            Some(Kind::File) => match self.root.read_capped(POINTER, super::MAX_POINTER) {
                Ok(bytes) => match serde_json::from_slice::<Pointer>(&bytes) {
                    Ok(p) if p.job_id == self.owner.job_id => {
                        inv.committed = p.checkpoint_id;
                        return;
                    }
                    Ok(p) => format!("names job `{}`", p.job_id),
                    Err(e) => format!("is unreadable ({e})"),
                },
                Err(e) => e.to_string(),
            },
            Some(Kind::Symlink) => {
                "is a symbolic link (frame never follows links it did not create)".into()
            }
            Some(_) => "is not a regular file".into(),
        };
        inv.damaged.push((
            0,
            format!(
                "the pointer to the newest committed checkpoint {} {bad}",
                path.display()
            ),
        ));
    }

    /// Adds this rank's state in checkpoint directory `ckpt` to `inv`.
    fn classify(&self, id: u64, ckpt: &Dir, inv: &mut Inventory) {
        let rank = self.owner.rank;
        let record = names::record_file(rank);
        let data = names::data_file(rank);
        if let Err(e) = ckpt.remove_file(&names::temporary(&record, rank)) {
            tracing::warn!(error = %e, "cannot remove a leftover temporary record");
        }
        match (ckpt.kind(&record), ckpt.kind(&data)) {
            (None, None) => {}
            (None, Some(Kind::File)) => inv.incomplete.push((
                id,
                format!(
                    "{} has no record (its write or removal was interrupted)",
                    ckpt.join(&data).display()
                ),
            )),
            (None, Some(_)) => inv.damaged.push((
                id,
                format!("{} is not a regular file", ckpt.join(&data).display()),
            )),
            (Some(_), _) => match self.open_in(id, ckpt) {
                Ok((_, meta)) => inv.valid.push(Held {
                    id,
                    stamp: meta.stamp,
                }),
                Err(e) => inv.damaged.push((id, e.to_string())),
            },
        }
    }

    /// Opens checkpoint `id` after checking its record against its place and
    /// its file, and returns both.
    /// When this process wrote the file and still has it mapped, the load
    /// reads from that mapping (a survivor rolling back in place).
    pub fn open_checkpoint(&self, id: u64) -> Result<(CheckpointFile, Metadata), StorageError> {
        let ckpt = self.root.sub(&names::ckpt_dir(id), false)?;
        let (mut file, meta) = self.open_in(id, &ckpt)?;
        if let Some(map) = self.live.get(&id).and_then(|s| s.mapping(file.identity())) {
            file.use_mapping(map);
        }
        Ok((file, meta))
    }

    /// The sound checkpoints this node's directory keeps of another rank
    /// (one a failure moved off this node): (id, stamp), newest first.
    /// Only records and headers are read; nothing is removed.
    pub(crate) fn kept_of(&self, rank: u32) -> Vec<(u64, u64)> {
        let o = &self.owner;
        let Ok(entries) = self.root.entries() else {
            return Vec::new();
        };
        let mut kept: Vec<(u64, u64)> = entries
            .into_iter()
            .filter(|(_, kind)| *kind == Kind::Dir)
            .filter_map(|(name, _)| {
                let id = names::parse_ckpt_dir(&name)?;
                let ckpt = self.root.sub(&name, false).ok()?;
                ckpt.kind(&names::record_file(rank))?;
                let (_, meta) =
                    open_rank_file(&ckpt, &o.job_id, id, rank, Level::L1, o.world_size).ok()?;
                Some((id, meta.stamp))
            })
            .collect();
        kept.sort_unstable_by(|a, b| b.cmp(a));
        kept
    }

    /// Opens another rank's file of checkpoint `id` in this node's
    /// directory to send it to that rank, checked against its place.
    pub(crate) fn open_kept(&self, id: u64, rank: u32) -> Result<(Metadata, Pieces), StorageError> {
        let o = &self.owner;
        let ckpt = self.root.sub(&names::ckpt_dir(id), false)?;
        let (_, meta) = open_rank_file(&ckpt, &o.job_id, id, rank, Level::L1, o.world_size)?;
        let pieces = Pieces::open(&ckpt, &names::data_file(rank), meta.file_len)?;
        Ok((meta, pieces))
    }

    fn open_in(&self, id: u64, ckpt: &Dir) -> Result<(CheckpointFile, Metadata), StorageError> {
        let o = &self.owner;
        open_rank_file(ckpt, &o.job_id, id, o.rank, Level::L1, o.world_size)
    }
}

/// Opens `rank`'s file of checkpoint `id` in `ckpt`, a checkpoint directory
/// of `level`, after checking its record against that place (job, id,
/// rank, level, file name, world size) and against the file.
pub(crate) fn open_rank_file(
    ckpt: &Dir,
    job_id: &str,
    id: u64,
    rank: u32,
    level: Level,
    world_size: u32,
) -> Result<(CheckpointFile, Metadata), StorageError> {
    let record = names::record_file(rank);
    let data = names::data_file(rank);
    let record_path = ckpt.join(&record);
    let meta = Metadata::from_json(&ckpt.read_capped(&record, MAX_RECORD)?, &record_path)?;
    let place = Place {
        job_id,
        checkpoint_id: id,
        rank,
        level: level.number(),
        file: &data,
        world_size: Some(world_size),
    };
    meta.check_place(&place, &record_path)?;
    let file = CheckpointFile::from_file(ckpt.open_read(&data)?, ckpt.join(&data))?;
    meta.check_file(&file)?;
    Ok((file, meta))
}
