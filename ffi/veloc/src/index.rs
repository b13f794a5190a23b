//! The job's checkpoints by name and version: which of frame's
//! checkpoints holds version v of checkpoint name. Rank 0 keeps one per
//! job, `frame-veloc-index-<job>.json` in the persistent directory (the
//! scratch one without), a private file replaced whole; the other ranks
//! learn its answers by broadcast.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The largest index read.
const MAX_BYTES: u64 = 4 << 20;
/// The most versions remembered (the oldest are forgotten first).
const MAX_VERSIONS: usize = 4096;

/// One version of one named checkpoint.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Version {
    /// frame's checkpoint id.
    pub id: u64,
    pub name: String,
    pub version: i64,
}

/// Every version, oldest first.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Index {
    pub versions: Vec<Version>,
}

impl Index {
    /// The index of job `job` kept in `dir`.
    pub fn path(dir: &Path, job: &str) -> PathBuf {
        dir.join(format!("frame-veloc-index-{job}.json"))
    }

    /// Reads the index of `job` in `dir` (empty when there is none).
    pub fn load(dir: &Path, job: &str) -> Result<Self, String> {
        frame_interface::json_file::load(&Self::path(dir, job), MAX_BYTES)
    }

    /// Replaces the index of `job` in `dir` with this one.
    pub fn save(&self, dir: &Path, job: &str) -> Result<(), String> {
        frame_interface::json_file::save(&Self::path(dir, job), self)
    }

    /// Records a committed version.
    pub fn add(&mut self, v: Version) {
        self.versions
            .retain(|o| o.id != v.id && !(o.name == v.name && o.version == v.version));
        self.versions.push(v);
        if self.versions.len() > MAX_VERSIONS {
            let extra = self.versions.len() - MAX_VERSIONS;
            self.versions.drain(..extra);
        }
    }

    /// The version frame's checkpoint `id` holds.
    pub fn of(&self, id: u64) -> Option<&Version> {
        self.versions.iter().find(|v| v.id == id)
    }

    /// The checkpoint that holds version `version` of `name`.
    pub fn find(&self, name: &str, version: i64) -> Option<&Version> {
        self.versions
            .iter()
            .rev()
            .find(|v| v.name == name && v.version == version)
    }

    /// The newest version of `name` at most `most` (any with `None`), of a
    /// checkpoint no newer than `below` (when given).
    pub fn newest(&self, name: &str, most: Option<i64>, below: Option<u64>) -> Option<&Version> {
        self.versions
            .iter()
            .filter(|v| v.name == name)
            .filter(|v| most.is_none_or(|m| v.version <= m))
            .filter(|v| below.is_none_or(|b| v.id <= b))
            .max_by_key(|v| (v.version, v.id))
    }

    /// Forgets every version of `name`.
    pub fn forget(&mut self, name: &str) {
        self.versions.retain(|v| v.name != name);
    }
}

/// The version `VELOC_Restart_test(name, most)` answers: the one frame
/// found to restore (`natural`) if it is of `name` and fits, else the
/// newest indexed version of `name` that fits and is no newer than it.
/// An error when frame found a checkpoint the index does not name (the
/// index was lost): the program must not start over silently. A pure
/// function.
pub(crate) fn restart_test(
    index: &Index,
    natural: Option<u64>,
    name: &str,
    most: Option<i64>,
) -> Result<Option<i64>, String> {
    if let Some(n) = natural {
        let Some(v) = index.of(n) else {
            return Err(format!(
                "checkpoint {n} can be restored, but the index of versions does not name it"
            ));
        };
        if v.name == name && most.is_none_or(|m| v.version <= m) {
            return Ok(Some(v.version));
        }
    }
    Ok(index.newest(name, most, natural).map(|v| v.version))
}

#[cfg(test)]
mod tests;
