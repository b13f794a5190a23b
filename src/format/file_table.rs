//! The table of the program's files in a checkpoint of files
//! (`docs/FILES.md`): a region of frame's own ([`TABLE`], JSON) naming each
//! file and where its bytes are. A file is either a region of bytes of the
//! checkpoint file (ids from [`FIRST`] up, in the order the program named
//! them), or, in a level-1 checkpoint that never left its node, *held*: kept
//! as the program wrote it, beside the checkpoint file (`level::l1::held`),
//! with its length here.

use super::CheckpointFile;
use crate::region::RegionId;
use serde::{Deserialize, Serialize};

/// The first region id kept for frame's own regions (files, their table,
/// and the localised recovery's bookkeeping and counts above it).
pub(crate) const FIRST: RegionId = 0xFFFF_0000;
/// The region holding the table.
pub(crate) const TABLE: RegionId = RegionId::MAX - 2;
/// The most files one rank may name in one checkpoint.
pub(crate) const MAX_FILES: usize = 4096;
/// The longest table a reader accepts: every file with a name of 255
/// bytes, each escaped in JSON as six, and its place.
const MAX_TABLE: u64 = (MAX_FILES * (6 * 255 + 64)) as u64;

/// Why a checkpoint's table of files cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TableError {
    /// The table's region could not be loaded.
    #[error("its files' table: {0}")]
    Load(String),
    /// The table is not the JSON frame writes.
    #[error("its files' table is unreadable: {0}")]
    Unreadable(String),
    /// More files than one checkpoint may hold.
    #[error("its files' table names {0} files (at most {MAX_FILES})")]
    TooMany(usize),
    /// An entry in a region that is not one of frame's for files.
    #[error("file {name:?}: region {region} is not one of frame's")]
    NotFrames {
        /// The file.
        name: String,
        /// The region given.
        region: RegionId,
    },
    /// An entry with both places or neither.
    #[error("file {name:?}: the table must give a region or a held length, not {given}")]
    Place {
        /// The file.
        name: String,
        /// `both` or `neither`.
        given: &'static str,
    },
}

/// One file of the table, as stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Entry {
    /// The name the program gave it.
    pub(crate) name: String,
    /// The region of bytes holding it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) region: Option<RegionId>,
    /// Its length, when it is held beside the checkpoint file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) held: Option<u64>,
}

/// Where a file's bytes are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Place {
    /// In this region of the checkpoint file.
    Region(RegionId),
    /// Beside the checkpoint file, this many bytes long.
    Held(u64),
}

impl Entry {
    /// A file saved as region `region`.
    pub(crate) fn region(name: &str, region: RegionId) -> Self {
        Self {
            name: name.to_string(),
            region: Some(region),
            held: None,
        }
    }

    /// A file held beside the checkpoint file, `len` bytes long.
    pub(crate) fn held(name: &str, len: u64) -> Self {
        Self {
            name: name.to_string(),
            region: None,
            held: Some(len),
        }
    }

    /// Where the file is: exactly one of the two places.
    pub(crate) fn place(&self) -> Result<Place, TableError> {
        let name = || self.name.clone();
        match (self.region, self.held) {
            (Some(r), None) if (FIRST..TABLE).contains(&r) => Ok(Place::Region(r)),
            (Some(region), None) => Err(TableError::NotFrames {
                name: name(),
                region,
            }),
            (None, Some(len)) => Ok(Place::Held(len)),
            (region, _) => Err(TableError::Place {
                name: name(),
                given: if region.is_some() { "both" } else { "neither" },
            }),
        }
    }
}

/// The files of `table` held beside the checkpoint file: name and
/// length, in the table's order.
pub(crate) fn held(table: &[Entry]) -> Vec<(String, u64)> {
    table
        .iter()
        .filter_map(|e| match e.place() {
            Ok(Place::Held(len)) => Some((e.name.clone(), len)),
            _ => None,
        })
        .collect()
}

/// The table's bytes.
pub(crate) fn encode(entries: &[Entry]) -> Vec<u8> {
    serde_json::to_vec(entries).unwrap_or_default()
}

/// The table `file` holds (`None`: it holds no files), each entry's
/// place checked.
pub(crate) fn read(file: &CheckpointFile) -> Result<Option<Vec<Entry>>, TableError> {
    let Some(json) = (file.load_small_region(TABLE, MAX_TABLE)).map_err(TableError::Load)? else {
        return Ok(None);
    };
    let table: Vec<Entry> =
        serde_json::from_slice(&json).map_err(|e| TableError::Unreadable(e.to_string()))?;
    if table.len() > MAX_FILES {
        return Err(TableError::TooMany(table.len()));
    }
    for entry in &table {
        entry.place()?;
    }
    Ok(Some(table))
}

#[cfg(test)]
mod tests;
