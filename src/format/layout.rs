//! Fixed-size on-disk structures. All integers are little-endian; every
//! structure has alignment 1, so it can be read from any offset of a buffer.

use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// First eight bytes of every checkpoint file.
pub const MAGIC: [u8; 8] = *b"FRAMECKP";

/// The fixed header at offset 0 (160 bytes).
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
pub struct RawHeader {
    /// [`MAGIC`].
    pub magic: [u8; 8],
    /// Format version.
    pub version: U16,
    /// Bit 0: some chunks are zstd-compressed.
    pub flags: U16,
    /// Bytes before the first chunk: this header, both tables and zero padding
    /// up to a multiple of 4096.
    pub header_len: U32,
    /// Checkpoint id (increasing within a job).
    pub checkpoint_id: U64,
    /// Total file length.
    pub file_len: U64,
    /// Creation time, milliseconds since the Unix epoch.
    pub created_unix_ms: U64,
    /// Rank that wrote the file.
    pub rank: U32,
    /// Number of ranks in the job.
    pub world_size: U32,
    /// Chunk size used when writing.
    pub chunk_size: U32,
    /// Entries in the region table.
    pub region_count: U32,
    /// Entries in the chunk table.
    pub chunk_count: U32,
    /// Length of `job_id` in bytes.
    pub job_id_len: U32,
    /// Job id, UTF-8, zero padded.
    pub job_id: [u8; 64],
    /// Node the writing rank ran on.
    pub node: U32,
    /// Identifies the collective attempt that wrote the checkpoint: every
    /// rank's file of one checkpoint carries the same stamp.
    pub stamp: U64,
    /// Zero.
    pub reserved: [u8; 16],
    /// CRC32 of bytes 0..156 of this header followed by both tables.
    pub header_crc: U32,
}

/// One entry of the region table (32 bytes), in ascending id order.
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
pub struct RawRegion {
    /// Region id.
    pub id: U32,
    /// Element type code ([`crate::region::ElemType::code`]).
    pub elem: u8,
    /// Zero.
    pub reserved: [u8; 3],
    /// Number of elements.
    pub count: U64,
    /// Bytes of data (`count` times the element size).
    pub byte_len: U64,
    /// Index of the region's first chunk in the chunk table.
    pub first_chunk: U32,
    /// Number of chunks holding the region.
    pub chunk_count: U32,
}

/// One entry of the chunk table (24 bytes), in file order.
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
pub struct RawChunk {
    /// File offset of the stored bytes.
    pub offset: U64,
    /// Stored (possibly compressed) length.
    pub stored_len: U32,
    /// Original length.
    pub raw_len: U32,
    /// CRC32 of the stored bytes.
    pub crc: U32,
    /// `crate::format::Codec` code.
    pub codec: u8,
    /// Zero.
    pub reserved: [u8; 3],
}

/// Size of [`RawHeader`].
pub const HEADER_SIZE: usize = std::mem::size_of::<RawHeader>();
/// Size of [`RawRegion`].
pub const REGION_SIZE: usize = std::mem::size_of::<RawRegion>();
/// Size of [`RawChunk`].
pub const CHUNK_SIZE: usize = std::mem::size_of::<RawChunk>();
/// Offset of `header_crc` within the header: the CRC covers the bytes before it.
pub const HEADER_CRC_OFFSET: usize = HEADER_SIZE - 4;

const _: () = assert!(HEADER_SIZE == 160);
const _: () = assert!(REGION_SIZE == 32);
const _: () = assert!(CHUNK_SIZE == 24);

/// CRC32 protecting the header and tables: bytes `0..156` of the header, then
/// the tables.
pub fn header_crc(header: &RawHeader, tables: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&header.as_bytes()[..HEADER_CRC_OFFSET]);
    h.update(tables);
    h.finalize()
}
