//! Level 1: checkpoints on node-local storage (RAM-disk or SSD).
//!
//! Under `<local_dir>/<job_id>/l1/` (layout in `super::names`;
//! every directory mode 0700, every file 0600, all reached through checked
//! directory handles without following links):
//!
//! Writing a checkpoint ([`L1Store::write`]) fills a preallocated, mapped
//! spare file (so steady-state snapshots copy straight into page-cache pages
//! that already exist), syncs it, renames it into the checkpoint directory,
//! syncs the directory and writes the metadata record the same way. Once
//! every rank wrote its copy, [`L1Store::advance`] updates the node's
//! `LATEST` pointer (a hint for tools: recovery never depends on it), and
//! once every rank advanced, [`L1Store::retain`] retires the checkpoints
//! beyond the retention count: record first, then data file (renamed back
//! into `spare/` for reuse).
//!
//! A retired file a higher level still names (level 2 keeps a node's own
//! copy as a hard link of the staged level-1 file) is *lent*: it waits in
//! `spare/`, still mapped, and is never written while it has another name.
//! Once that level lets its copy go, the file is this rank's spare again,
//! and the next checkpoint fills it through the mapping it kept, as it
//! would with any reused file (instead of a new file every time levels
//! above 1 are due).
//!
//! A checkpoint of files that stays on its node also holds the program's
//! files beside the data file, as written, sealed and removed off the
//! program's path (`held.rs`, `background.rs`).
//!
//! At every step of that protocol, a checkpoint is either held soundly by a
//! rank or visibly incomplete there (a data file without its record), so a
//! kill at any point leaves checkpoints that recovery can restore, or
//! leftovers it ignores. A rank's lock file keeps a second process from using
//! the same rank's files.

mod background;
mod files;
mod held;
mod read;
mod retire;

pub(crate) use held::{check_held, remove_held, Checked, HeldError};

pub(crate) use read::open_rank_file;

use super::fsio::{write_small, StorageError};
use super::names::{self, L1_DIR, POINTER, SPARE};
use super::slot::Slot;
use super::stream::PieceSource;
use super::{Level, Owner};
use crate::format::{
    self, Compression, FormatError, FormatErrorKind, Metadata, RegionSource, StreamCheck, Target,
    WriteSpec,
};
use crate::safefs::{Dir, Lock};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Spare files kept beyond this number are deleted instead (when no higher
/// level names this rank's files). One is enough: a checkpoint is written
/// into it, and the checkpoint retention retires then becomes the next
/// spare, so a rank never holds more than `keep_last + 1` files of its own
/// (docs/STORAGE.md). Each copy a higher level keeps as a link adds one:
/// the storage formula counts those copies already, lent or returned.
const MAX_SPARES: usize = 1;

/// The mapped files of stores dropped in this process, by (directory, rank).
///
/// A rank that rolls back after a failure drops its checkpointer and makes a
/// new one a moment later. Keeping the files mapped in between spares the
/// unmapping on the way out (TLB shoot-downs: a large share of a survivor's
/// rollback time) and the page faults of the next checkpoint.
type Kept = ((u64, u64), u32, Vec<Slot>, BTreeMap<u64, Slot>);
/// At most this many dropped stores keep their files mapped.
const MAX_KEPT: usize = 16;
static KEPT: std::sync::Mutex<Vec<Kept>> = std::sync::Mutex::new(Vec::new());

/// Largest `LATEST` pointer read (it holds a job id and a number), by the
/// store and by the catalog alike.
pub(crate) const MAX_POINTER: u64 = 4096;

/// Contents of the `LATEST` pointer file.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Pointer {
    pub(crate) job_id: String,
    pub(crate) checkpoint_id: u64,
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
    base: Dir,
    job: Dir,
    root: Dir,
    spare: Dir,
    _lock: Lock,
    /// Files in `spare/`: free ones, and lent ones a higher level also
    /// names (see the module documentation).
    spares: Vec<Slot>,
    /// How many files `spare/` may hold, lent ones included.
    spare_limit: usize,
    live: BTreeMap<u64, Slot>,
    /// Checkpoints known to be held by every rank, oldest first.
    committed: BTreeSet<u64>,
    next_spare: u64,
    /// Sealing and removing held files (`held.rs`), off the program's path.
    background: background::Background,
}

fn now_unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl L1Store {
    /// Opens (creating if needed) the level-1 directory of `owner`'s job under
    /// `local_dir`, takes the rank's lock, and checks that files can be
    /// created there.
    pub fn open(local_dir: &Path, owner: Owner) -> Result<Self, StorageError> {
        let rank = owner.rank;
        let base = Dir::open_or_create(local_dir)?.counted_as(rank);
        let job = base.sub(&owner.job_id, true)?;
        let root = job.sub(L1_DIR, true)?;
        let what = format!(
            "rank {rank} of job `{}` is running in another process (two jobs with one job id \
             cannot share a directory)",
            owner.job_id
        );
        let lock = root.lock(&names::lock_file(rank), &what)?;
        let spare = root.sub(SPARE, true)?;
        let probe = names::probe_file(rank);
        drop(root.create_replacing(&probe)?);
        root.remove_file(&probe)?;
        root.remove_file(&names::temporary(POINTER, rank))?;
        let mut store = Self {
            owner,
            base,
            job,
            root,
            spare,
            _lock: lock,
            spares: Vec::new(),
            spare_limit: MAX_SPARES,
            live: BTreeMap::new(),
            committed: BTreeSet::new(),
            next_spare: 0,
            background: Default::default(),
        };
        store.adopt_kept();
        store.adopt_spares()?;
        Ok(store)
    }

    /// Takes back the mapped files a previous store of this rank left in
    /// this process, if they are still what the directory holds.
    fn adopt_kept(&mut self) {
        let key = self.root.identity();
        let kept = KEPT.lock().ok().and_then(|mut k| {
            // Files removed since (a finished or cleaned job) only hold memory.
            k.retain(|(_, _, spares, live)| {
                spares.iter().chain(live.values()).any(Slot::still_at_path)
            });
            let i = k
                .iter()
                .position(|(dir, rank, ..)| *dir == key && *rank == self.owner.rank)?;
            Some(k.swap_remove(i))
        });
        if let Some((_, _, spares, live)) = kept {
            self.spares = spares
                .into_iter()
                .filter(|s| s.still_in(&self.spare))
                .collect();
            for (id, slot) in live {
                let present = self
                    .root
                    .try_sub(&names::ckpt_dir(id))
                    .ok()
                    .flatten()
                    .is_some_and(|d| slot.still_in(&d));
                if present {
                    self.live.insert(id, slot);
                }
            }
        }
    }

    /// The level-1 directory of the job.
    pub fn root(&self) -> &Path {
        self.root.path()
    }

    /// This rank's data file of checkpoint `id` (for messages).
    pub fn data_path(&self, id: u64) -> std::path::PathBuf {
        self.root
            .join(&names::ckpt_dir(id))
            .join(names::data_file(self.owner.rank))
    }

    /// Picks up spare files left by an earlier run of this rank.
    fn adopt_spares(&mut self) -> Result<(), StorageError> {
        let prefix = names::spare_prefix(self.owner.rank);
        for (name, _) in self.spare.entries()? {
            let Some(n) = name
                .strip_prefix(&prefix)
                .and_then(|rest| rest.strip_suffix(".fck"))
                .and_then(|n| n.parse::<u64>().ok())
            else {
                continue;
            };
            self.next_spare = self.next_spare.max(n + 1);
            if self.spares.iter().any(|s| s.name == name) {
                continue;
            }
            match Slot::adopt(&self.spare, &name, None, self.owner.rank) {
                Some(slot) => self.spares.push(slot),
                None => self.spare.remove_file(&name)?,
            }
        }
        self.trim_spares()
    }

    /// Tells the store how many copies of each rank file higher levels
    /// keep as links of level-1 files (`l2.keep_last` and `l3.keep_last` of
    /// the levels that are on): as many retired files may wait in `spare/`
    /// for those levels to let them go, besides the one free spare.
    pub(crate) fn lend_to_levels(&mut self, copies: usize) -> Result<(), StorageError> {
        self.spare_limit = MAX_SPARES + copies;
        self.trim_spares()
    }

    /// Deletes free spares while `spare/` holds more than the limit (lent
    /// ones stay: their storage belongs to the level that also names them).
    fn trim_spares(&mut self) -> Result<(), StorageError> {
        while self.spares.len() > self.spare_limit {
            let Some(i) = self.spares.iter().position(|s| !s.shared()) else {
                break;
            };
            let slot = self.spares.remove(i);
            self.spare.remove_file(&slot.name)?;
        }
        Ok(())
    }

    fn new_spare_name(&mut self) -> String {
        let n = self.next_spare;
        self.next_spare += 1;
        format!("{}{n}.fck", names::spare_prefix(self.owner.rank))
    }

    /// A spare no other level names, the most recently returned first
    /// (the one most likely mapped already), or a new file.
    fn take_spare(&mut self) -> Result<Slot, StorageError> {
        // A lent file stays lent while another name exists: writing it
        // would change that level's copy.
        if let Some(i) = self.spares.iter().rposition(|s| !s.shared()) {
            return Ok(self.spares.remove(i));
        }
        let name = self.new_spare_name();
        Slot::create(&self.spare, &name, self.owner.rank)
    }

    /// Returns a slot that lies in `from` to the spare pool (or removes its
    /// name there when the pool is full). A file a higher level also names
    /// is lent: it is written again only once that level let it go.
    fn recycle(&mut self, mut slot: Slot, from: &Dir) -> Result<(), StorageError> {
        if slot.at.is_none() {
            self.spares.push(slot);
            return Ok(());
        }
        if self.spares.len() >= self.spare_limit {
            return Ok(from.remove_file(&slot.name)?);
        }
        let to = self.new_spare_name();
        from.rename(&slot.name, &self.spare, &to)?;
        slot.moved(&self.spare, &to, None);
        self.spares.push(slot);
        Ok(())
    }

    /// Writes this rank's file and metadata record for checkpoint `id`, with
    /// the checkpoint's `stamp`, durably into its checkpoint directory. The
    /// checkpoint is restorable once every rank did so. On error nothing of
    /// `id` is left behind.
    pub fn write(
        &mut self,
        id: u64,
        stamp: u64,
        regions: &[RegionSource<'_>],
        opts: WriteOptions,
    ) -> Result<Metadata, StorageError> {
        self.background.wait_for(id);
        let created = now_unix_ms();
        let job_id = self.owner.job_id.clone();
        let spec = WriteSpec {
            job_id: &job_id,
            checkpoint_id: id,
            rank: self.owner.rank,
            world_size: self.owner.world_size,
            node: self.owner.node,
            stamp,
            chunk_size: opts.chunk_size,
            zstd_level: opts.zstd_level,
            created_unix_ms: created,
        };
        let layout =
            format::plan(&spec, regions).map_err(|k| FormatError::new(self.data_path(id), k))?;
        let mut slot = self.take_spare()?;
        let written = match slot.fill(&spec, regions, &layout) {
            Ok(w) => w,
            Err(e) => {
                self.spares.push(slot);
                return Err(e);
            }
        };
        let meta = Metadata {
            format_version: format::VERSION,
            job_id,
            checkpoint_id: id,
            level: Level::L1.number(),
            rank: self.owner.rank,
            world_size: self.owner.world_size,
            node: self.owner.node,
            stamp,
            file: names::data_file(self.owner.rank),
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
        self.settle(id, slot, &meta)?;
        Ok(meta)
    }

    /// Moves a filled slot into checkpoint `id`'s directory with its record
    /// `meta`; on failure nothing of it is left there.
    fn settle(&mut self, id: u64, mut slot: Slot, meta: &Metadata) -> Result<(), StorageError> {
        let dir_name = names::ckpt_dir(id);
        let ckpt = match self.root.sub(&dir_name, true) {
            Ok(d) => d,
            Err(e) => {
                self.spares.push(slot);
                return Err(e.into());
            }
        };
        match self.place(id, &ckpt, &mut slot, meta) {
            Ok(()) => {
                self.live.insert(id, slot);
                Ok(())
            }
            Err(e) => {
                let _ = ckpt.remove_file(&names::record_file(self.owner.rank));
                if let Err(e) = self.recycle(slot, &ckpt) {
                    tracing::warn!(error = %e, "could not recycle an abandoned checkpoint file");
                }
                drop(ckpt);
                self.root.remove_dir_if_empty(&dir_name);
                Err(e)
            }
        }
    }

    /// Puts back this rank's file of checkpoint `meta.checkpoint_id`, fetched
    /// from a higher level (its pieces given by `source`; described by the
    /// level-1 record `meta`), as a level-1 checkpoint.
    /// Every chunk is checked as it arrives, so that a copy damaged at its
    /// level (or decoded from damaged parity) is refused and recovery tries
    /// the next level instead of failing to load; then the file is made
    /// durable, then visible. Recovery then loads it like any other. No
    /// more than a piece of the file is in memory at a time.
    pub(crate) fn install_from<S: PieceSource>(
        &mut self,
        meta: &Metadata,
        source: &mut S,
    ) -> Result<(), S::Error> {
        self.install_loading(meta, source, Vec::new())
    }

    /// [`install_from`](Self::install_from), loading the file's regions
    /// into `targets` in the same pass (every chunk checked on the way). On
    /// an error the targets hold part of the file.
    pub(crate) fn install_loading<S: PieceSource>(
        &mut self,
        meta: &Metadata,
        source: &mut S,
        targets: Vec<Target<'_>>,
    ) -> Result<(), S::Error> {
        let id = meta.checkpoint_id;
        self.background.wait_for(id);
        let mut meta = meta.clone();
        meta.level = Level::L1.number();
        let check = StreamCheck::new(self.data_path(id), meta.file_len)
            .map_err(StorageError::from)?
            .loading(targets);
        let mut slot = self.take_spare()?;
        let header = match slot.fill_from(check, source) {
            Ok(h) => h,
            Err(e) => {
                self.spares.push(slot);
                return Err(e);
            }
        };
        if (header.checkpoint_id, header.rank, header.stamp) != (id, meta.rank, meta.stamp) {
            self.spares.push(slot);
            return Err(StorageError::from(FormatError::new(
                self.data_path(id),
                FormatErrorKind::Metadata(format!(
                    "the file fetched is checkpoint {} of rank {} (stamp {:#x}), its record says checkpoint {id} of rank {} (stamp {:#x})",
                    header.checkpoint_id, header.rank, header.stamp, meta.rank, meta.stamp
                )),
            ))
            .into());
        }
        // An earlier copy of this rank (damaged, or of another run) goes.
        self.live.remove(&id);
        self.settle(id, slot, &meta)?;
        // The record and the file written must agree (their contents were
        // checked above).
        if let Err(e) = self.open_checkpoint(id) {
            if let Err(r) = self.abort(id) {
                tracing::warn!(checkpoint = id, error = %r, "could not remove a damaged copy");
            }
            return Err(e.into());
        }
        Ok(())
    }

    /// Moves a filled slot into checkpoint `id`'s directory and writes its record.
    fn place(
        &mut self,
        id: u64,
        ckpt: &Dir,
        slot: &mut Slot,
        meta: &Metadata,
    ) -> Result<(), StorageError> {
        let rank = self.owner.rank;
        let record = names::record_file(rank);
        // A record of an earlier attempt at this id must not pair with the
        // new data, not even for an instant.
        ckpt.remove_file(&record)?;
        let data = names::data_file(rank);
        self.spare.rename(&slot.name, ckpt, &data)?;
        slot.moved(ckpt, &data, Some(id));
        ckpt.sync()?;
        write_small(ckpt, &record, &meta.to_json(), &rank.to_string())?;
        Ok(())
    }

    /// Records on this node that checkpoint `id` is held by every rank, by
    /// replacing the `LATEST` pointer (a hint for tools and people).
    pub fn advance(&mut self, id: u64) -> Result<(), StorageError> {
        let pointer = Pointer {
            job_id: self.owner.job_id.clone(),
            checkpoint_id: id,
        };
        let bytes = serde_json::to_vec(&pointer).unwrap_or_default();
        write_small(&self.root, POINTER, &bytes, &self.owner.rank.to_string())?;
        self.committed.insert(id);
        Ok(())
    }

    /// Tells the store which checkpoint every rank holds (after recovery).
    pub fn set_committed(&mut self, id: u64) {
        self.committed = [id].into_iter().collect();
    }
}

/// Releases the files that stores dropped in this process kept mapped for
/// a quick re-entry (see the module documentation).
pub fn release_kept_files() {
    if let Ok(mut kept) = KEPT.lock() {
        kept.clear();
    }
}

impl Drop for L1Store {
    fn drop(&mut self) {
        self.background.wait_all();
        let spares = std::mem::take(&mut self.spares);
        let live = std::mem::take(&mut self.live);
        if spares.is_empty() && live.is_empty() {
            return;
        }
        let key = self.root.identity();
        if let Ok(mut kept) = KEPT.lock() {
            kept.retain(|(dir, rank, ..)| !(*dir == key && *rank == self.owner.rank));
            if kept.len() >= MAX_KEPT {
                kept.remove(0);
            }
            kept.push((key, self.owner.rank, spares, live));
        }
    }
}
