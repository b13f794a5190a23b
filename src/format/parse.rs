//! Decoding and validating the header and tables of a checkpoint file: the
//! magic, version, header CRC, zero padding and reserved bits, and a layout
//! in which regions own consecutive chunks that tile the file exactly.

use super::header::{ChunkInfo, FileHeader, RegionEntry};
use super::layout::{self, RawChunk, RawHeader, RawRegion, CHUNK_SIZE, HEADER_SIZE, REGION_SIZE};
use super::{Codec, FormatErrorKind, MAX_CHUNK, MAX_JOB_ID};
use crate::region::{ElemType, RegionInfo};
use zerocopy::FromBytes;

pub(super) fn inconsistent(msg: impl Into<String>) -> FormatErrorKind {
    FormatErrorKind::Inconsistent(msg.into())
}

/// Decodes and validates a header and its tables. `head` holds the first
/// `header_len` bytes of the file; `actual_len` is the file's length on disk.
pub(super) fn parse(
    head: &[u8],
    actual_len: u64,
) -> Result<(FileHeader, Vec<RegionEntry>, Vec<ChunkInfo>), FormatErrorKind> {
    let raw = RawHeader::read_from_prefix(head)
        .map(|(h, _)| h)
        .map_err(|_| FormatErrorKind::Truncated {
            expected: HEADER_SIZE as u64,
            actual: actual_len,
        })?;
    let header_len = u64::from(raw.header_len.get());
    let region_count = raw.region_count.get() as usize;
    let chunk_count = raw.chunk_count.get() as usize;
    let tables_len = region_count
        .checked_mul(REGION_SIZE)
        .and_then(|r| r.checked_add(chunk_count.checked_mul(CHUNK_SIZE)?))
        .filter(|t| (HEADER_SIZE + t) as u64 <= header_len)
        .ok_or_else(|| inconsistent("tables do not fit in the header"))?;
    let tables = head
        .get(HEADER_SIZE..HEADER_SIZE + tables_len)
        .ok_or_else(|| inconsistent("header shorter than its tables"))?;
    let computed = layout::header_crc(&raw, tables);
    if computed != raw.header_crc.get() {
        return Err(FormatErrorKind::HeaderCrc {
            stored: raw.header_crc.get(),
            computed,
        });
    }
    let padding = head.get(HEADER_SIZE + tables_len..).unwrap_or_default();
    if padding.iter().any(|b| *b != 0) {
        return Err(inconsistent("non-zero bytes in the header padding"));
    }
    if raw.reserved.iter().any(|b| *b != 0) || raw.flags.get() > 1 {
        return Err(inconsistent("reserved header bits are set"));
    }
    let job_len = raw.job_id_len.get() as usize;
    let job_id = raw
        .job_id
        .get(..job_len)
        .filter(|_| job_len <= MAX_JOB_ID)
        .and_then(|b| std::str::from_utf8(b).ok())
        .ok_or_else(|| inconsistent("job id is not valid UTF-8 of at most 64 bytes"))?
        .to_string();
    let chunk_size = raw.chunk_size.get();
    if chunk_size == 0 || u64::from(chunk_size) > MAX_CHUNK {
        return Err(inconsistent(format!("chunk size {chunk_size}")));
    }
    let header = FileHeader {
        job_id,
        checkpoint_id: raw.checkpoint_id.get(),
        rank: raw.rank.get(),
        world_size: raw.world_size.get(),
        node: raw.node.get(),
        stamp: raw.stamp.get(),
        version: raw.version.get(),
        compressed: raw.flags.get() & 1 != 0,
        chunk_size,
        header_len,
        file_len: raw.file_len.get(),
        created_unix_ms: raw.created_unix_ms.get(),
        header_crc: computed,
    };
    if header.rank >= header.world_size {
        return Err(inconsistent(format!(
            "rank {} is not below world size {}",
            header.rank, header.world_size
        )));
    }
    let (region_bytes, chunk_bytes) = tables.split_at(region_count * REGION_SIZE);
    let raw_regions = <[RawRegion]>::ref_from_bytes(region_bytes)
        .map_err(|_| inconsistent("region table size"))?;
    let raw_chunks =
        <[RawChunk]>::ref_from_bytes(chunk_bytes).map_err(|_| inconsistent("chunk table size"))?;

    let mut regions = Vec::with_capacity(region_count);
    let mut chunks = Vec::with_capacity(chunk_count);
    let mut next_offset = header_len;
    for (i, r) in raw_regions.iter().enumerate() {
        let id = r.id.get();
        if regions
            .last()
            .is_some_and(|p: &RegionEntry| p.info.id >= id)
        {
            return Err(inconsistent(format!("region {id} out of order")));
        }
        if r.reserved != [0; 3] {
            return Err(inconsistent(format!("region {id}: reserved bytes are set")));
        }
        let elem = ElemType::from_code(r.elem)
            .ok_or_else(|| inconsistent(format!("region {id}: unknown element type {}", r.elem)))?;
        let info = RegionInfo {
            id,
            elem,
            count: r.count.get(),
        };
        let byte_len = r.byte_len.get();
        if info.count.checked_mul(elem.size() as u64) != Some(byte_len) {
            return Err(inconsistent(format!(
                "region {id}: size does not match count"
            )));
        }
        let first = r.first_chunk.get();
        let n = r.chunk_count.get();
        if first as usize != chunks.len() {
            return Err(inconsistent(format!("region {id}: chunks out of sequence")));
        }
        let mut covered = 0u64;
        for k in 0..n {
            let index = first
                .checked_add(k)
                .ok_or_else(|| inconsistent("chunk index overflow"))?;
            let c = raw_chunks
                .get(index as usize)
                .ok_or_else(|| inconsistent(format!("region {id}: chunk {index} missing")))?;
            if c.reserved != [0; 3] {
                return Err(inconsistent(format!(
                    "chunk {index}: reserved bytes are set"
                )));
            }
            let codec = Codec::from_code(c.codec)
                .ok_or_else(|| inconsistent(format!("chunk {index}: unknown codec {}", c.codec)))?;
            let (stored, raw_len) = (c.stored_len.get(), c.raw_len.get());
            let last = k + 1 == n;
            let size_ok = raw_len > 0
                && raw_len <= chunk_size
                && (last || raw_len == chunk_size)
                && stored <= raw_len
                && (codec == Codec::Zstd || stored == raw_len);
            if !size_ok || c.offset.get() != next_offset {
                return Err(inconsistent(format!("chunk {index}: bad size or offset")));
            }
            next_offset += u64::from(stored);
            covered += u64::from(raw_len);
            chunks.push(ChunkInfo {
                region: id,
                index,
                offset: c.offset.get(),
                stored_len: stored,
                raw_len,
                crc: c.crc.get(),
                codec,
            });
        }
        if covered != byte_len {
            return Err(inconsistent(format!(
                "region {id} (table entry {i}): chunks hold {covered} bytes, region has {byte_len}"
            )));
        }
        regions.push(RegionEntry {
            info,
            first_chunk: first,
            chunk_count: n,
        });
    }
    if chunks.len() != chunk_count {
        return Err(inconsistent("chunks not owned by any region"));
    }
    if header.compressed != chunks.iter().any(|c| c.codec == Codec::Zstd) {
        return Err(inconsistent(
            "the compression flag disagrees with the chunk table",
        ));
    }
    if next_offset != header.file_len {
        return Err(inconsistent(format!(
            "chunks end at {next_offset}, header says the file is {} bytes",
            header.file_len
        )));
    }
    if actual_len < header.file_len {
        return Err(FormatErrorKind::Truncated {
            expected: header.file_len,
            actual: actual_len,
        });
    }
    if actual_len > header.file_len {
        return Err(inconsistent(format!(
            "{} unexpected bytes after the last chunk",
            actual_len - header.file_len
        )));
    }
    Ok((header, regions, chunks))
}
