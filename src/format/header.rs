//! What a checkpoint file's header and tables say, once decoded and checked
//! ([`parse`](super::parse) makes these; [`reader`](super::reader) and the
//! tools use them).

use super::Codec;
use crate::region::{RegionId, RegionInfo};

/// The decoded fixed header of a checkpoint file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileHeader {
    /// Job id.
    pub job_id: String,
    /// Checkpoint id.
    pub checkpoint_id: u64,
    /// Rank that wrote the file.
    pub rank: u32,
    /// Ranks in the job.
    pub world_size: u32,
    /// Node the writing rank ran on.
    pub node: u32,
    /// The checkpoint's stamp (the same on every rank's file of it).
    pub stamp: u64,
    /// Format version.
    pub version: u16,
    /// Whether some chunk is compressed (header flag bit 0).
    pub compressed: bool,
    /// Chunk size used when writing.
    pub chunk_size: u32,
    /// Offset of the first chunk.
    pub header_len: u64,
    /// Total file length.
    pub file_len: u64,
    /// Creation time, milliseconds since the Unix epoch.
    pub created_unix_ms: u64,
    /// CRC of the header and tables.
    pub header_crc: u32,
}

/// Where one chunk lives and how to check it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkInfo {
    /// Region the chunk belongs to.
    pub region: RegionId,
    /// Index in the file's chunk table.
    pub index: u32,
    /// File offset.
    pub offset: u64,
    /// Stored length.
    pub stored_len: u32,
    /// Original length.
    pub raw_len: u32,
    /// CRC32 of the stored bytes.
    pub crc: u32,
    /// How the bytes are stored.
    pub codec: Codec,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct RegionEntry {
    pub(super) info: RegionInfo,
    pub(super) first_chunk: u32,
    pub(super) chunk_count: u32,
}
