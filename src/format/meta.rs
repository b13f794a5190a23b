//! The metadata record kept beside each checkpoint file.
//!
//! A small JSON document that says what the file holds (ids, level, ranks,
//! node, regions, sizes, checksums, time) without reading it. Tools list
//! checkpoints from these records, and recovery uses them to decide what is
//! available before touching any data. A record must agree with its file:
//! [`Metadata::check_file`] compares the two.

use super::{CheckpointFile, Compression, FormatError, FormatErrorKind};
use crate::region::RegionInfo;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// What one rank's checkpoint file holds, recorded when it was written.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Metadata {
    /// Format version of the data file.
    pub format_version: u16,
    /// Job id.
    pub job_id: String,
    /// Checkpoint id.
    pub checkpoint_id: u64,
    /// Checkpoint level (1 to 4) of this copy.
    pub level: u8,
    /// Rank that wrote it.
    pub rank: u32,
    /// Ranks in the job.
    pub world_size: u32,
    /// Node the rank ran on.
    pub node: u32,
    /// Name of the data file, relative to the record's directory.
    pub file: String,
    /// Length of the data file.
    pub file_len: u64,
    /// CRC of the data file's header and tables.
    pub header_crc: u32,
    /// CRC of all stored chunk bytes.
    pub data_crc: u32,
    /// Bytes of region data.
    pub raw_bytes: u64,
    /// Bytes of chunk data as stored.
    pub stored_bytes: u64,
    /// Compression requested for the checkpoint.
    pub compression: Compression,
    /// Regions, in id order.
    pub regions: Vec<RegionInfo>,
    /// Creation time, milliseconds since the Unix epoch.
    pub created_unix_ms: u64,
}

impl Metadata {
    /// Serialises the record as JSON.
    pub fn to_json(&self) -> Vec<u8> {
        // Serialising plain fields to a Vec cannot fail.
        serde_json::to_vec_pretty(self).unwrap_or_default()
    }

    /// Reads a record from `path`.
    pub fn read(path: impl AsRef<Path>) -> Result<Self, FormatError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|e| FormatError::new(path, e))?;
        serde_json::from_slice(&bytes).map_err(|e| {
            FormatError::new(
                path,
                FormatErrorKind::Metadata(format!("unreadable record: {e}")),
            )
        })
    }

    /// Checks that `file` is the data file this record describes.
    pub fn check_file(&self, file: &CheckpointFile) -> Result<(), FormatError> {
        let h = file.header();
        let mut diffs = Vec::new();
        let mut cmp = |what: &str, meta: String, data: String| {
            if meta != data {
                diffs.push(format!(
                    "{what} is {meta} in the record but {data} in the file"
                ));
            }
        };
        cmp("job id", self.job_id.clone(), h.job_id.clone());
        cmp(
            "checkpoint id",
            self.checkpoint_id.to_string(),
            h.checkpoint_id.to_string(),
        );
        cmp("rank", self.rank.to_string(), h.rank.to_string());
        cmp(
            "world size",
            self.world_size.to_string(),
            h.world_size.to_string(),
        );
        cmp(
            "file length",
            self.file_len.to_string(),
            h.file_len.to_string(),
        );
        cmp(
            "header CRC",
            format!("{:#010x}", self.header_crc),
            format!("{:#010x}", h.header_crc),
        );
        cmp(
            "data CRC",
            format!("{:#010x}", self.data_crc),
            format!("{:#010x}", file.data_crc()),
        );
        cmp(
            "regions",
            format!("{:?}", self.regions),
            format!("{:?}", file.regions()),
        );
        if diffs.is_empty() {
            Ok(())
        } else {
            Err(FormatError::new(
                file.path(),
                FormatErrorKind::Metadata(format!(
                    "does not match its record: {}",
                    diffs.join("; ")
                )),
            ))
        }
    }
}
