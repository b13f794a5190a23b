//! The job's named checkpoints: which of frame's checkpoints holds which
//! SCR dataset, so that `SCR_Current` and `SCR_Complete_restart(0)` can
//! pick one by name or age before any is read. Rank 0 keeps it in
//! `.scr/frame-index.json` below the prefix (a private file replaced
//! whole, never edited in place); every other rank learns its answers by
//! broadcast. A lost or unreadable index costs only the choice by name:
//! each checkpoint carries its own name (see [`crate::table`]), and the
//! newest one is restored without the index.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The largest index read (a bigger file is not libscr's).
const MAX_BYTES: u64 = 4 << 20;
/// The most datasets remembered (the oldest are forgotten first).
const MAX_DATASETS: usize = 4096;

/// A checkpoint dataset the program completed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Dataset {
    /// frame's checkpoint id.
    pub id: u64,
    /// The program's name for it.
    pub name: String,
    /// Its `SCR_FLAG_*` flags.
    pub flags: i32,
}

/// The datasets, oldest first, and the checkpoints the program dropped.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Index {
    pub datasets: Vec<Dataset>,
    /// Checkpoint ids `SCR_Drop` or `SCR_Delete` removed: never restored.
    pub dropped: Vec<u64>,
}

/// What the next restart reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pick {
    /// The checkpoint frame finds (the newest every rank can restore).
    Natural,
    /// This older (or chosen) checkpoint.
    From(u64),
    /// None: the program starts afresh.
    Nothing,
}

impl Pick {
    /// The pick as one number, for a broadcast.
    pub fn encode(self) -> u64 {
        match self {
            Pick::Natural => 0,
            Pick::From(id) => id,
            Pick::Nothing => u64::MAX,
        }
    }

    /// The pick [`encode`](Self::encode) gave.
    pub fn decode(n: u64) -> Self {
        match n {
            0 => Pick::Natural,
            u64::MAX => Pick::Nothing,
            id => Pick::From(id),
        }
    }
}

/// Picks the checkpoint to restart from: the one named `current` if the
/// program named one, else the newest indexed one older than `below`
/// after a restart the program found invalid, else the one frame found
/// (`natural`) unless the program dropped it, then the newest indexed one
/// older than it. A pure function of its arguments.
pub(crate) fn pick(
    index: &Index,
    natural: Option<u64>,
    current: Option<&str>,
    below: Option<u64>,
) -> Result<Pick, String> {
    if let Some(name) = current {
        let found = index
            .by_name(name)
            .ok_or_else(|| format!("no checkpoint is named {name:?} ({})", index.names()))?;
        return Ok(match natural {
            Some(n) if n == found.id => Pick::Natural,
            _ => Pick::From(found.id),
        });
    }
    let older = |than: u64| {
        index
            .datasets
            .iter()
            .filter(|d| d.id < than && !index.dropped.contains(&d.id))
            .map(|d| d.id)
            .max()
            .map_or(Pick::Nothing, Pick::From)
    };
    Ok(match (below, natural) {
        (Some(b), _) => older(b),
        (None, Some(n)) if index.dropped.contains(&n) => older(n),
        (None, Some(_)) => Pick::Natural,
        (None, None) => Pick::Nothing,
    })
}

impl Index {
    /// The index of the job run with `prefix`.
    pub fn path(prefix: &Path) -> PathBuf {
        prefix.join(".scr").join("frame-index.json")
    }

    /// Reads the index below `prefix` (empty when there is none).
    pub fn load(prefix: &Path) -> Result<Self, String> {
        frame_interface::json_file::load(&Self::path(prefix), MAX_BYTES)
    }

    /// Replaces the index below `prefix` with this one.
    pub fn save(&self, prefix: &Path) -> Result<(), String> {
        frame_interface::json_file::save(&Self::path(prefix), self)
    }

    /// The dataset named `name`, newest first.
    pub fn by_name(&self, name: &str) -> Option<&Dataset> {
        self.datasets
            .iter()
            .rev()
            .find(|d| d.name == name && !self.dropped.contains(&d.id))
    }

    /// Records a completed checkpoint dataset.
    pub fn add(&mut self, dataset: Dataset) {
        self.datasets.retain(|d| d.id != dataset.id);
        self.dropped.retain(|id| *id != dataset.id);
        self.datasets.push(dataset);
        if self.datasets.len() > MAX_DATASETS {
            let extra = self.datasets.len() - MAX_DATASETS;
            self.datasets.drain(..extra);
        }
    }

    /// Forgets dataset `name`; returns its checkpoint id, if it had one.
    pub fn drop_named(&mut self, name: &str) -> Option<u64> {
        let id = self.by_name(name)?.id;
        self.datasets.retain(|d| d.id != id);
        self.dropped.push(id);
        if self.dropped.len() > MAX_DATASETS {
            self.dropped.remove(0);
        }
        Some(id)
    }

    /// The names of the datasets, for messages.
    fn names(&self) -> String {
        let names: Vec<&str> = self
            .datasets
            .iter()
            .filter(|d| !self.dropped.contains(&d.id))
            .map(|d| d.name.as_str())
            .collect();
        match names.is_empty() {
            true => "none is".into(),
            false => format!("the job has {}", names.join(", ")),
        }
    }
}

#[cfg(test)]
mod tests;
