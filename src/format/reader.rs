//! Opening, validating and loading checkpoint files.
//!
//! [`CheckpointFile::open`] reads only the header and tables; it checks the
//! magic, version, header CRC, that the tables describe a consistent layout
//! and that the file has exactly the length the header gives. Data is loaded
//! by [`CheckpointFile::load_region`] from a read-only mapping of the file
//! (on several threads for a large region, see `load`),
//! copied into the destination block by block with each block's CRC computed
//! while it is in cache (the snapshot's fused copy, run backwards).

use super::header::{ChunkInfo, FileHeader, RegionEntry};
use super::layout::{self, RawHeader, HEADER_SIZE};
use super::load;
use super::parse::{inconsistent, parse};
use super::{Codec, FormatError, FormatErrorKind, VERSION};
use crate::region::{RegionId, RegionInfo};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use zerocopy::FromBytes;

/// Largest header (with tables) accepted: bounds allocations on damaged input.
const MAX_HEADER: u64 = 256 << 20;
/// Read granularity when loading raw chunks.
const READ_BLOCK: usize = 64 * 1024;

/// An open, structurally valid checkpoint file.
#[derive(Debug)]
pub struct CheckpointFile {
    path: PathBuf,
    file: File,
    header: FileHeader,
    regions: Vec<RegionEntry>,
    chunks: Vec<ChunkInfo>,
    /// The file's bytes in memory: a read-only mapping made on the first
    /// load, or the mapping its writer kept.
    map: std::sync::OnceLock<Option<Mapping>>,
    /// Most threads a large region is loaded by.
    workers: usize,
}

/// A mapping of a checkpoint file.
#[derive(Debug)]
enum Mapping {
    /// Made for loading.
    Own(memmap2::Mmap),
    /// The writer's own, kept since it wrote the file.
    Shared(std::sync::Arc<memmap2::MmapMut>),
}

impl Mapping {
    fn bytes(&self) -> &[u8] {
        match self {
            Mapping::Own(m) => m,
            Mapping::Shared(m) => m,
        }
    }
}

impl CheckpointFile {
    /// Opens `path` (not following a symbolic link) and validates its
    /// header, tables and length.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, FormatError> {
        let path = path.as_ref();
        let file = crate::safefs::open_nofollow(path).map_err(|e| FormatError::new(path, e))?;
        Self::from_file(file, path)
    }

    /// Validates the header, tables and length of an open file; `path`
    /// names it in errors.
    pub fn from_file(file: File, path: impl AsRef<Path>) -> Result<Self, FormatError> {
        let path = path.as_ref();
        let err = |k: FormatErrorKind| FormatError::new(path, k);
        let actual = file.metadata().map_err(|e| err(e.into()))?.len();
        let (header, regions, chunks) =
            read_head(actual, |buf, at| file.read_exact_at(buf, at)).map_err(err)?;
        Ok(Self {
            path: path.to_path_buf(),
            file,
            header,
            regions,
            chunks,
            map: std::sync::OnceLock::new(),
            workers: 1,
        })
    }

    /// Checks a whole file held in memory, `image`, as [`open`](Self::open)
    /// and [`verify`](Self::verify) together would check it on disk: header,
    /// tables, length and every chunk. `path` names it in errors. Used where
    /// a file arrives whole (from another node, a decode or level 4) before
    /// it is written, so that it is checked without being read back.
    pub fn verify_image(image: &[u8], path: impl AsRef<Path>) -> Result<FileHeader, FormatError> {
        let path = path.as_ref();
        let err = |k: FormatErrorKind| FormatError::new(path, k);
        let (header, _, chunks) = read_head(image.len() as u64, |buf, at| {
            let start = usize::try_from(at).unwrap_or(usize::MAX);
            match image.get(start..start.saturating_add(buf.len())) {
                Some(src) => {
                    buf.copy_from_slice(src);
                    Ok(())
                }
                None => Err(std::io::ErrorKind::UnexpectedEof.into()),
            }
        })
        .map_err(err)?;
        check_image(&chunks, image).map_err(err)?;
        Ok(header)
    }

    /// Reads the whole file with one read and checks every chunk in
    /// memory; the bytes, for sending or installing elsewhere.
    pub fn read_verified(&self) -> Result<Vec<u8>, FormatError> {
        let mut bytes = vec![0u8; self.header.file_len as usize];
        self.file
            .read_exact_at(&mut bytes, 0)
            .map_err(|e| self.err(e.into()))?;
        check_image(&self.chunks, &bytes).map_err(|k| self.err(k))?;
        Ok(bytes)
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's length on disk (equal to the header's length: files of
    /// any other length are refused when opened).
    pub fn len_on_disk(&self) -> u64 {
        self.header.file_len
    }

    /// The decoded header.
    pub fn header(&self) -> &FileHeader {
        &self.header
    }

    /// The regions stored, in id order.
    pub fn regions(&self) -> Vec<RegionInfo> {
        self.regions.iter().map(|r| r.info).collect()
    }

    /// The stored region `id`, if present.
    pub fn region(&self, id: RegionId) -> Option<RegionInfo> {
        self.entry(id).map(|r| r.info)
    }

    /// Every chunk, in file order.
    pub fn chunks(&self) -> &[ChunkInfo] {
        &self.chunks
    }

    /// Bytes of region data.
    pub fn raw_bytes(&self) -> u64 {
        self.chunks.iter().map(|c| u64::from(c.raw_len)).sum()
    }

    /// Bytes of chunk data as stored.
    pub fn stored_bytes(&self) -> u64 {
        self.chunks.iter().map(|c| u64::from(c.stored_len)).sum()
    }

    /// CRC of all stored chunk bytes in file order, derived from the chunk CRCs.
    pub fn data_crc(&self) -> u32 {
        let mut all = crc32fast::Hasher::new();
        for c in &self.chunks {
            all.combine(&crc32fast::Hasher::new_with_initial_len(
                c.crc,
                u64::from(c.stored_len),
            ));
        }
        all.finalize()
    }

    fn entry(&self, id: RegionId) -> Option<&RegionEntry> {
        self.regions
            .binary_search_by_key(&id, |r| r.info.id)
            .ok()
            .map(|i| &self.regions[i])
    }

    fn err(&self, kind: FormatErrorKind) -> FormatError {
        FormatError::new(&self.path, kind)
    }

    fn crc_error(&self, c: &ChunkInfo, computed: u32) -> FormatError {
        self.err(crc_error(c, computed))
    }

    /// Chunk `c`'s stored bytes in the file's mapping (mapped on first use,
    /// each chunk's pages mapped in as it is asked for), or `None` where the
    /// file cannot be mapped.
    fn mapped(&self, c: &ChunkInfo) -> Option<&[u8]> {
        let map = self.map.get_or_init(|| {
            // SAFETY: the file was validated to be exactly `file_len` bytes
            // long, and frame's checkpoint files are only ever replaced (by
            // rename), never truncated in place, by the processes allowed in
            // their private directories.
            unsafe { memmap2::Mmap::map(&self.file) }
                .ok()
                .map(Mapping::Own)
        });
        let start = usize::try_from(c.offset).ok()?;
        let len = c.stored_len as usize;
        let map = map.as_ref()?;
        let bytes = map.bytes().get(start..start.checked_add(len)?)?;
        if let Mapping::Own(own) = map {
            // One call fills the chunk's page tables instead of a fault per
            // few pages; where the kernel lacks it, the faults do the same.
            let _ = own.advise_range(memmap2::Advice::PopulateRead, start, len);
        }
        Some(bytes)
    }

    /// Lets up to `n` threads load each large region (1, the default: the
    /// calling thread alone).
    pub fn set_workers(&mut self, n: usize) {
        self.workers = n.max(1);
    }

    /// Loads from `map`, a writable mapping of this very file that its
    /// writer kept, instead of mapping the file again. Ignored if `map` does
    /// not have the file's length.
    pub fn use_mapping(&mut self, map: std::sync::Arc<memmap2::MmapMut>) {
        if map.len() as u64 == self.header.file_len {
            self.map = std::sync::OnceLock::from(Some(Mapping::Shared(map)));
        }
    }

    /// Device and inode of the file.
    pub fn identity(&self) -> Option<(u64, u64)> {
        use std::os::unix::fs::MetadataExt;
        self.file.metadata().ok().map(|m| (m.dev(), m.ino()))
    }

    /// Reads a chunk's stored bytes into `buf` and checks their CRC.
    fn read_stored(&self, c: &ChunkInfo, buf: &mut Vec<u8>) -> Result<(), FormatError> {
        buf.resize(c.stored_len as usize, 0);
        self.file
            .read_exact_at(buf, c.offset)
            .map_err(|e| self.err(e.into()))?;
        let computed = crc32fast::hash(buf);
        if computed != c.crc {
            return Err(self.crc_error(c, computed));
        }
        Ok(())
    }

    fn decompress(
        &self,
        c: &ChunkInfo,
        dec: &mut zstd::bulk::Decompressor<'_>,
        src: &[u8],
        dst: &mut [u8],
    ) -> Result<(), FormatError> {
        decompress_into(c, dec, src, dst).map_err(|k| self.err(k))
    }

    /// Region `id` of frame's own bookkeeping, loaded whole (every CRC
    /// checked): `None` when the file has no such region, an error when it
    /// holds more than `max` bytes.
    pub(crate) fn load_small_region(
        &self,
        id: RegionId,
        max: u64,
    ) -> Result<Option<Vec<u8>>, String> {
        let Some(info) = self.region(id) else {
            return Ok(None);
        };
        let len = info.bytes();
        if len > max {
            return Err(format!(
                "region {id} holds {len} bytes, more than the {max} it may"
            ));
        }
        let mut bytes = vec![0u8; len as usize];
        self.load_region(id, &mut bytes)
            .map_err(|e| e.to_string())?;
        Ok(Some(bytes))
    }

    /// Loads region `id` into `dst`, which must be exactly the region's size.
    /// Every chunk's CRC is checked as it is read.
    pub fn load_region(&self, id: RegionId, dst: &mut [u8]) -> Result<(), FormatError> {
        let entry = *self
            .entry(id)
            .ok_or_else(|| self.err(FormatErrorKind::NoRegion(id)))?;
        if dst.len() as u64 != entry.info.bytes() {
            return Err(self.err(FormatErrorKind::SizeMismatch {
                region: id,
                got: dst.len() as u64,
                expected: entry.info.bytes(),
            }));
        }
        let first = entry.first_chunk as usize;
        let chunks = self
            .chunks
            .get(first..first.saturating_add(entry.chunk_count as usize))
            .ok_or_else(|| self.err(inconsistent("region's chunk range")))?;
        let bytes = dst.len();
        let mut pieces = Vec::with_capacity(chunks.len());
        let mut rest = dst;
        for c in chunks {
            let (out, tail) = rest
                .split_at_mut_checked(c.raw_len as usize)
                .ok_or_else(|| self.err(inconsistent("region's chunk lengths")))?;
            pieces.push((c, out));
            rest = tail;
        }
        load::spread(
            pieces,
            load::workers(bytes, chunks.len(), self.workers),
            || (Vec::new(), None),
            |(scratch, decoder), (c, out)| self.load_chunk(c, out, scratch, decoder),
        )
    }

    /// Loads chunk `c` into `out` (its raw length), checking its CRC;
    /// `scratch` and `decoder` are the calling thread's, for compressed
    /// chunks.
    fn load_chunk(
        &self,
        c: &ChunkInfo,
        out: &mut [u8],
        scratch: &mut Vec<u8>,
        decoder: &mut Option<zstd::bulk::Decompressor<'static>>,
    ) -> Result<(), FormatError> {
        match c.codec {
            Codec::Raw => {
                let mut crc = crc32fast::Hasher::new();
                match self.mapped(c) {
                    Some(stored) => super::copy::copy_with_crc(out, stored, &mut crc),
                    None => {
                        let mut offset = c.offset;
                        for block in out.chunks_mut(READ_BLOCK) {
                            self.file
                                .read_exact_at(block, offset)
                                .map_err(|e| self.err(e.into()))?;
                            crc.update(block);
                            offset += block.len() as u64;
                        }
                    }
                }
                let computed = crc.finalize();
                if computed != c.crc {
                    return Err(self.crc_error(c, computed));
                }
            }
            Codec::Zstd => {
                self.read_stored(c, scratch)?;
                if decoder.is_none() {
                    *decoder =
                        Some(zstd::bulk::Decompressor::new().map_err(|e| self.err(e.into()))?);
                }
                if let Some(dec) = decoder.as_mut() {
                    self.decompress(c, dec, scratch, out)?;
                }
            }
        }
        Ok(())
    }

    /// Checks every chunk (CRC, and decompression for compressed chunks) and
    /// returns every problem found; an empty list means the file is sound.
    pub fn verify(&self) -> Vec<FormatError> {
        let mut problems = Vec::new();
        let mut stored = Vec::new();
        let mut check = match ChunkCheck::new() {
            Ok(c) => c,
            Err(k) => return vec![self.err(k)],
        };
        for c in &self.chunks {
            stored.resize(c.stored_len as usize, 0);
            if let Err(e) = self.file.read_exact_at(&mut stored, c.offset) {
                problems.push(self.err(e.into()));
                continue;
            }
            if let Err(k) = check.check(c, &stored) {
                problems.push(self.err(k));
            }
        }
        problems
    }
}

impl Drop for CheckpointFile {
    fn drop(&mut self) {
        if let Some(Some(Mapping::Own(map))) = self.map.take() {
            load::unmap_later(map);
        }
    }
}

/// The length of the header and tables a file announces in its fixed
/// header `fixed` (the first [`HEADER_SIZE`] bytes), after checking the
/// magic, the version and that length's bounds.
pub(super) fn header_len_of(fixed: &[u8]) -> Result<u64, FormatErrorKind> {
    let raw = RawHeader::read_from_prefix(fixed)
        .map(|(h, _)| h)
        .map_err(|_| inconsistent("header size"))?;
    if raw.magic != layout::MAGIC {
        return Err(FormatErrorKind::BadMagic);
    }
    if raw.version.get() != VERSION {
        return Err(FormatErrorKind::Version(raw.version.get()));
    }
    let header_len = u64::from(raw.header_len.get());
    if header_len < HEADER_SIZE as u64 || header_len > MAX_HEADER {
        return Err(inconsistent(format!("header length {header_len}")));
    }
    Ok(header_len)
}

/// Reads and validates a file's fixed header, tables and length through
/// `read_at` (a positioned read of the file, `actual` bytes long).
pub(super) fn read_head(
    actual: u64,
    read_at: impl Fn(&mut [u8], u64) -> std::io::Result<()>,
) -> Result<(FileHeader, Vec<RegionEntry>, Vec<ChunkInfo>), FormatErrorKind> {
    let mut fixed = [0u8; HEADER_SIZE];
    if actual < HEADER_SIZE as u64 {
        // Distinguish "not ours" from "ours but cut short" where possible.
        let mut probe = vec![0u8; actual as usize];
        read_at(&mut probe, 0)?;
        if !layout::MAGIC.starts_with(&probe[..probe.len().min(8)]) {
            return Err(FormatErrorKind::BadMagic);
        }
        return Err(FormatErrorKind::Truncated {
            expected: HEADER_SIZE as u64,
            actual,
        });
    }
    read_at(&mut fixed, 0)?;
    let header_len = header_len_of(&fixed)?;
    if actual < header_len {
        return Err(FormatErrorKind::Truncated {
            expected: header_len,
            actual,
        });
    }
    let mut head = vec![0u8; header_len as usize];
    read_at(&mut head, 0)?;
    parse(&head, actual)
}

/// Checks every chunk of a whole file held in memory. The layout was
/// validated against the image's length, so every chunk lies inside it; a
/// chunk that does not is reported as truncation, never a panic.
fn check_image(chunks: &[ChunkInfo], image: &[u8]) -> Result<(), FormatErrorKind> {
    let mut check = ChunkCheck::new()?;
    for c in chunks {
        let stored = usize::try_from(c.offset)
            .ok()
            .and_then(|at| image.get(at..at.checked_add(c.stored_len as usize)?))
            .ok_or(FormatErrorKind::Truncated {
                expected: c.offset.saturating_add(u64::from(c.stored_len)),
                actual: image.len() as u64,
            })?;
        check.check(c, stored)?;
    }
    Ok(())
}

/// Checks chunks' stored bytes: the CRC, and that compressed ones
/// decompress to their original length.
pub(super) struct ChunkCheck {
    decoder: zstd::bulk::Decompressor<'static>,
    raw: Vec<u8>,
}

impl ChunkCheck {
    pub(super) fn new() -> Result<Self, FormatErrorKind> {
        Ok(Self {
            decoder: zstd::bulk::Decompressor::new()?,
            raw: Vec::new(),
        })
    }

    /// The raw bytes of the compressed chunk checked last.
    pub(super) fn raw(&self) -> &[u8] {
        &self.raw
    }

    pub(super) fn check(&mut self, c: &ChunkInfo, stored: &[u8]) -> Result<(), FormatErrorKind> {
        let computed = crc32fast::hash(stored);
        if computed != c.crc {
            return Err(crc_error(c, computed));
        }
        if c.codec == Codec::Zstd {
            self.raw.resize(c.raw_len as usize, 0);
            decompress_into(c, &mut self.decoder, stored, &mut self.raw)?;
        }
        Ok(())
    }
}

pub(super) fn crc_error(c: &ChunkInfo, computed: u32) -> FormatErrorKind {
    FormatErrorKind::ChunkCrc {
        region: c.region,
        chunk: c.index,
        offset: c.offset,
        stored: c.crc,
        computed,
    }
}

/// Decompresses chunk `c`'s stored bytes `src` into `dst`, which must come
/// out exactly full.
fn decompress_into(
    c: &ChunkInfo,
    dec: &mut zstd::bulk::Decompressor<'_>,
    src: &[u8],
    dst: &mut [u8],
) -> Result<(), FormatErrorKind> {
    let bad = |message: String| FormatErrorKind::Decompress {
        region: c.region,
        chunk: c.index,
        message,
    };
    match dec.decompress_to_buffer(src, dst) {
        Ok(n) if n == dst.len() => Ok(()),
        Ok(n) => Err(bad(format!("{n} bytes, expected {}", dst.len()))),
        Err(e) => Err(bad(e.to_string())),
    }
}
