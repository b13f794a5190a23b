//! Level 4: checkpoints in the global (parallel) file system, written
//! differentially.
//!
//! Under `<global_dir>/<job_id>/l4/`:
//!
//! ```text
//! ckpt-<id>/rank-<r>.l4.json   a rank's manifest: its record and the chunks
//!                              that make up its file, in order
//! ckpt-<id>/COMMITTED          every rank's manifest is durable
//! chunks/rank-<r>/<hash>       a chunk of rank r's files, named by the
//!                              128-bit BLAKE3 hash of its content
//! ```
//!
//! A rank's file is cut into `chunk_size` pieces. A piece whose hash names a
//! chunk that already exists (written for an earlier checkpoint of the same
//! rank) is referenced, not written again. New chunks are written under a
//! temporary name, synced and renamed; the manifest comes last, so a
//! manifest always names chunks that are durable. Each rank has its own
//! chunk directory, so removing a rank's unreferenced chunks never races
//! another node's writes.

use super::commit::{self, Commit, COMMITTED};
use super::copies::Held;
use super::fsio::StorageError;
use super::names;
use super::stream::{PieceSource, Pieces};
use super::Level;
use crate::format::{FormatError, FormatErrorKind, Metadata, Place, MAX_RECORD};
use crate::safefs::{Dir, Kind};
use crate::topology::Layout;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::Path;

/// The directory of level 4 under a job's directory.
pub(crate) const L4_DIR: &str = "l4";
const CHUNKS: &str = "chunks";

/// A chunk of a rank's file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ChunkRef {
    /// 128-bit BLAKE3 hash of the content, in hex.
    pub hash: String,
    /// Length in bytes.
    pub len: u64,
}

/// What a rank's level-4 checkpoint is made of.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Manifest {
    /// The rank's record (level 4).
    pub record: Metadata,
    /// Its file, chunk by chunk.
    pub chunks: Vec<ChunkRef>,
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

/// The 128-bit content hash of a chunk, in hex.
pub(crate) fn chunk_hash(bytes: &[u8]) -> String {
    hash_name(&blake3::hash(bytes))
}

/// The name of a chunk whose BLAKE3 hash is `h`.
fn hash_name(h: &blake3::Hash) -> String {
    h.to_hex()[..32].to_string()
}

/// The name a new chunk is written under until its hash is known.
const INCOMING: &str = "incoming";

/// Bytes hashed and written at a time by [`write_new_chunk`]: small
/// enough to be read from the cache by the write after the hash.
const HASH_STEP: usize = 256 << 10;

/// A rank's level-4 file being read back, chunk by chunk: each chunk file
/// is mapped (read where it cannot be) and checked against its hash, and
/// lent as the next piece of the file.
pub struct Chunks {
    dir: Dir,
    refs: std::vec::IntoIter<ChunkRef>,
    /// The current chunk, mapped.
    map: Option<memmap2::Mmap>,
    /// The current chunk, read (where it could not be mapped).
    buf: Vec<u8>,
}

impl Chunks {
    /// Maps chunk `c` into `self.map`, or reads it into `self.buf` where it
    /// cannot be mapped.
    fn fetch(&mut self, c: &ChunkRef) -> Result<(), StorageError> {
        self.map = None;
        let f = self.dir.open_read(&c.hash)?;
        let actual = f
            .metadata()
            .map_err(|e| StorageError::io("stat", &self.dir.join(&c.hash), 0, e))?
            .len();
        if actual == c.len && c.len > 0 {
            // SAFETY: read-only, of a chunk file named by its content: frame
            // writes it once under a temporary name and never changes it.
            if let Ok(map) = unsafe { memmap2::Mmap::map(&f) } {
                let _ = map.advise(memmap2::Advice::PopulateRead);
                self.map = Some(map);
                return Ok(());
            }
        }
        self.dir.read_capped_into(&c.hash, c.len, &mut self.buf)?;
        Ok(())
    }
}

impl PieceSource for Chunks {
    type Error = StorageError;

    fn next_piece(&mut self) -> Result<Option<&[u8]>, StorageError> {
        let Some(c) = self.refs.next() else {
            self.map = None;
            return Ok(None);
        };
        self.fetch(&c)?;
        let bytes: &[u8] = match &self.map {
            Some(map) => map,
            None => &self.buf,
        };
        if bytes.len() as u64 != c.len || chunk_hash(bytes) != c.hash {
            return Err(FormatError::new(
                self.dir.join(&c.hash),
                FormatErrorKind::Metadata("chunk content does not match its hash".into()),
            )
            .into());
        }
        Ok(Some(bytes))
    }
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
    /// chunk at a time) as its level-4 copy of checkpoint
    /// `meta.checkpoint_id`, in `chunk_size` pieces, reusing existing
    /// chunks when `differential`.
    pub fn write_from(
        &self,
        meta: &Metadata,
        mut file: Pieces,
        chunk_size: usize,
        differential: bool,
    ) -> Result<Written, StorageError> {
        let rank = meta.rank;
        let chunks = self.root.sub(CHUNKS, true)?.sub(&chunk_dir(rank), true)?;
        let mut stats = Written::default();
        let mut refs = Vec::new();
        // Hash and write each piece straight from a mapping of the file
        // where it maps (no copy into a buffer first), else read it.
        let map = file.map();
        let step = chunk_size.max(1);
        let mut buf = Vec::new();
        let mut at = 0usize;
        loop {
            let piece: &[u8] = match &map {
                Some(m) if at < m.len() => {
                    let end = m.len().min(at.saturating_add(step));
                    Pieces::populate(m, at..end);
                    let slice = &m[at..end];
                    at = end;
                    slice
                }
                Some(_) => break,
                None if file.next_into(&mut buf, step)? => &buf,
                None => break,
            };
            let len = piece.len() as u64;
            if !differential {
                let hash = write_new_chunk(&chunks, piece, rank)?;
                stats.written += len;
                refs.push(ChunkRef { hash, len });
                continue;
            }
            let hash = chunk_hash(piece);
            let present = chunks.kind(&hash) == Some(Kind::File)
                && chunks
                    .open_read(&hash)
                    .ok()
                    .and_then(|f| f.metadata().ok())
                    .map(|m| m.len())
                    == Some(len);
            if present {
                stats.referenced += len;
            } else {
                write_chunk(&chunks, &hash, piece, rank)?;
                stats.written += len;
            }
            refs.push(ChunkRef { hash, len });
        }
        chunks.sync()?;
        let mut record = meta.clone();
        record.level = Level::L4.number();
        let manifest = Manifest {
            record,
            chunks: refs,
        };
        let ckpt = self.root.sub(&names::ckpt_dir(meta.checkpoint_id), true)?;
        let body = serde_json::to_vec(&manifest).unwrap_or_default();
        ckpt.write_atomic(&manifest_file(rank), &body, &rank.to_string())?;
        Ok(stats)
    }

    fn manifest(
        &self,
        ckpt: &Dir,
        id: u64,
        rank: u32,
        world: u32,
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
            world_size: Some(world),
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
        for id in self.ids() {
            let Ok(Some(ckpt)) = self.root.try_sub(&names::ckpt_dir(id)) else {
                continue;
            };
            if ckpt.kind(&manifest_file(rank)).is_none() {
                continue;
            }
            let checked = self.manifest(&ckpt, id, rank, world).and_then(|m| {
                let missing = m.chunks.iter().find(|c| {
                    chunks
                        .as_ref()
                        .and_then(|d| d.open_read(&c.hash).ok())
                        .and_then(|f| f.metadata().ok())
                        .map(|m| m.len())
                        != Some(c.len)
                });
                match missing {
                    Some(c) => Err(FormatError::new(
                        ckpt.join(&manifest_file(rank)),
                        FormatErrorKind::Metadata(format!(
                            "chunk {} is missing or truncated",
                            c.hash
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
        let manifest = self.manifest(&ckpt, id, rank, world)?;
        let dir = self.root.sub(CHUNKS, false)?.sub(&chunk_dir(rank), false)?;
        // The record is checked against the file, and every chunk's CRC,
        // as the file is installed into level 1.
        let mut meta = manifest.record;
        meta.level = Level::L1.number();
        let chunks = Chunks {
            dir,
            refs: manifest.chunks.into_iter(),
            map: None,
            buf: Vec::new(),
        };
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
    ) -> Result<(), StorageError> {
        commit::mark_level(&self.root, &self.job_id, Level::L4, (id, stamp), layout)
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
    /// directories (one node does that).
    pub fn retain(
        &self,
        ranks: &[u32],
        keep_last: usize,
        world: u32,
        marker: bool,
    ) -> Result<(), StorageError> {
        let Some(oldest) = commit::oldest_kept(&self.committed(), keep_last) else {
            return Ok(());
        };
        for id in self.ids().into_iter().filter(|id| *id < oldest) {
            let name = names::ckpt_dir(id);
            let Some(ckpt) = self.root.try_sub(&name)? else {
                continue;
            };
            if marker {
                ckpt.remove_file(COMMITTED)?;
            }
            for rank in ranks {
                ckpt.remove_file(&manifest_file(*rank))?;
            }
            drop(ckpt);
            self.root.remove_dir_if_empty(&name);
        }
        for &rank in ranks {
            self.collect_chunks(rank, world)?;
        }
        Ok(())
    }

    /// Removes `rank`'s chunks that no manifest of it references.
    fn collect_chunks(&self, rank: u32, world: u32) -> Result<(), StorageError> {
        let Some(chunks) = self
            .root
            .try_sub(CHUNKS)?
            .and_then(|c| c.try_sub(&chunk_dir(rank)).ok().flatten())
        else {
            return Ok(());
        };
        let mut used = BTreeSet::new();
        for id in self.ids() {
            let Ok(Some(ckpt)) = self.root.try_sub(&names::ckpt_dir(id)) else {
                continue;
            };
            if ckpt.kind(&manifest_file(rank)).is_none() {
                continue;
            }
            match self.manifest(&ckpt, id, rank, world) {
                Ok(m) => used.extend(m.chunks.into_iter().map(|c| c.hash)),
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
        if let Some(chunks) = self.root.try_sub(CHUNKS)? {
            for rank in ranks {
                if let Some(d) = chunks.try_sub(&chunk_dir(*rank))? {
                    for (name, kind) in d.entries()? {
                        if kind == Kind::File {
                            d.remove_file(&name)?;
                        }
                    }
                }
                chunks.remove_dir_if_empty(&chunk_dir(*rank));
            }
        }
        Ok(())
    }

    /// Whether `name` in a checkpoint directory is a manifest (for tools).
    pub fn is_manifest(name: &str) -> bool {
        parse_manifest_file(name).is_some()
    }
}

/// Writes one chunk durably under its hash name.
fn write_chunk(dir: &Dir, hash: &str, piece: &[u8], rank: u32) -> Result<(), StorageError> {
    dir.write_atomic(hash, piece, &rank.to_string())
        .map_err(|e| StorageError::from_fs(e, piece.len() as u64))
}

/// Writes one chunk durably, hashing it on the way (one pass over the
/// bytes), and names it by its hash; returns the hash.
fn write_new_chunk(dir: &Dir, piece: &[u8], rank: u32) -> Result<String, StorageError> {
    let need = piece.len() as u64;
    let fs = |e| StorageError::from_fs(e, need);
    // A temporary name of this writer alone: a host cut off the network
    // may still be writing the rank's chunks while its replacement does.
    let tag = format!(
        "{rank}-{:016x}",
        getrandom::u64().unwrap_or_else(|_| u64::from(std::process::id()))
    );
    let mut file = dir.begin_atomic(INCOMING, &tag).map_err(fs)?;
    let mut hasher = blake3::Hasher::new();
    for step in piece.chunks(HASH_STEP) {
        hasher.update(step);
        file.write(step).map_err(fs)?;
    }
    let hash = hash_name(&hasher.finalize());
    file.commit_as(&hash).map_err(fs)?;
    Ok(hash)
}

#[cfg(test)]
mod tests;
