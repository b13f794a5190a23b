//! The checkpoint file format: one file per rank per checkpoint, plus a small
//! metadata record. The byte layout is specified in `docs/FORMAT.md`.
//!
//! - [`layout`]: the fixed-size structures at the start of a file.
//! - [`write_checkpoint`]: writes a file through a [`Sink`], computing each
//!   chunk's CRC32 in the same pass as the copy, optionally compressing
//!   chunks with zstd.
//! - [`CheckpointFile`]: opens, validates and loads a file, checking CRCs.
//! - [`StreamCheck`]: checks a file piece by piece as it is copied.
//! - [`Metadata`]: the per-checkpoint record kept beside each file.
//! - [`file_table`]: the table of the program's files in a checkpoint of
//!   files.
//!
//! Nothing here knows where files live or how they are committed; that is the
//! job of [`crate::level`].

mod copy;
mod error;
pub(crate) mod file_table;
mod header;
pub mod layout;
mod load;
mod meta;
mod parse;
mod reader;
mod sink;
mod stream;
mod writer;

pub(crate) use copy::copy_with_crc;
pub(crate) use error::{FormatError, FormatErrorKind};
pub(crate) use header::{ChunkInfo, FileHeader};
pub(crate) use meta::Place;
pub use meta::{Metadata, MAX_RECORD};
pub(crate) use reader::CheckpointFile;
pub(crate) use sink::{FileSink, Sink, SliceSink};
pub(crate) use stream::{StreamCheck, Target};
pub(crate) use writer::{plan, write_checkpoint, Layout, RegionSource, WriteSpec, Written};

/// Current format version, written into every file.
pub const VERSION: u16 = 2;
/// Longest job id that fits in a file header.
pub(crate) const MAX_JOB_ID: usize = 64;
/// Smallest allowed chunk size.
pub(crate) const MIN_CHUNK: u64 = 64 * 1024;
/// Largest allowed chunk size.
pub(crate) const MAX_CHUNK: u64 = 1 << 30;
/// Chunk data starts at a multiple of this offset.
pub(crate) const DATA_ALIGN: u64 = 4096;

/// Compression applied to a checkpoint's chunks (the `snapshot.compression` key).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    /// Data is stored as is.
    None,
    /// Each chunk is compressed with zstd (and stored raw when that does not help).
    Zstd,
}

impl std::fmt::Display for Compression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Compression::None => "none",
            Compression::Zstd => "zstd",
        })
    }
}

/// How a chunk's bytes are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Codec {
    /// Stored as is.
    Raw,
    /// One zstd frame.
    Zstd,
}

impl Codec {
    /// On-disk code.
    pub fn code(self) -> u8 {
        match self {
            Codec::Raw => 0,
            Codec::Zstd => 1,
        }
    }

    /// Codec with on-disk code `code`.
    pub fn from_code(code: u8) -> Option<Self> {
        match code {
            0 => Some(Codec::Raw),
            1 => Some(Codec::Zstd),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests;
