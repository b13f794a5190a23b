//! Level 1: checkpoints on node-local storage (RAM-disk or SSD).
//!
//! Layout under `<local_dir>/<job_id>/l1/` (every directory mode 0700):
//!
//! ```text
//! LATEST                          newest committed checkpoint id (JSON)
//! ckpt-<id, 20 digits>/
//!     rank-<rank, 6 digits>.fck        data file (docs/FORMAT.md)
//!     rank-<rank, 6 digits>.meta.json  metadata record
//! spare/rank-<rank>.<n>.fck       retired files kept for reuse
//! ```
//!
//! Writing a checkpoint ([`L1Store::write`]) fills a preallocated, mapped
//! spare file (so steady-state snapshots copy straight into page-cache pages
//! that already exist), syncs it, renames it into the checkpoint directory,
//! syncs the directory and writes the metadata record the same way. The
//! caller then makes sure every rank succeeded before [`L1Store::advance`]
//! moves `LATEST`, and that every rank advanced before [`L1Store::retain`]
//! retires checkpoints beyond the retention count. A
//! retired file is renamed back into `spare/` and reused; the checkpoint it
//! held stops being visible before its file is touched.

use super::fsio::{self, StorageError};
use super::slot::Slot;
use super::{Level, Owner};
use crate::format::{
    self, CheckpointFile, Compression, FormatError, FormatErrorKind, Metadata, RegionSource,
    WriteSpec,
};
use crate::recovery::Inventory;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// Spare files kept beyond this number are deleted instead.
const MAX_SPARES: usize = 2;

/// The mapped files of stores dropped in this process, by (directory, rank).
///
/// A rank that rolls back after a failure drops its checkpointer and makes a
/// new one a moment later. Keeping the files mapped in between spares the
/// unmapping on the way out (TLB shoot-downs: a large share of a survivor's
/// rollback time) and the page faults of the next checkpoint.
type Kept = (PathBuf, u32, Vec<Slot>, BTreeMap<u64, Slot>);
/// At most this many dropped stores keep their files mapped.
const MAX_KEPT: usize = 16;
static KEPT: std::sync::Mutex<Vec<Kept>> = std::sync::Mutex::new(Vec::new());

/// Contents of the `LATEST` pointer file.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Pointer {
    job_id: String,
    checkpoint_id: u64,
}

/// Options of one write.
#[derive(Clone, Copy, Debug)]
pub struct WriteOptions {
    /// Chunk size in bytes.
    pub chunk_size: usize,
    /// zstd level, or `None` for raw chunks.
    pub zstd_level: Option<i32>,
}

/// One rank's view of the node-local checkpoint directory of its job.
pub struct L1Store {
    owner: Owner,
    root: PathBuf,
    spares: Vec<Slot>,
    live: BTreeMap<u64, Slot>,
    committed: BTreeSet<u64>,
    next_spare: u64,
}

fn now_unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Parses `ckpt-<digits>` directory names.
pub(crate) fn parse_ckpt_dir(name: &str) -> Option<u64> {
    name.strip_prefix("ckpt-")
        .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|d| d.parse().ok())
}

impl L1Store {
    /// Opens (creating if needed) the level-1 directory of `owner`'s job under
    /// `local_dir`, and checks that it is writable.
    pub fn open(local_dir: &Path, owner: Owner) -> Result<Self, StorageError> {
        let root = local_dir.join(&owner.job_id).join("l1");
        fsio::private_dir(&root.join("spare"))?;
        fsio::check_writable(&root, &owner.rank.to_string())?;
        let mut store = Self {
            owner,
            root,
            spares: Vec::new(),
            live: BTreeMap::new(),
            committed: BTreeSet::new(),
            next_spare: 0,
        };
        store.adopt_kept();
        store.adopt_spares();
        Ok(store)
    }

    /// Takes back the mapped files a previous store of this rank left in
    /// this process, if they are still what the directory holds.
    fn adopt_kept(&mut self) {
        let kept = KEPT.lock().ok().and_then(|mut k| {
            let i = k
                .iter()
                .position(|(root, rank, ..)| *root == self.root && *rank == self.owner.rank)?;
            Some(k.swap_remove(i))
        });
        if let Some((_, _, spares, live)) = kept {
            self.spares = spares.into_iter().filter(Slot::still_there).collect();
            self.live = live.into_iter().filter(|(_, s)| s.still_there()).collect();
        }
    }

    /// The level-1 directory of the job.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Directory of checkpoint `id`.
    pub fn ckpt_dir(&self, id: u64) -> PathBuf {
        self.root.join(format!("ckpt-{id:020}"))
    }

    /// This rank's data file of checkpoint `id`.
    pub fn data_path(&self, id: u64) -> PathBuf {
        self.ckpt_dir(id)
            .join(format!("rank-{:06}.fck", self.owner.rank))
    }

    /// This rank's metadata record of checkpoint `id`.
    pub fn meta_path(&self, id: u64) -> PathBuf {
        self.ckpt_dir(id)
            .join(format!("rank-{:06}.meta.json", self.owner.rank))
    }

    fn pointer_path(&self) -> PathBuf {
        self.root.join("LATEST")
    }

    fn spare_prefix(&self) -> String {
        format!("rank-{:06}.", self.owner.rank)
    }

    /// Picks up spare files left by an earlier run of this rank.
    fn adopt_spares(&mut self) {
        let known: Vec<PathBuf> = self.spares.iter().map(|s| s.path.clone()).collect();
        let dir = self.root.join("spare");
        let prefix = self.spare_prefix();
        let Ok(entries) = fs::read_dir(&dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(n) = name
                .strip_prefix(&prefix)
                .and_then(|rest| rest.strip_suffix(".fck"))
                .and_then(|n| n.parse::<u64>().ok())
            else {
                continue;
            };
            self.next_spare = self.next_spare.max(n + 1);
            let path = entry.path();
            if known.contains(&path) {
                continue;
            }
            match Slot::open(&path) {
                Some(slot) if self.spares.len() < MAX_SPARES => self.spares.push(slot),
                _ => {
                    let _ = fs::remove_file(&path);
                }
            }
        }
    }

    fn new_spare_path(&mut self) -> PathBuf {
        let n = self.next_spare;
        self.next_spare += 1;
        self.root
            .join("spare")
            .join(format!("{}{n}.fck", self.spare_prefix()))
    }

    fn take_spare(&mut self) -> Result<Slot, StorageError> {
        if let Some(slot) = self.spares.pop() {
            return Ok(slot);
        }
        let path = self.new_spare_path();
        Slot::create(path)
    }

    /// Returns a slot to the spare pool (renaming its file into `spare/`).
    fn recycle(&mut self, mut slot: Slot) {
        if self.spares.len() >= MAX_SPARES {
            let _ = fs::remove_file(&slot.path);
            return;
        }
        if !slot.path.starts_with(self.root.join("spare")) {
            let to = self.new_spare_path();
            if fs::rename(&slot.path, &to).is_err() {
                let _ = fs::remove_file(&slot.path);
                return;
            }
            slot.path = to;
        }
        self.spares.push(slot);
    }

    /// Writes this rank's file and metadata record for checkpoint `id`
    /// durably into its checkpoint directory. The checkpoint is not committed
    /// until [`advance`](Self::advance). On error nothing of `id` is left behind.
    pub fn write(
        &mut self,
        id: u64,
        regions: &[RegionSource<'_>],
        opts: WriteOptions,
    ) -> Result<Metadata, StorageError> {
        let created = now_unix_ms();
        let job_id = self.owner.job_id.clone();
        let spec = WriteSpec {
            job_id: &job_id,
            checkpoint_id: id,
            rank: self.owner.rank,
            world_size: self.owner.world_size,
            chunk_size: opts.chunk_size,
            zstd_level: opts.zstd_level,
            created_unix_ms: created,
        };
        let layout =
            format::plan(&spec, regions).map_err(|k| FormatError::new(self.data_path(id), k))?;
        let mut slot = self.take_spare()?;
        match slot.fill(&spec, regions, &layout) {
            Ok(written) => {
                let meta = Metadata {
                    format_version: format::VERSION,
                    job_id: self.owner.job_id.clone(),
                    checkpoint_id: id,
                    level: Level::L1.number(),
                    rank: self.owner.rank,
                    world_size: self.owner.world_size,
                    node: self.owner.node,
                    file: format!("rank-{:06}.fck", self.owner.rank),
                    file_len: written.file_len,
                    header_crc: written.header_crc,
                    data_crc: written.data_crc,
                    raw_bytes: written.raw_bytes,
                    stored_bytes: written.stored_bytes,
                    compression: if opts.zstd_level.is_some() {
                        Compression::Zstd
                    } else {
                        Compression::None
                    },
                    regions: regions.iter().map(|r| r.info).collect(),
                    created_unix_ms: created,
                };
                match self.place(id, &mut slot, &meta) {
                    Ok(()) => {
                        self.live.insert(id, slot);
                        Ok(meta)
                    }
                    Err(e) => {
                        let _ = fsio::remove_if_present(&self.meta_path(id));
                        self.recycle(slot);
                        fsio::remove_dir_if_empty(&self.ckpt_dir(id));
                        Err(e)
                    }
                }
            }
            Err(e) => {
                self.recycle(slot);
                Err(e)
            }
        }
    }

    /// Moves a filled slot into checkpoint `id`'s directory and writes its record.
    fn place(&mut self, id: u64, slot: &mut Slot, meta: &Metadata) -> Result<(), StorageError> {
        let dir = self.ckpt_dir(id);
        match std::fs::DirBuilder::new().mode_0700().create(&dir) {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => {
                return Err(StorageError::Dir {
                    path: dir,
                    source: e,
                })
            }
            _ => {}
        }
        let data = self.data_path(id);
        fs::rename(&slot.path, &data).map_err(|e| StorageError::io("rename", &data, 0, e))?;
        slot.path = data;
        fsio::sync_dir(&dir)?;
        let tag = self.owner.rank.to_string();
        fsio::write_atomic(&self.meta_path(id), &meta.to_json(), &tag)
    }

    /// Marks checkpoint `id` committed on this node (every rank has written
    /// it) by advancing `LATEST`.
    pub fn advance(&mut self, id: u64) -> Result<(), StorageError> {
        let pointer = Pointer {
            job_id: self.owner.job_id.clone(),
            checkpoint_id: id,
        };
        let bytes = serde_json::to_vec(&pointer).unwrap_or_default();
        fsio::write_atomic(&self.pointer_path(), &bytes, &self.owner.rank.to_string())?;
        self.committed.insert(id);
        Ok(())
    }

    /// Retires this rank's committed checkpoints beyond the newest `keep_last`.
    /// Call only once every rank has advanced past them.
    pub fn retain(&mut self, keep_last: usize) -> Result<(), StorageError> {
        while self.committed.len() > keep_last.max(1) {
            let Some(oldest) = self.committed.pop_first() else {
                break;
            };
            self.retire(oldest)?;
        }
        Ok(())
    }

    /// Removes this rank's copy of checkpoint `id` after a failed write
    /// elsewhere (the checkpoint never committed).
    pub fn abort(&mut self, id: u64) -> Result<(), StorageError> {
        self.committed.remove(&id);
        self.retire(id)
    }

    /// Makes checkpoint `id` invisible (its record goes first), then recycles
    /// its data file.
    fn retire(&mut self, id: u64) -> Result<(), StorageError> {
        fsio::remove_if_present(&self.meta_path(id))?;
        let data = self.data_path(id);
        let slot = self.live.remove(&id).or_else(|| Slot::open(&data));
        if let Some(slot) = slot {
            self.recycle(slot);
        }
        fsio::remove_if_present(&data)?;
        fsio::remove_dir_if_empty(&self.ckpt_dir(id));
        Ok(())
    }

    /// What `LATEST` says: `Some(Some(id))` when readable, `Some(None)` when
    /// absent (nothing ever committed here), `None` when unreadable.
    fn latest(&self) -> Option<Option<u64>> {
        let path = self.pointer_path();
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Some(None),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot read LATEST; trusting the checkpoint records");
                return None;
            }
        };
        match serde_json::from_slice::<Pointer>(&bytes) {
            Ok(p) if p.job_id == self.owner.job_id => Some(Some(p.checkpoint_id)),
            Ok(p) => {
                tracing::warn!(path = %path.display(), job = %p.job_id, "LATEST names another job; trusting the checkpoint records");
                None
            }
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "unreadable LATEST; trusting the checkpoint records");
                None
            }
        }
    }

    /// Ids of checkpoint directories that hold a file or record of this rank.
    fn own_ids(&self) -> Vec<u64> {
        let Ok(entries) = fs::read_dir(&self.root) else {
            return Vec::new();
        };
        let mut ids: Vec<u64> = entries
            .flatten()
            .filter_map(|e| parse_ckpt_dir(&e.file_name().to_string_lossy()))
            .filter(|id| self.data_path(*id).exists() || self.meta_path(*id).exists())
            .collect();
        ids.sort_unstable();
        ids
    }

    /// Opens checkpoint `id` and checks it against its record and this rank.
    pub fn open_checkpoint(&self, id: u64) -> Result<CheckpointFile, StorageError> {
        let meta_path = self.meta_path(id);
        let meta = Metadata::read(&meta_path)?;
        let mismatch = |what: String| {
            StorageError::Format(FormatError::new(
                &meta_path,
                FormatErrorKind::Metadata(what),
            ))
        };
        if meta.job_id != self.owner.job_id {
            return Err(mismatch(format!(
                "belongs to job `{}`, not `{}`",
                meta.job_id, self.owner.job_id
            )));
        }
        if meta.rank != self.owner.rank {
            return Err(mismatch(format!(
                "written by rank {}, not {}",
                meta.rank, self.owner.rank
            )));
        }
        if meta.world_size != self.owner.world_size {
            return Err(mismatch(format!(
                "written by a job of {} ranks, this run has {}",
                meta.world_size, self.owner.world_size
            )));
        }
        let file = CheckpointFile::open(self.data_path(id))?;
        meta.check_file(&file)?;
        Ok(file)
    }

    /// What this rank can restore: every committed checkpoint whose file and
    /// record are present and consistent. Only headers are read.
    ///
    /// A checkpoint is committed when `LATEST` is at or past its id; without
    /// a `LATEST` nothing ever committed on this node. If `LATEST` itself is
    /// unreadable, every complete checkpoint counts as committed.
    pub fn inventory(&mut self) -> Inventory {
        let latest = self.latest();
        let mut inv = Inventory::default();
        for id in self.own_ids() {
            let committed = match latest {
                Some(Some(l)) => id <= l,
                Some(None) => false,
                None => true,
            };
            match (self.open_checkpoint(id), committed) {
                (_, false) => inv.uncommitted.push(id),
                (Ok(_), true) => inv.valid.push(id),
                (Err(e), true) => inv.invalid.push((id, e.to_string())),
            }
        }
        // Damaged checkpoints age out through retention like the others.
        self.committed = inv
            .valid
            .iter()
            .copied()
            .chain(inv.invalid.iter().map(|(id, _)| *id))
            .collect();
        inv
    }

    /// Removes this rank's checkpoints newer than `id` (0 removes them all):
    /// after recovery they can never be restored consistently.
    pub fn discard_newer(&mut self, id: u64) -> Result<(), StorageError> {
        for newer in self.own_ids().into_iter().filter(|i| *i > id) {
            self.committed.remove(&newer);
            self.retire(newer)?;
        }
        Ok(())
    }

    /// Removes every file of this rank (checkpoints and spares), then the
    /// job's directories if nothing else is left in them.
    pub fn remove_all(&mut self) -> Result<(), StorageError> {
        self.discard_newer(0)?;
        self.live.clear();
        for slot in self.spares.drain(..) {
            let _ = fs::remove_file(&slot.path);
        }
        let _ = fsio::remove_if_present(&self.pointer_path());
        fsio::remove_dir_if_empty(&self.root.join("spare"));
        fsio::remove_dir_if_empty(&self.root);
        if let Some(job_dir) = self.root.parent() {
            fsio::remove_dir_if_empty(job_dir);
        }
        Ok(())
    }
}

impl Drop for L1Store {
    fn drop(&mut self) {
        let spares = std::mem::take(&mut self.spares);
        let live = std::mem::take(&mut self.live);
        if spares.is_empty() && live.is_empty() {
            return;
        }
        if let Ok(mut kept) = KEPT.lock() {
            kept.retain(|(root, rank, ..)| !(*root == self.root && *rank == self.owner.rank));
            if kept.len() >= MAX_KEPT {
                kept.remove(0);
            }
            kept.push((self.root.clone(), self.owner.rank, spares, live));
        }
    }
}

/// `DirBuilder` with mode 0700, non-recursive.
trait PrivateMode {
    fn mode_0700(&mut self) -> &mut Self;
}

impl PrivateMode for std::fs::DirBuilder {
    fn mode_0700(&mut self) -> &mut Self {
        std::os::unix::fs::DirBuilderExt::mode(self, 0o700)
    }
}
