//! Checkpoints of files the program writes itself (restart files written
//! with stdio, MPI-IO or a library): the program begins a checkpoint, asks
//! for the path of each named file (a private file on the node's level-1
//! storage), writes it as usual, and ends the checkpoint.
//!
//! Ending saves each file into the rank's checkpoint file as a region of
//! bytes, read through a mapping of the file (never loaded whole), together
//! with the program's protected regions and a table of the names: from
//! there on a file is a region like any other (CRC per chunk, optional
//! compression, the same commit, promotion to levels 2 to 4, retention and
//! recovery). The saved copies are then removed. Recovering a checkpoint
//! that holds files writes each back into the same directory, chunk by
//! chunk into a mapping of the new file, before the program resumes; the
//! program asks for its path by name.
//!
//! Region ids from [`FIRST`] up are frame's: the files take them in the
//! order they were named, the names' table [`TABLE`].

use super::load_failure::LoadFailure;
use super::Checkpointer;
use crate::error::{Error, Result};
use crate::format::CheckpointFile;
use crate::level::{names, L1Store, Level};
use crate::region::{ElemType, RegionId, RegionInfo};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The first region id kept for frame's own regions (files, their table,
/// and the localised recovery's bookkeeping and counts above it).
pub(crate) const FIRST: RegionId = 0xFFFF_0000;
/// The region holding the names' table (JSON).
pub(crate) const TABLE: RegionId = RegionId::MAX - 2;
/// The most files one rank may name in one checkpoint.
pub(crate) const MAX_FILES: usize = 4096;

/// One file in a checkpoint's table.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Entry {
    name: String,
    region: RegionId,
}

/// The program's files: the checkpoint being written, and what the last
/// recovery restored.
#[derive(Default)]
pub(super) struct Files {
    /// Between `begin_checkpoint` and `end_checkpoint`: the level asked
    /// and the names handed out, in order.
    open: Option<(Level, Vec<String>)>,
    /// The files the restored checkpoint held, restored on this rank.
    pub(super) restored: Vec<String>,
}

/// A file's bytes, mapped for saving.
pub(super) enum Mapped {
    /// An empty file (nothing to map).
    Empty,
    /// The file's mapping.
    Map(memmap2::Mmap),
}

impl Mapped {
    pub(super) fn bytes(&self) -> &[u8] {
        match self {
            Mapped::Empty => &[],
            Mapped::Map(m) => m,
        }
    }
}

impl Checkpointer<'_> {
    /// Begins a checkpoint of files: until
    /// [`end_checkpoint`](Self::end_checkpoint), the program asks for the
    /// path of each file with [`checkpoint_file`](Self::checkpoint_file)
    /// and writes it. The checkpoint is promoted to `level` (and to the
    /// levels whose interval is due), and also holds the protected
    /// regions. Not collective.
    pub fn begin_checkpoint(&mut self, level: Level) -> Result<()> {
        if self.files.open.is_some() {
            return Err(Error::Level {
                level,
                reason: "a checkpoint of files is already begun (end it first)".into(),
            });
        }
        if level != Level::L1 && self.levels.is_none() {
            return Err(Error::Level {
                level,
                reason: "no level above 1 is configured (set its interval in [l2], [l3] or [l4])"
                    .into(),
            });
        }
        self.files.open = Some((level, Vec::new()));
        Ok(())
    }

    /// The path to write file `name` of the checkpoint begun (a new, empty
    /// file of this rank on its node's level-1 storage, mode 0600). `name`
    /// is one plain file name; asking for it again empties it. Not
    /// collective.
    pub fn checkpoint_file(&mut self, name: &str) -> Result<PathBuf> {
        let bad = |reason: String| Error::File {
            name: name.to_string(),
            reason,
        };
        names::check_file_name(name).map_err(bad)?;
        let Some((_, named)) = self.files.open.as_mut() else {
            return Err(bad(
                "no checkpoint is begun (call begin_checkpoint first)".into()
            ));
        };
        if !named.iter().any(|n| n == name) {
            if named.len() >= MAX_FILES {
                return Err(bad(format!(
                    "a checkpoint holds at most {MAX_FILES} files per rank"
                )));
            }
            named.push(name.to_string());
        }
        self.store.new_file(name).map_err(|e| bad(e.to_string()))
    }

    /// Ends the checkpoint begun: saves every file named (and the
    /// protected regions), commits on every rank and returns the
    /// checkpoint's id. The files are removed once saved. Collective.
    pub fn end_checkpoint(&mut self) -> Result<u64> {
        let Some((level, _)) = self.files.open.as_ref() else {
            return Err(Error::Level {
                level: Level::L1,
                reason: "no checkpoint of files is begun".into(),
            });
        };
        let level = *level;
        let result = self.checkpoint_with(Some(level).filter(|l| *l != Level::L1));
        if let Some((_, named)) = self.files.open.take() {
            if let Err(e) = self.store.remove_files(named.iter().map(String::as_str)) {
                tracing::warn!(error = %e, "could not remove the files saved in the checkpoint");
            }
        }
        result
    }

    /// The path of file `name` as the restored checkpoint held it (written
    /// back by [`recover`](Self::recover)). Not collective.
    pub fn recovered_file(&self, name: &str) -> Result<PathBuf> {
        let bad = |reason: String| Error::File {
            name: name.to_string(),
            reason,
        };
        names::check_file_name(name).map_err(bad)?;
        if !self.files.restored.iter().any(|n| n == name) {
            let held = if self.files.restored.is_empty() {
                "none".to_string()
            } else {
                self.files.restored.join(", ")
            };
            return Err(bad(format!(
                "the restored checkpoint holds no file of that name on this rank (it holds: {held})"
            )));
        }
        self.store.file_path(name).map_err(|e| bad(e.to_string()))
    }

    /// The names of the files the restored checkpoint held on this rank.
    pub fn recovered_files(&self) -> &[String] {
        &self.files.restored
    }

    /// Whether a checkpoint of files is begun (snapshots wait for its end).
    pub(super) fn files_open(&self) -> bool {
        self.files.open.is_some()
    }

    /// The files of the checkpoint being written, mapped, with the names'
    /// table: the sources to save after the program's regions.
    pub(super) fn file_sources(&self) -> std::result::Result<Vec<(RegionInfo, Mapped)>, String> {
        let Some((_, named)) = &self.files.open else {
            return Ok(Vec::new());
        };
        if named.is_empty() {
            return Ok(Vec::new());
        }
        if let Some(id) = self
            .registry
            .iter()
            .map(|(id, _)| id)
            .find(|id| *id >= FIRST)
        {
            return Err(format!(
                "region {id} is protected, but ids from {FIRST} up are frame's own once a checkpoint holds files"
            ));
        }
        let mut out = Vec::with_capacity(named.len() + 1);
        let mut table = Vec::with_capacity(named.len());
        for (k, name) in named.iter().enumerate() {
            let region = FIRST + k as RegionId;
            let file = self
                .store
                .open_file(name)
                .map_err(|e| format!("file {name:?}: {e}"))?;
            let len = file
                .metadata()
                .map_err(|e| format!("file {name:?}: {e}"))?
                .len();
            let mapped = if len == 0 {
                Mapped::Empty
            } else {
                // SAFETY: the program does not change its files between
                // the end of the checkpoint and its return (documented).
                Mapped::Map(
                    unsafe { memmap2::Mmap::map(&file) }
                        .map_err(|e| format!("file {name:?}: cannot map it: {e}"))?,
                )
            };
            let info = RegionInfo {
                id: region,
                elem: ElemType::Byte,
                count: mapped.bytes().len() as u64,
            };
            out.push((info, mapped));
            table.push(Entry {
                name: name.clone(),
                region,
            });
        }
        let json = serde_json::to_vec(&table).map_err(|e| e.to_string())?;
        let mut map = memmap2::MmapMut::map_anon(json.len()).map_err(|e| e.to_string())?;
        map.copy_from_slice(&json);
        let info = RegionInfo {
            id: TABLE,
            elem: ElemType::U8,
            count: json.len() as u64,
        };
        out.push((
            info,
            Mapped::Map(map.make_read_only().map_err(|e| e.to_string())?),
        ));
        Ok(out)
    }
}

/// Writes back every file checkpoint `ckpt` (`file`) holds into this
/// rank's directory of files (`store`); returns their names.
pub(super) fn restore(
    store: &L1Store,
    ckpt: u64,
    file: &CheckpointFile,
) -> std::result::Result<Vec<String>, LoadFailure> {
    // What an earlier recovery or an unfinished checkpoint left goes: the
    // directory holds exactly the restored checkpoint's files.
    let stale = store
        .file_names()
        .map_err(|e| LoadFailure::Data(e.to_string()))?;
    store
        .remove_files(stale.iter().map(String::as_str))
        .map_err(|e| LoadFailure::Data(e.to_string()))?;
    let Some(stored) = file.region(TABLE) else {
        return Ok(Vec::new());
    };
    let len = usize::try_from(stored.count)
        .ok()
        .filter(|n| *n <= MAX_FILES * (names::MAX_FILE_NAME + 64))
        .ok_or_else(|| {
            LoadFailure::Data(format!("checkpoint {ckpt}: its files' table is too large"))
        })?;
    let mut json = vec![0u8; len];
    file.load_region(TABLE, &mut json)
        .map_err(|e| LoadFailure::Data(e.to_string()))?;
    let table: Vec<Entry> = serde_json::from_slice(&json).map_err(|e| {
        LoadFailure::Data(format!(
            "checkpoint {ckpt}: its files' table is unreadable: {e}"
        ))
    })?;
    let mut restored = Vec::with_capacity(table.len());
    for entry in table {
        let data =
            |e: String| LoadFailure::Data(format!("checkpoint {ckpt}, file {:?}: {e}", entry.name));
        names::check_file_name(&entry.name).map_err(data)?;
        let info = file
            .region(entry.region)
            .filter(|i| entry.region >= FIRST && i.elem == ElemType::Byte)
            .ok_or_else(|| data(format!("no region {} of bytes holds it", entry.region)))?;
        let (out, _) = store
            .restore_file(&entry.name, info.count)
            .map_err(|e| data(e.to_string()))?;
        if info.count > 0 {
            // SAFETY: the file was just created by this process and is
            // private to it; nobody else maps it.
            let mut map = unsafe { memmap2::MmapMut::map_mut(&out) }
                .map_err(|e| data(format!("cannot map it: {e}")))?;
            file.load_region(entry.region, &mut map)
                .map_err(|e| data(e.to_string()))?;
        }
        restored.push(entry.name);
    }
    Ok(restored)
}
