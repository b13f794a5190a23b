//! The metadata record kept beside each checkpoint file.
//!
//! A small JSON document that says what the file holds (ids, level, ranks,
//! node, regions, sizes, checksums, time) without reading it. Tools list
//! checkpoints from these records, and recovery uses them to decide what is
//! available before touching any data. A record must agree with its file
//! ([`Metadata::check_file`]) and with the place it was found
//! ([`Metadata::check_place`]) before its data is used.

use super::{CheckpointFile, Compression, FormatError, FormatErrorKind};
use crate::region::RegionInfo;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Largest record accepted (bounds what a damaged file can make us read).
pub const MAX_RECORD: u64 = 64 << 20;

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
    /// Identifies the collective attempt that wrote the checkpoint; every
    /// rank's copy of one checkpoint has the same stamp.
    pub stamp: u64,
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

/// Where a record was found: what it must say about itself.
#[derive(Clone, Copy, Debug)]
pub struct Place<'a> {
    /// The job whose directory holds it.
    pub job_id: &'a str,
    /// The checkpoint whose directory holds it.
    pub checkpoint_id: u64,
    /// The rank its name belongs to.
    pub rank: u32,
    /// The level of the directory holding it.
    pub level: u8,
    /// The data file name that goes with it.
    pub file: &'a str,
    /// The number of ranks of the job reading it, when known.
    pub world_size: Option<u32>,
}

impl Metadata {
    /// Serialises the record as JSON.
    pub fn to_json(&self) -> Vec<u8> {
        // Serialising plain fields to a Vec cannot fail.
        serde_json::to_vec_pretty(self).unwrap_or_default()
    }

    /// Parses a record read from `path`.
    pub fn from_json(bytes: &[u8], path: impl AsRef<Path>) -> Result<Self, FormatError> {
        serde_json::from_slice(bytes).map_err(|e| {
            FormatError::new(
                path,
                FormatErrorKind::Metadata(format!("unreadable record: {e}")),
            )
        })
    }

    /// Every way this record's identity disagrees with where it was found;
    /// empty when it belongs there.
    pub fn misplacements(&self, place: &Place<'_>) -> Vec<String> {
        let mut out = Vec::new();
        if self.job_id != place.job_id {
            out.push(format!(
                "belongs to job `{}` but lies in the directory of job `{}`",
                self.job_id, place.job_id
            ));
        }
        if self.checkpoint_id != place.checkpoint_id {
            out.push(format!(
                "holds checkpoint {} but lies in checkpoint {}'s directory",
                self.checkpoint_id, place.checkpoint_id
            ));
        }
        if self.rank != place.rank {
            out.push(format!(
                "holds rank {}'s data under rank {}'s name",
                self.rank, place.rank
            ));
        }
        if self.level != place.level {
            out.push(format!(
                "is a level-{} record in a level-{} directory",
                self.level, place.level
            ));
        }
        if self.file != place.file {
            out.push(format!(
                "names data file `{}` instead of `{}`",
                self.file.escape_debug(),
                place.file
            ));
        }
        if let Some(size) = place.world_size.filter(|s| *s != self.world_size) {
            out.push(format!(
                "was written by a job of {} ranks, this run has {size}",
                self.world_size
            ));
        }
        out
    }

    /// Checks that this record belongs where it was found (`path` names it
    /// in the error).
    pub fn check_place(&self, place: &Place<'_>, path: &Path) -> Result<(), FormatError> {
        let wrong = self.misplacements(place);
        if wrong.is_empty() {
            return Ok(());
        }
        Err(FormatError::new(
            path,
            FormatErrorKind::Metadata(wrong.join("; ")),
        ))
    }

    /// Every field of this record that disagrees with `file`; empty when the
    /// file is the one the record describes. `on_disk` is the file's length
    /// on disk.
    pub fn differences(&self, file: &CheckpointFile, on_disk: u64) -> Vec<String> {
        let h = file.header();
        let hex = |v: u32| format!("{v:#010x}");
        let pairs = [
            (
                "format version",
                self.format_version.to_string(),
                h.version.to_string(),
            ),
            ("job id", self.job_id.clone(), h.job_id.clone()),
            (
                "checkpoint id",
                self.checkpoint_id.to_string(),
                h.checkpoint_id.to_string(),
            ),
            ("rank", self.rank.to_string(), h.rank.to_string()),
            (
                "world size",
                self.world_size.to_string(),
                h.world_size.to_string(),
            ),
            ("node", self.node.to_string(), h.node.to_string()),
            ("stamp", self.stamp.to_string(), h.stamp.to_string()),
            ("header CRC", hex(self.header_crc), hex(h.header_crc)),
            ("data CRC", hex(self.data_crc), hex(file.data_crc())),
            (
                "raw size",
                self.raw_bytes.to_string(),
                file.raw_bytes().to_string(),
            ),
            (
                "stored size",
                self.stored_bytes.to_string(),
                file.stored_bytes().to_string(),
            ),
            (
                "creation time",
                self.created_unix_ms.to_string(),
                h.created_unix_ms.to_string(),
            ),
            (
                "regions",
                format!("{:?}", self.regions),
                format!("{:?}", file.regions()),
            ),
        ];
        let mut diffs: Vec<String> = pairs
            .into_iter()
            .filter(|(_, meta, data)| meta != data)
            .map(|(what, meta, data)| {
                format!("{what} is {meta} in the record but {data} in the file")
            })
            .collect();
        if self.file_len != h.file_len || h.file_len != on_disk {
            diffs.push(format!(
                "file length is {} in the record, {} in the header and {on_disk} on disk",
                self.file_len, h.file_len
            ));
        }
        if self.compression == Compression::None && h.compressed {
            diffs.push("compression is none in the record but the file holds zstd chunks".into());
        }
        diffs
    }

    /// Checks that `file` is the data file this record describes.
    pub fn check_file(&self, file: &CheckpointFile) -> Result<(), FormatError> {
        let diffs = self.differences(file, file.len_on_disk());
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
