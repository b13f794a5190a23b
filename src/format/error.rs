//! Errors of reading and writing checkpoint files; each names the file.

use crate::region::RegionId;
use std::path::{Path, PathBuf};

/// A checkpoint file could not be written, read or trusted.
#[derive(Debug, thiserror::Error)]
#[error("{}: {kind}", path.display())]
pub struct FormatError {
    /// The file concerned.
    pub path: PathBuf,
    /// What went wrong.
    pub kind: FormatErrorKind,
}

/// What went wrong with a checkpoint file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FormatErrorKind {
    /// An I/O operation failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The file does not start with the frame magic bytes.
    #[error("not a frame checkpoint file (bad magic bytes)")]
    BadMagic,
    /// The file was written by an unknown format version.
    #[error("format version {0} is not supported (this build reads version {v})", v = super::VERSION)]
    Version(u16),
    /// The file is shorter than its header says.
    #[error("truncated: {actual} bytes on disk, {expected} expected")]
    Truncated {
        /// Length the file should have (at least).
        expected: u64,
        /// Length found.
        actual: u64,
    },
    /// The header or tables were damaged.
    #[error("header checksum mismatch (stored {stored:#010x}, computed {computed:#010x})")]
    HeaderCrc {
        /// CRC recorded in the header.
        stored: u32,
        /// CRC of the bytes read.
        computed: u32,
    },
    /// The header passed its CRC but describes an impossible layout.
    #[error("inconsistent header: {0}")]
    Inconsistent(String),
    /// A data chunk was damaged.
    #[error("region {region}, chunk {chunk} at offset {offset}: CRC mismatch (stored {stored:#010x}, computed {computed:#010x})")]
    ChunkCrc {
        /// Region id.
        region: RegionId,
        /// Chunk index within the file.
        chunk: u32,
        /// File offset of the chunk.
        offset: u64,
        /// CRC recorded in the chunk table.
        stored: u32,
        /// CRC of the bytes read.
        computed: u32,
    },
    /// A compressed chunk passed its CRC but did not decompress to its size.
    #[error("region {region}, chunk {chunk}: cannot decompress: {message}")]
    Decompress {
        /// Region id.
        region: RegionId,
        /// Chunk index within the file.
        chunk: u32,
        /// Decoder message.
        message: String,
    },
    /// The requested region is not in the file.
    #[error("region {0} is not in this checkpoint")]
    NoRegion(RegionId),
    /// The destination buffer does not have the region's size.
    #[error("region {region}: {got} bytes given, checkpoint holds {expected}")]
    SizeMismatch {
        /// Region id.
        region: RegionId,
        /// Bytes provided.
        got: u64,
        /// Bytes stored.
        expected: u64,
    },
    /// The write would exceed the destination's capacity.
    #[error("write of {needed} bytes does not fit the {capacity}-byte destination")]
    Capacity {
        /// Bytes needed.
        needed: u64,
        /// Bytes available.
        capacity: u64,
    },
    /// A metadata record is unreadable or disagrees with its data file.
    #[error("metadata: {0}")]
    Metadata(String),
}

impl FormatError {
    /// Builds an error about `path`.
    pub fn new(path: impl AsRef<Path>, kind: impl Into<FormatErrorKind>) -> Self {
        Self {
            path: path.as_ref().to_path_buf(),
            kind: kind.into(),
        }
    }

    /// Whether the error comes from the storage running out of space (or a
    /// file-size limit), rather than from damaged data.
    pub fn is_no_space(&self) -> bool {
        matches!(&self.kind, FormatErrorKind::Io(e) if crate::safefs::is_no_space(e))
    }
}
