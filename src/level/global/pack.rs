//! Differential level-4 writes: a rank's file cut into blocks, each block
//! hashed; a block the rank's previous level-4 checkpoint holds is
//! referenced there, the others are appended to one new file, the write's
//! pack (`pack-<16 hex digits>`), so that small blocks do not make small
//! files. Every `full_every`-th write in a row is a full layer (every block
//! into the new pack), so that a rank's newest checkpoint never depends on
//! more than `full_every` packs, and older packs go once no kept manifest
//! names them.

use super::chunks::{chunk_hash, writer_tag, ChunkRef, PackAt, INCOMING};
use super::Written;
use crate::level::fsio::StorageError;
use crate::level::stream::Pieces;
use crate::safefs::{AtomicFile, Dir};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// The most blocks a rank's file is cut into: past it, blocks grow (in
/// powers of two) so that a manifest stays within a record's size limit.
pub(super) const MAX_BLOCKS: u64 = 1 << 18;

/// Bytes gathered before they are written to the pack.
const PACK_BUFFER: usize = 1 << 20;

/// How a level-4 write stores a rank's file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum L4Write {
    /// Every chunk of `chunk` bytes in a file of its own, named by its hash.
    Full {
        /// Bytes per chunk.
        chunk: usize,
    },
    /// Blocks of `block` bytes; only those the previous checkpoint lacks are
    /// written, into one pack; every `full_every`-th write in a row writes
    /// them all.
    Differential {
        /// Bytes per block.
        block: usize,
        /// Writes from one full layer to the next (1: every write is full).
        full_every: u32,
    },
}

/// The block size for a file of `len` bytes: `block`, or larger so that
/// the file has at most [`MAX_BLOCKS`] blocks.
pub(super) fn block_for(len: u64, block: usize) -> usize {
    let block = block.max(1) as u64;
    let least = len.div_ceil(MAX_BLOCKS);
    if least <= block {
        return block as usize;
    }
    usize::try_from(least.next_power_of_two()).unwrap_or(usize::MAX)
}

/// The blocks a write may reference instead of writing them: those of the
/// rank's previous checkpoint still present, by hash and length.
#[derive(Default)]
pub(super) struct Known {
    blocks: HashMap<(String, u64), ChunkRef>,
}

impl Known {
    /// The chunks of `previous` whose files in `dir` hold them (each file
    /// looked at once).
    pub(super) fn from(dir: &Dir, previous: Vec<ChunkRef>) -> Self {
        let mut sizes: HashMap<String, Option<u64>> = HashMap::new();
        let mut blocks = HashMap::new();
        for c in previous {
            let name = c.place().0.to_string();
            let size = *sizes.entry(name).or_insert_with_key(|name| {
                dir.open_read(name)
                    .ok()
                    .and_then(|f| f.metadata().ok())
                    .map(|m| m.len())
            });
            if size.is_some_and(|s| c.fits(s)) {
                blocks.insert((c.hash.clone(), c.len), c);
            }
        }
        Self { blocks }
    }

    /// Where a block of this hash and length is stored already.
    pub(super) fn get(&self, hash: &str, len: u64) -> Option<&ChunkRef> {
        self.blocks.get(&(hash.to_string(), len))
    }

    /// Records a block just written.
    pub(super) fn add(&mut self, c: ChunkRef) {
        self.blocks.insert((c.hash.clone(), c.len), c);
    }
}

/// The pack one differential write fills: begun at its first block,
/// written in batches of [`PACK_BUFFER`] bytes, and given its name once
/// complete and durable.
pub(super) struct Pack {
    rank: u32,
    name: String,
    file: Option<AtomicFile>,
    buf: Vec<u8>,
    len: u64,
}

impl Pack {
    /// A new pack for `rank`'s write.
    pub(super) fn new(rank: u32) -> Self {
        let tag = getrandom::u64().unwrap_or_else(|_| {
            u64::from(std::process::id()) << 32
                ^ std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos() as u64)
                    .unwrap_or(0)
        });
        Self {
            rank,
            name: format!("pack-{tag:016x}"),
            file: None,
            buf: Vec::new(),
            len: 0,
        }
    }

    /// Appends `block`; returns where it is in the pack.
    pub(super) fn append(&mut self, dir: &Dir, block: &[u8]) -> Result<PackAt, StorageError> {
        let at = PackAt {
            name: self.name.clone(),
            offset: self.len,
        };
        if self.buf.len() + block.len() > PACK_BUFFER {
            self.flush(dir)?;
        }
        if block.len() >= PACK_BUFFER {
            begun(&mut self.file, dir, self.rank)?
                .write(block)
                .map_err(|e| StorageError::from_fs(e, block.len() as u64))?;
        } else {
            self.buf.extend_from_slice(block);
        }
        self.len += block.len() as u64;
        Ok(at)
    }

    fn flush(&mut self, dir: &Dir) -> Result<(), StorageError> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let need = self.buf.len() as u64;
        begun(&mut self.file, dir, self.rank)?
            .write(&self.buf)
            .map_err(|e| StorageError::from_fs(e, need))?;
        self.buf.clear();
        Ok(())
    }

    /// Makes the pack durable under its name (nothing when no block was
    /// appended).
    pub(super) fn finish(mut self, dir: &Dir) -> Result<(), StorageError> {
        if self.len == 0 {
            return Ok(());
        }
        self.flush(dir)?;
        let name = self.name.clone();
        let need = self.len;
        match self.file.take() {
            Some(f) => f
                .commit_as(&name)
                .map_err(|e| StorageError::from_fs(e, need)),
            None => Ok(()),
        }
    }

    /// Bytes appended.
    pub(super) fn len(&self) -> u64 {
        self.len
    }
}

/// Cuts `file` into blocks of `block` bytes: a block `known` holds is
/// referenced there, the others go into one new pack.
pub(super) fn write_differential(
    chunks: &Dir,
    mut file: Pieces,
    block: usize,
    mut known: Known,
    rank: u32,
) -> Result<(Vec<ChunkRef>, Written), StorageError> {
    let mut stats = Written::default();
    let mut refs = Vec::new();
    let mut new = Pack::new(rank);
    file.each(block, |piece| {
        let len = piece.len() as u64;
        let hash = chunk_hash(piece);
        if let Some(c) = known.get(&hash, len) {
            stats.referenced += len;
            refs.push(c.clone());
            return Ok(());
        }
        let at = new.append(chunks, piece)?;
        let c = ChunkRef {
            hash,
            len,
            pack: Some(at),
        };
        known.add(c.clone());
        refs.push(c);
        Ok(())
    })?;
    stats.written = new.len();
    new.finish(chunks)?;
    Ok((refs, stats))
}

/// The pack's file in `slot`, begun under a temporary name of this writer
/// at the first write.
fn begun<'a>(
    slot: &'a mut Option<AtomicFile>,
    dir: &Dir,
    rank: u32,
) -> Result<&'a mut AtomicFile, StorageError> {
    match slot {
        Some(f) => Ok(f),
        empty => {
            let f = dir
                .begin_atomic(INCOMING, &writer_tag(rank))
                .map_err(|e| StorageError::from_fs(e, PACK_BUFFER as u64))?;
            Ok(empty.insert(f))
        }
    }
}

#[cfg(test)]
mod tests;
