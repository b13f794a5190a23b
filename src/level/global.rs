//! Level 4: checkpoints in the global (parallel) file system, written
//! differentially.
//!
//! Under `<global_dir>/<job_id>/l4/`:
//!
//! ```text
//! ckpt-<id>/rank-<r>.l4.json   a rank's manifest: its record and the chunks
//!                              that make up its file, in order
//! ckpt-<id>/COMMITTED          every rank's manifest is durable
//! chunks/rank-<r>/<hash>       a chunk of rank r's files (a full write),
//!                              named by the 128-bit BLAKE3 hash of its
//!                              content
//! chunks/rank-<r>/pack-<tag>   the blocks one differential write of rank r
//!                              added, one after the other
//! ```
//!
//! A full write cuts a rank's file into chunks, each a file named by its
//! hash. A differential write ([`L4Write::Differential`], `pack`) cuts it
//! into blocks, references the blocks the rank's previous checkpoint holds
//! and appends the others to one new pack. New chunks and packs are written
//! under a temporary name, synced and renamed; the manifest comes last, so
//! a manifest always names chunks that are durable. Each rank has its own
//! chunk directory, so removing a rank's unreferenced chunks never races
//! another node's writes.

mod chunks;
pub(crate) mod fence;
mod pack;

pub(crate) use chunks::Chunks;
pub(crate) use chunks::{ChunkReader, ChunkRef};
pub use fence::Fence;
pub use pack::L4Write;

use super::commit::{self, Commit, COMMITTED};
use super::copies::Held;
use super::fsio::{write_small, StorageError};
use super::names;
use super::stream::{PieceSource, Pieces};
use super::Level;
use crate::format::{FormatError, FormatErrorKind, Metadata, Place, MAX_RECORD};
use crate::safefs::{Dir, Kind};
use crate::topology::Layout;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, HashMap};
use std::path::Path;

/// The directory of level 4 under a job's directory.
pub(crate) const L4_DIR: &str = "l4";
const CHUNKS: &str = "chunks";
/// Superseded checkpoints kept with `l4.archive` (recovery never looks).
const ARCHIVE: &str = "archive";

/// What a rank's level-4 checkpoint is made of.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Manifest {
    /// The rank's record (level 4).
    pub record: Metadata,
    /// Its file, chunk by chunk.
    pub chunks: Vec<ChunkRef>,
    /// Differential writes since the last full layer (0: a full layer, or
    /// a full write).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub layer: u32,
    /// The run and epoch that wrote it (under a runtime).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fence: Option<Fence>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// What one write did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Written {
    /// Bytes written to new chunks.
    pub written: u64,
    /// Bytes referenced from existing chunks.
    pub referenced: u64,
}

/// The manifest file of `rank`.
pub(crate) fn manifest_file(rank: u32) -> String {
    format!("rank-{rank:06}.l4.json")
}

/// The rank of a manifest file's name.
pub(crate) fn parse_manifest_file(name: &str) -> Option<u32> {
    let digits = name.strip_prefix("rank-")?.strip_suffix(".l4.json")?;
    (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

fn chunk_dir(rank: u32) -> String {
    format!("rank-{rank:06}")
}

/// The directory of `rank`'s chunks under a job's level-4 directory
/// `level_dir` (for tools that read a directory by path).
pub(crate) fn rank_chunks(level_dir: &Path, rank: u32) -> std::path::PathBuf {
    level_dir.join(CHUNKS).join(chunk_dir(rank))
}

/// A job's level-4 directory.
pub struct GlobalStore {
    job_id: String,
    root: Dir,
}

impl GlobalStore {
    /// Opens (creating if needed) the level-4 directory of `job_id` under
    /// `global_dir`. `who` numbers the crash points.
    pub fn open(global_dir: &Path, job_id: &str, who: u32) -> Result<Self, StorageError> {
        let base = Dir::open_or_create(global_dir)?.counted_as(who);
        let root = base.sub(job_id, true)?.sub(L4_DIR, true)?;
        Ok(Self {
            job_id: job_id.to_string(),
            root,
        })
    }

    /// Checks, without creating anything, that level 4 can use
    /// `global_dir` for `job_id`: what exists of it must be safe (a
    /// directory of this user that no one else can write, not a link).
    pub fn check_usable(global_dir: &Path, job_id: &str) -> Result<(), StorageError> {
        if !global_dir.exists() {
            return Ok(());
        }
        let base = Dir::open(global_dir)?;
        if let Some(job) = base.try_sub(job_id)? {
            job.try_sub(L4_DIR)?;
        }
        Ok(())
    }

    /// Opens the level-4 directory if it exists.
    pub fn open_existing(global_dir: &Path, job_id: &str) -> Result<Option<Self>, StorageError> {
        if !global_dir.exists() {
            return Ok(None);
        }
        let Some(job) = Dir::open(global_dir)?.try_sub(job_id)? else {
            return Ok(None);
        };
        Ok(job.try_sub(L4_DIR)?.map(|root| Self {
            job_id: job_id.to_string(),
            root,
        }))
    }

    /// The level-4 directory.
    pub fn root(&self) -> &Path {
        self.root.path()
    }

    /// Stores `rank`'s file (described by `meta`, read from `file` one
    /// piece at a time) as its level-4 copy of checkpoint
    /// `meta.checkpoint_id`, the way `how` says.
    pub fn write_from(
        &self,
        meta: &Metadata,
        file: Pieces,
        how: L4Write,
        fence: Option<Fence>,
    ) -> Result<Written, StorageError> {
        let rank = meta.rank;
        self.check_fence(fence)?;
        let chunks = self.root.sub(CHUNKS, true)?.sub(&chunk_dir(rank), true)?;
        let (refs, layer, stats) = match how {
            L4Write::Full { chunk } => {
                let (refs, stats) = chunks::write_full(&chunks, file, chunk, rank)?;
                (refs, 0, stats)
            }
            L4Write::Differential { block, full_every } => {
                let previous = self.previous(meta);
                let layer = match &previous {
                    Some(m) if m.layer + 1 < full_every => m.layer + 1,
                    _ => 0,
                };
                let known = match previous {
                    Some(m) if layer > 0 => pack::Known::from(&chunks, m.chunks),
                    _ => pack::Known::default(),
                };
                let block = pack::block_for(meta.file_len, block);
                let (refs, stats) = pack::write_differential(&chunks, file, block, known, rank)?;
                (refs, layer, stats)
            }
        };
        let mut record = meta.clone();
        record.level = Level::L4.number();
        let manifest = Manifest {
            record,
            chunks: refs,
            layer,
            fence,
        };
        // Opened before the check: if the fence moves after it, the
        // directory this handle names is set aside (see `fence`).
        let ckpt = self.root.sub(&names::ckpt_dir(meta.checkpoint_id), true)?;
        let body = serde_json::to_vec(&manifest).unwrap_or_default();
        // The manifest is the write's commit point.
        self.check_fence(fence)?;
        write_small(&ckpt, &manifest_file(rank), &body, &rank.to_string())?;
        Ok(stats)
    }

    /// Checks a write of `fence` against the directory's fence (none:
    /// not checked): one of an older epoch is refused.
    fn check_fence(&self, fence: Option<Fence>) -> Result<(), StorageError> {
        match fence {
            Some(f) => fence::check(&self.root, f),
            None => Ok(()),
        }
    }

    /// Moves the directory's fence forward to `fence` as a new epoch's
    /// ranks start, before any of them writes, setting aside what older
    /// epochs left uncommitted (see `fence`); refuses if the fence is
    /// already past it.
    pub fn advance_fence(&self, fence: Fence) -> Result<(), StorageError> {
        fence::advance(&self.root, fence)
    }

    /// The rank's newest sound manifest of a checkpoint before the one
    /// `meta` describes (what a differential write builds on).
    fn previous(&self, meta: &Metadata) -> Option<Manifest> {
        self.ids()
            .into_iter()
            .rev()
            .filter(|id| *id < meta.checkpoint_id)
            .find_map(|id| {
                let ckpt = self.root.try_sub(&names::ckpt_dir(id)).ok()??;
                ckpt.kind(&manifest_file(meta.rank))?;
                self.manifest(&ckpt, id, meta.rank, Some(meta.world_size))
                    .ok()
            })
    }

    fn manifest(
        &self,
        ckpt: &Dir,
        id: u64,
        rank: u32,
        world: Option<u32>,
    ) -> Result<Manifest, StorageError> {
        let name = manifest_file(rank);
        let path = ckpt.join(&name);
        let bytes = ckpt.read_capped(&name, MAX_RECORD)?;
        let manifest: Manifest = serde_json::from_slice(&bytes).map_err(|e| {
            FormatError::new(
                &path,
                FormatErrorKind::Metadata(format!("unreadable manifest: {e}")),
            )
        })?;
        let data = names::data_file(rank);
        let place = Place {
            job_id: &self.job_id,
            checkpoint_id: id,
            rank,
            level: Level::L4.number(),
            file: &data,
            world_size: world,
        };
        manifest.record.check_place(&place, &path)?;
        let total: u64 = manifest.chunks.iter().map(|c| c.len).sum();
        if total != manifest.record.file_len {
            return Err(FormatError::new(
                &path,
                FormatErrorKind::Metadata(format!(
                    "its chunks hold {total} bytes, the record says {}",
                    manifest.record.file_len
                )),
            )
            .into());
        }
        Ok(manifest)
    }

    /// `rank`'s checkpoints whose manifest is sound and whose chunks are all
    /// present with the right sizes, and the problems of the others.
    pub fn scan_rank(&self, rank: u32, world: u32) -> (Vec<Held>, Vec<(u64, String)>) {
        let (mut held, mut bad) = (Vec::new(), Vec::new());
        let chunks = self
            .root
            .try_sub(CHUNKS)
            .ok()
            .flatten()
            .and_then(|c| c.try_sub(&chunk_dir(rank)).ok().flatten());
        // Each chunk file or pack looked at once: its size, if present.
        let mut sizes: HashMap<String, Option<u64>> = HashMap::new();
        for id in self.ids() {
            let Ok(Some(ckpt)) = self.root.try_sub(&names::ckpt_dir(id)) else {
                continue;
            };
            if ckpt.kind(&manifest_file(rank)).is_none() {
                continue;
            }
            let checked = self.manifest(&ckpt, id, rank, Some(world)).and_then(|m| {
                let missing = m.chunks.iter().find(|c| {
                    let name = c.place().0;
                    let size = *sizes.entry(name.to_string()).or_insert_with(|| {
                        chunks
                            .as_ref()
                            .and_then(|d| d.open_read(name).ok())
                            .and_then(|f| f.metadata().ok())
                            .map(|m| m.len())
                    });
                    !size.is_some_and(|s| c.fits(s))
                });
                match missing {
                    Some(c) => Err(FormatError::new(
                        ckpt.join(&manifest_file(rank)),
                        FormatErrorKind::Metadata(format!(
                            "chunk {} ({}) is missing or truncated",
                            c.hash,
                            c.place().0
                        )),
                    )
                    .into()),
                    None => Ok(m),
                }
            });
            match checked {
                Ok(m) => held.push(Held {
                    id,
                    rank,
                    stamp: m.record.stamp,
                }),
                Err(e) => bad.push((id, e.to_string())),
            }
        }
        (held, bad)
    }

    /// Opens `rank`'s file of checkpoint `id` for reading back chunk by
    /// chunk, every chunk checked against its hash as it is read; the
    /// record comes back as a level-1 record.
    pub fn open_copy(
        &self,
        id: u64,
        rank: u32,
        world: u32,
    ) -> Result<(Metadata, Chunks), StorageError> {
        let ckpt = self.root.sub(&names::ckpt_dir(id), false)?;
        let manifest = self.manifest(&ckpt, id, rank, Some(world))?;
        let dir = self.root.sub(CHUNKS, false)?.sub(&chunk_dir(rank), false)?;
        // The record is checked against the file, and every chunk's CRC,
        // as the file is installed into level 1.
        let mut meta = manifest.record;
        meta.level = Level::L1.number();
        let chunks = Chunks::new(dir, manifest.chunks);
        Ok((meta, chunks))
    }

    /// Reads `rank`'s file of checkpoint `id` through, checking every
    /// chunk against its hash (one chunk in memory at a time).
    pub fn verify(&self, id: u64, rank: u32, world: u32) -> Result<(), StorageError> {
        let (_, mut chunks) = self.open_copy(id, rank, world)?;
        while chunks.next_piece()?.is_some() {}
        Ok(())
    }

    /// Records that checkpoint `id` is committed at level 4.
    pub fn mark_committed(
        &self,
        id: u64,
        stamp: u64,
        layout: Option<Layout>,
        fence: Option<Fence>,
    ) -> Result<(), StorageError> {
        // As for a manifest: the directory first, then the check.
        let Some(ckpt) = self.root.try_sub(&names::ckpt_dir(id))? else {
            return Ok(());
        };
        self.check_fence(fence)?;
        commit::mark_in(&ckpt, &self.job_id, Level::L4, (id, stamp), layout)
    }

    /// Ids of checkpoints marked committed, ascending.
    pub fn committed(&self) -> Vec<u64> {
        commit::committed(&self.root, &self.job_id)
    }

    /// The sound commit markers here, by ascending checkpoint id.
    pub fn commits(&self) -> Vec<Commit> {
        commit::commits(&self.root, &self.job_id, Level::L4)
    }

    /// Ids of every checkpoint directory, ascending.
    pub fn ids(&self) -> Vec<u64> {
        commit::ids(&self.root)
    }

    /// Removes `ranks`' checkpoints older than the oldest of the newest
    /// `keep_last` committed ones, then their chunks no kept manifest
    /// references. `marker` also removes those checkpoints' markers and
    /// directories (one node does that). With `archive`, the committed ones
    /// move to the archive instead, with their markers, and keep their
    /// chunks.
    pub fn retain(
        &self,
        ranks: &[u32],
        keep_last: usize,
        world: u32,
        marker: bool,
        archive: bool,
    ) -> Result<(), StorageError> {
        let committed = self.committed();
        let Some(oldest) = commit::oldest_kept(&committed, keep_last) else {
            return Ok(());
        };
        for id in self.ids().into_iter().filter(|id| *id < oldest) {
            let name = names::ckpt_dir(id);
            let Some(ckpt) = self.root.try_sub(&name)? else {
                continue;
            };
            // Committed: marked here, or already moved to the archive by
            // the node that moves the marker (nodes retain concurrently).
            let archived_marker = || {
                matches!(self.root.try_sub(ARCHIVE), Ok(Some(a))
                    if matches!(a.try_sub(&name), Ok(Some(d)) if d.kind(COMMITTED).is_some()))
            };
            let to = if archive && (committed.contains(&id) || archived_marker()) {
                Some(self.root.sub(ARCHIVE, true)?.sub(&name, true)?)
            } else {
                None
            };
            // The marker first: a marker never names manifests that are gone.
            let mut files = Vec::new();
            if marker {
                files.push(COMMITTED.to_string());
            }
            files.extend(ranks.iter().map(|r| manifest_file(*r)));
            for file in files {
                match &to {
                    Some(to) if ckpt.kind(&file).is_some() => ckpt.rename(&file, to, &file)?,
                    _ => ckpt.remove_file(&file)?,
                }
            }
            drop(ckpt);
            self.root.remove_dir_if_empty(&name);
        }
        for &rank in ranks {
            self.collect_chunks(rank, Some(world))?;
        }
        Ok(())
    }

    /// The directories of `rank`'s manifests: the checkpoints', then the
    /// archive's (if any).
    fn manifest_dirs(&self) -> Vec<(u64, Dir)> {
        let mut dirs = Vec::new();
        let mut add = |from: &Dir| {
            for id in commit::ids(from) {
                if let Ok(Some(d)) = from.try_sub(&names::ckpt_dir(id)) {
                    dirs.push((id, d));
                }
            }
        };
        add(&self.root);
        if let Ok(Some(archive)) = self.root.try_sub(ARCHIVE) {
            add(&archive);
        }
        dirs
    }

    /// Ids of the archived checkpoints, ascending.
    pub fn archived(&self) -> Vec<u64> {
        match self.root.try_sub(ARCHIVE) {
            Ok(Some(archive)) => commit::ids(&archive),
            _ => Vec::new(),
        }
    }

    /// Removes `rank`'s chunks that no manifest of it references (of a job
    /// of `world` ranks, when known).
    fn collect_chunks(&self, rank: u32, world: Option<u32>) -> Result<(), StorageError> {
        let Some(chunks) = self
            .root
            .try_sub(CHUNKS)?
            .and_then(|c| c.try_sub(&chunk_dir(rank)).ok().flatten())
        else {
            return Ok(());
        };
        let mut used = BTreeSet::new();
        for (id, ckpt) in self.manifest_dirs() {
            if ckpt.kind(&manifest_file(rank)).is_none() {
                continue;
            }
            match self.manifest(&ckpt, id, rank, world) {
                Ok(m) => used.extend(m.chunks.iter().map(|c| c.place().0.to_string())),
                // An unreadable manifest: keep everything rather than guess.
                Err(_) => return Ok(()),
            }
        }
        for (name, kind) in chunks.entries()? {
            if kind == Kind::File && !used.contains(&name) && !names::is_temporary(&name) {
                chunks.remove_file(&name)?;
            }
        }
        Ok(())
    }

    /// Removes `ranks`' files of every checkpoint (and with `marker`, the
    /// markers and emptied directories).
    pub fn remove_ranks(&self, ranks: &[u32], marker: bool) -> Result<(), StorageError> {
        for id in self.ids() {
            let name = names::ckpt_dir(id);
            if let Some(ckpt) = self.root.try_sub(&name)? {
                if marker {
                    ckpt.remove_file(COMMITTED)?;
                }
                // A rank's manifest, and what a writer killed part way
                // left of it under a temporary name (a node lost during a
                // level-4 promotion).
                let leftovers: Vec<String> = ranks
                    .iter()
                    .map(|r| format!(".{}.tmp-", manifest_file(*r)))
                    .collect();
                for (entry, kind) in ckpt.entries()? {
                    if kind == Kind::File && leftovers.iter().any(|p| entry.starts_with(p)) {
                        ckpt.remove_file(&entry)?;
                    }
                }
                for rank in ranks {
                    ckpt.remove_file(&manifest_file(*rank))?;
                }
            }
            self.root.remove_dir_if_empty(&name);
        }
        // The job ended: its run's fence goes with the marker, and what
        // fence moves set aside with it.
        if marker {
            fence::sweep(&self.root)?;
            self.root.remove_file(names::FENCE)?;
        }
        // The archive keeps its chunks; everything else of the ranks goes,
        // temporaries included.
        let archive = self.root.try_sub(ARCHIVE)?.is_some();
        if let Some(chunks) = self.root.try_sub(CHUNKS)? {
            for rank in ranks {
                if let Some(d) = chunks.try_sub(&chunk_dir(*rank))? {
                    for (name, kind) in d.entries()? {
                        if kind == Kind::File && (!archive || names::is_temporary(&name)) {
                            d.remove_file(&name)?;
                        }
                    }
                }
                if archive {
                    self.collect_chunks(*rank, None)?;
                }
                chunks.remove_dir_if_empty(&chunk_dir(*rank));
            }
        }
        Ok(())
    }

    /// Removes checkpoint `id` of every rank (`frame drop`): its marker,
    /// then its manifests, then the chunks no other manifest references.
    /// The archive keeps its copy.
    pub fn drop_checkpoint(&self, id: u64) -> Result<(), StorageError> {
        let name = names::ckpt_dir(id);
        if let Some(ckpt) = self.root.try_sub(&name)? {
            ckpt.remove_file(COMMITTED)?;
            for (entry, kind) in ckpt.entries()? {
                let ours = parse_manifest_file(&entry).is_some() || names::is_temporary(&entry);
                if kind == Kind::File && ours {
                    ckpt.remove_file(&entry)?;
                }
            }
            drop(ckpt);
            self.root.remove_dir_if_empty(&name);
        }
        let Some(chunks) = self.root.try_sub(CHUNKS)? else {
            return Ok(());
        };
        for (entry, kind) in chunks.entries()? {
            let rank = entry
                .strip_prefix("rank-")
                .and_then(|r| r.parse::<u32>().ok());
            if let (Kind::Dir, Some(rank)) = (kind, rank) {
                if entry == chunk_dir(rank) {
                    self.collect_chunks(rank, None)?;
                }
            }
        }
        Ok(())
    }

    /// Whether `name` in a checkpoint directory is a manifest (for tools).
    pub fn is_manifest(name: &str) -> bool {
        parse_manifest_file(name).is_some()
    }
}

#[cfg(test)]
mod tests;
