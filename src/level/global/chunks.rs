//! Level 4's chunks: what a manifest says of each piece of a rank's file
//! (its hash, its length, where it is stored), reading a chunk back checked
//! against its hash, and writing one chunk file.
//!
//! A chunk is stored either in a file of its own named by its hash (a full
//! write), or at an offset in a pack, a file of the chunks one
//! differential write added (see `pack`).

use super::Written;
use crate::format::{FormatError, FormatErrorKind};
use crate::level::fsio::StorageError;
use crate::level::stream::{PieceSource, Pieces};
use crate::safefs::Dir;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::os::unix::fs::FileExt;

/// The name a new chunk or pack is written under until it is complete.
pub(super) const INCOMING: &str = "incoming";

/// Bytes hashed and written at a time by [`write_new_chunk`]: small
/// enough to be read from the cache by the write after the hash.
const HASH_STEP: usize = 256 << 10;

/// A chunk of a rank's file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ChunkRef {
    /// 128-bit BLAKE3 hash of the content, in hex.
    pub hash: String,
    /// Length in bytes.
    pub len: u64,
    /// The pack that holds it; none for a chunk file named by its hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pack: Option<PackAt>,
}

/// Where in a pack a chunk is.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PackAt {
    /// The pack's file name in the rank's chunk directory.
    pub name: String,
    /// The chunk's first byte in it.
    pub offset: u64,
}

impl ChunkRef {
    /// The file that holds the chunk, and the chunk's offset in it.
    pub(crate) fn place(&self) -> (&str, u64) {
        match &self.pack {
            Some(p) => (&p.name, p.offset),
            None => (&self.hash, 0),
        }
    }

    /// Whether a file of `size` bytes can hold the chunk where it says: a
    /// chunk file exactly, a pack at least up to the chunk's end.
    pub(crate) fn fits(&self, size: u64) -> bool {
        match &self.pack {
            Some(p) => p
                .offset
                .checked_add(self.len)
                .is_some_and(|end| end <= size),
            None => size == self.len,
        }
    }
}

/// The 128-bit BLAKE3 hash of `bytes`, in hex.
pub(crate) fn chunk_hash(bytes: &[u8]) -> String {
    hash_name(&blake3::hash(bytes))
}

/// The name of a chunk whose BLAKE3 hash is `h`.
pub(super) fn hash_name(h: &blake3::Hash) -> String {
    h.to_hex()[..32].to_string()
}

/// Reads chunks of one rank's chunk directory back, each checked against
/// its hash. The file last read from stays open and mapped, so the chunks
/// of one pack are read from one mapping.
pub(crate) struct ChunkReader {
    dir: Dir,
    /// The file last opened.
    open: Option<OpenFile>,
    /// A chunk read where its file could not be mapped.
    buf: Vec<u8>,
    /// Whether each chunk is checked against its hash.
    hashed: bool,
}

/// A chunk file or pack being read.
struct OpenFile {
    name: String,
    file: File,
    size: u64,
    /// None where it could not be mapped.
    map: Option<memmap2::Mmap>,
}

impl OpenFile {
    fn open(dir: &Dir, name: &str) -> Result<Self, StorageError> {
        let file = dir.open_read(name)?;
        let size = file
            .metadata()
            .map_err(|e| StorageError::io("stat", &dir.join(name), 0, e))?
            .len();
        // SAFETY: read-only, of a chunk file or pack that frame writes once
        // under a temporary name and never changes after.
        let map = (size > 0)
            .then(|| unsafe { memmap2::Mmap::map(&file) }.ok())
            .flatten();
        Ok(Self {
            name: name.to_string(),
            file,
            size,
            map,
        })
    }
}

impl ChunkReader {
    /// A reader of the chunks in `dir`.
    pub(crate) fn new(dir: Dir) -> Self {
        Self {
            dir,
            open: None,
            buf: Vec::new(),
            hashed: true,
        }
    }

    /// The bytes of chunk `c`, checked against its hash (unless its
    /// reader checks them: [`Chunks::checked_by_reader`]).
    pub(crate) fn read(&mut self, c: &ChunkRef) -> Result<&[u8], StorageError> {
        let (name, offset) = c.place();
        let path = self.dir.join(name);
        if self.open.as_ref().is_none_or(|o| o.name != name) {
            self.open = Some(OpenFile::open(&self.dir, name)?);
        }
        let Some(open) = &self.open else {
            return Err(StorageError::io(
                "open",
                &path,
                0,
                std::io::Error::other("not open"),
            ));
        };
        if !c.fits(open.size) {
            return Err(FormatError::new(
                &path,
                FormatErrorKind::Metadata(format!(
                    "holds {} bytes, too few for the chunk of {} bytes at {offset} its manifest names",
                    open.size, c.len
                )),
            )
            .into());
        }
        let (start, len) = (offset as usize, c.len as usize);
        let bytes: &[u8] = match &open.map {
            Some(m) => {
                let _ = m.advise_range(memmap2::Advice::PopulateRead, start, len);
                &m[start..start + len]
            }
            None => {
                self.buf.resize(len, 0);
                open.file
                    .read_exact_at(&mut self.buf, offset)
                    .map_err(|e| StorageError::io("read", &path, 0, e))?;
                &self.buf
            }
        };
        if self.hashed && chunk_hash(bytes) != c.hash {
            return Err(FormatError::new(
                &path,
                FormatErrorKind::Metadata(format!(
                    "the chunk of {} bytes at {offset} does not match its hash {}",
                    c.len, c.hash
                )),
            )
            .into());
        }
        Ok(bytes)
    }

    /// Closes the file last read from.
    pub(crate) fn close(&mut self) {
        self.open = None;
    }
}

/// A rank's level-4 file being read back, chunk by chunk, each checked
/// against its hash and lent as the next piece of the file.
pub struct Chunks {
    reader: ChunkReader,
    refs: std::vec::IntoIter<ChunkRef>,
}

impl Chunks {
    /// The file made of `refs`, read from `dir`.
    pub(super) fn new(dir: Dir, refs: Vec<ChunkRef>) -> Self {
        Self {
            reader: ChunkReader::new(dir),
            refs: refs.into_iter(),
        }
    }
}

impl Chunks {
    /// The same pieces, not checked against their hashes: for a reader
    /// that checks every byte itself (a file installed into level 1 has
    /// its header and every chunk's CRC checked as it passes), so that the
    /// bytes are read once rather than twice.
    pub(crate) fn checked_by_reader(mut self) -> Self {
        self.reader.hashed = false;
        self
    }
}

impl PieceSource for Chunks {
    type Error = StorageError;

    fn next_piece(&mut self) -> Result<Option<&[u8]>, StorageError> {
        let Some(c) = self.refs.next() else {
            self.reader.close();
            return Ok(None);
        };
        self.reader.read(&c).map(Some)
    }
}

/// A temporary name's tag of this writer alone: a host cut off the network
/// may still be writing a rank's chunks while its replacement does.
pub(super) fn writer_tag(rank: u32) -> String {
    format!(
        "{rank}-{:016x}",
        getrandom::u64().unwrap_or_else(|_| u64::from(std::process::id()))
    )
}

/// Writes one chunk durably, hashing it on the way (one pass over the
/// bytes), and names it by its hash; returns the hash.
pub(super) fn write_new_chunk(dir: &Dir, piece: &[u8], rank: u32) -> Result<String, StorageError> {
    let need = piece.len() as u64;
    let fs = |e| StorageError::from_fs(e, need);
    let mut file = dir.begin_atomic(INCOMING, &writer_tag(rank)).map_err(fs)?;
    let mut hasher = blake3::Hasher::new();
    for step in piece.chunks(HASH_STEP) {
        hasher.update(step);
        file.write(step).map_err(fs)?;
    }
    let hash = hash_name(&hasher.finalize());
    file.commit_as(&hash).map_err(fs)?;
    Ok(hash)
}

/// Writes every chunk of `file` (`chunk` bytes each) in a file of its own
/// named by its hash, hashing and writing each straight from a mapping of
/// the file where it maps (no copy into a buffer first), else read.
pub(super) fn write_full(
    chunks: &Dir,
    mut file: Pieces,
    chunk: usize,
    rank: u32,
) -> Result<(Vec<ChunkRef>, Written), StorageError> {
    let mut stats = Written::default();
    let mut refs = Vec::new();
    file.each(chunk, |piece| {
        let hash = write_new_chunk(chunks, piece, rank)?;
        stats.written += piece.len() as u64;
        refs.push(ChunkRef {
            hash,
            len: piece.len() as u64,
            pack: None,
        });
        Ok(())
    })?;
    chunks.sync()?;
    Ok((refs, stats))
}
