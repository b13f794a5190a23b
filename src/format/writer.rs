//! Writing one checkpoint file: data chunks first, header and tables last.
//!
//! Each chunk's CRC32 is computed while its bytes are copied (or over the
//! compressed bytes right after compression), so the data is read once. The
//! header, which holds the tables and their CRC, is written after all data,
//! so a file cut short never carries a valid header for missing data.

use super::layout::{self, RawChunk, RawHeader, RawRegion, HEADER_SIZE};
use super::{Codec, FormatErrorKind, Sink, DATA_ALIGN, MAX_CHUNK, MAX_JOB_ID, MIN_CHUNK, VERSION};
use crate::region::{RegionId, RegionInfo};
use zerocopy::{FromZeros, IntoBytes};

/// Identity and options of the file being written.
#[derive(Clone, Debug)]
pub(crate) struct WriteSpec<'a> {
    /// Job id (at most [`MAX_JOB_ID`] bytes).
    pub job_id: &'a str,
    /// Checkpoint id.
    pub checkpoint_id: u64,
    /// Writing rank.
    pub rank: u32,
    /// Ranks in the job.
    pub world_size: u32,
    /// Node the writing rank runs on.
    pub node: u32,
    /// The checkpoint's stamp (the same on every rank's file).
    pub stamp: u64,
    /// Chunk size in bytes.
    pub chunk_size: usize,
    /// zstd level, or `None` to store chunks raw.
    pub zstd_level: Option<i32>,
    /// Creation time, milliseconds since the Unix epoch.
    pub created_unix_ms: u64,
}

/// One region to save: its description and its bytes.
#[derive(Clone, Copy, Debug)]
pub struct RegionSource<'a> {
    /// Id, element type and count.
    pub info: RegionInfo,
    /// The data (`info.bytes()` long).
    pub bytes: &'a [u8],
}

/// Sizes of a file before it is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    /// Offset of the first chunk.
    pub header_len: u64,
    /// Largest size the file can reach (every chunk stored raw).
    pub capacity: u64,
    /// Number of chunks.
    pub chunk_count: u32,
}

/// Summary of a written file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Written {
    /// Final length of the file.
    pub file_len: u64,
    /// Bytes of region data.
    pub raw_bytes: u64,
    /// Bytes of chunk data as stored.
    pub stored_bytes: u64,
    /// CRC of the header and tables.
    pub header_crc: u32,
    /// CRC of all stored chunk bytes, in file order.
    pub data_crc: u32,
    /// Number of chunks.
    pub chunk_count: u32,
}

fn too_big(what: &str) -> FormatErrorKind {
    FormatErrorKind::Inconsistent(format!("{what} does not fit the file format"))
}

/// Computes the layout of a file holding `regions`, checking the limits of the
/// format. Regions must be in ascending id order.
pub(crate) fn plan(
    spec: &WriteSpec<'_>,
    regions: &[RegionSource<'_>],
) -> Result<Layout, FormatErrorKind> {
    if spec.job_id.len() > MAX_JOB_ID {
        return Err(too_big("job id"));
    }
    if !(MIN_CHUNK..=MAX_CHUNK).contains(&(spec.chunk_size as u64)) {
        return Err(FormatErrorKind::Inconsistent(format!(
            "chunk size {} outside {MIN_CHUNK}..={MAX_CHUNK}",
            spec.chunk_size
        )));
    }
    let mut chunks: u64 = 0;
    let mut data: u64 = 0;
    let mut previous: Option<RegionId> = None;
    for r in regions {
        if previous.is_some_and(|p| p >= r.info.id) {
            return Err(FormatErrorKind::Inconsistent(format!(
                "region {} is out of order or repeated",
                r.info.id
            )));
        }
        previous = Some(r.info.id);
        if r.info.bytes() != r.bytes.len() as u64 {
            return Err(FormatErrorKind::SizeMismatch {
                region: r.info.id,
                got: r.bytes.len() as u64,
                expected: r.info.bytes(),
            });
        }
        chunks += (r.bytes.len() as u64).div_ceil(spec.chunk_size as u64);
        data += r.bytes.len() as u64;
    }
    let chunk_count = u32::try_from(chunks).map_err(|_| too_big("chunk count"))?;
    u32::try_from(regions.len()).map_err(|_| too_big("region count"))?;
    let tables = HEADER_SIZE as u64
        + regions.len() as u64 * layout::REGION_SIZE as u64
        + chunks * layout::CHUNK_SIZE as u64;
    let header_len = tables.div_ceil(DATA_ALIGN) * DATA_ALIGN;
    u32::try_from(header_len).map_err(|_| too_big("header"))?;
    Ok(Layout {
        header_len,
        capacity: header_len + data,
        chunk_count,
    })
}

/// Writes a checkpoint file into `sink`, which must hold `layout.capacity`
/// bytes. `layout` must be what [`plan`] returned for the same spec and
/// regions. Returns the summary recorded in the metadata.
pub(crate) fn write_checkpoint(
    sink: &mut dyn Sink,
    spec: &WriteSpec<'_>,
    regions: &[RegionSource<'_>],
    layout: &Layout,
) -> Result<Written, FormatErrorKind> {
    if plan(spec, regions)? != *layout {
        return Err(FormatErrorKind::Inconsistent(
            "layout was planned for other regions".into(),
        ));
    }
    let mut compressor = match spec.zstd_level {
        Some(level) => {
            let mut c = zstd::bulk::Compressor::new(level)?;
            c.include_checksum(true)?;
            Some(c)
        }
        None => None,
    };
    let mut chunk_table = Vec::with_capacity(layout.chunk_count as usize);
    let mut region_table = Vec::with_capacity(regions.len());
    let mut data_crc = crc32fast::Hasher::new();
    let mut offset = layout.header_len;
    let mut any_compressed = false;
    for r in regions {
        let first_chunk = chunk_table.len() as u32;
        for piece in r.bytes.chunks(spec.chunk_size) {
            let mut crc = crc32fast::Hasher::new();
            let compressed = match compressor.as_mut() {
                Some(c) => {
                    let window = sink.window(offset, piece.len())?;
                    match c.compress_to_buffer(piece, window) {
                        Ok(n) if n < piece.len() => {
                            crc.update(&window[..n]);
                            sink.commit(offset, n)?;
                            Some(n)
                        }
                        // Incompressible (or larger than the raw bytes): store raw.
                        _ => None,
                    }
                }
                None => None,
            };
            let (codec, stored) = match compressed {
                Some(n) => (Codec::Zstd, n),
                None => {
                    sink.copy_in(offset, piece, &mut crc)?;
                    (Codec::Raw, piece.len())
                }
            };
            any_compressed |= codec == Codec::Zstd;
            data_crc.combine(&crc);
            let mut entry = RawChunk::new_zeroed();
            entry.offset.set(offset);
            entry.stored_len.set(stored as u32);
            entry.raw_len.set(piece.len() as u32);
            entry.crc.set(crc.finalize());
            entry.codec = codec.code();
            chunk_table.push(entry);
            offset += stored as u64;
        }
        let mut entry = RawRegion::new_zeroed();
        entry.id.set(r.info.id);
        entry.elem = r.info.elem.code();
        entry.count.set(r.info.count);
        entry.byte_len.set(r.bytes.len() as u64);
        entry.first_chunk.set(first_chunk);
        entry
            .chunk_count
            .set(chunk_table.len() as u32 - first_chunk);
        region_table.push(entry);
    }

    let mut header = RawHeader::new_zeroed();
    header.magic = layout::MAGIC;
    header.version.set(VERSION);
    header.flags.set(u16::from(any_compressed));
    header.header_len.set(layout.header_len as u32);
    header.checkpoint_id.set(spec.checkpoint_id);
    header.file_len.set(offset);
    header.created_unix_ms.set(spec.created_unix_ms);
    header.rank.set(spec.rank);
    header.world_size.set(spec.world_size);
    header.node.set(spec.node);
    header.stamp.set(spec.stamp);
    header.chunk_size.set(spec.chunk_size as u32);
    header.region_count.set(region_table.len() as u32);
    header.chunk_count.set(chunk_table.len() as u32);
    header.job_id_len.set(spec.job_id.len() as u32);
    header.job_id[..spec.job_id.len()].copy_from_slice(spec.job_id.as_bytes());
    let mut tables =
        Vec::with_capacity(region_table.as_bytes().len() + chunk_table.as_bytes().len());
    tables.extend_from_slice(region_table.as_bytes());
    tables.extend_from_slice(chunk_table.as_bytes());
    let header_crc = layout::header_crc(&header, &tables);
    header.header_crc.set(header_crc);

    let window = sink.window(0, layout.header_len as usize)?;
    window.fill(0);
    window[..HEADER_SIZE].copy_from_slice(header.as_bytes());
    window[HEADER_SIZE..HEADER_SIZE + tables.len()].copy_from_slice(&tables);
    sink.commit(0, layout.header_len as usize)?;

    Ok(Written {
        file_len: offset,
        raw_bytes: regions.iter().map(|r| r.bytes.len() as u64).sum(),
        stored_bytes: offset - layout.header_len,
        header_crc,
        data_crc: data_crc.finalize(),
        chunk_count: chunk_table.len() as u32,
    })
}
