//! Checkpoints of files the program writes itself (restart files written
//! with stdio, MPI-IO or a library): the program begins a checkpoint, asks
//! for the path of each named file (a private file on the node's level-1
//! storage), writes it as usual, and ends the checkpoint.
//!
//! Ending a checkpoint that stays on its node (no level above 1 is due
//! with it) *holds* each file: it moves into the rank's level-1 checkpoint
//! directory as the program wrote it, and a thread of the rank computes
//! its CRCs afterwards (`level::l1::held`), so the program pays a rename
//! per file rather than a copy. Ending a checkpoint that leaves the node
//! saves each file into the rank's checkpoint file as a region of bytes,
//! read through a mapping of the file (never loaded whole): from there on
//! a file is a region like any other (CRC per chunk, optional compression,
//! promotion to levels 2 to 4). Either way the checkpoint's table of files
//! ([`file_table`]) says where each one is, the checkpoint commits as any
//! other, and retention and recovery treat it alike. Recovering a
//! checkpoint that holds files writes each back into the program's
//! directory, chunk by chunk into a mapping of the new file, checking its
//! CRCs, before the program resumes; the program asks for its path by
//! name.

use super::load_failure::LoadFailure;
use super::Checkpointer;
use crate::error::{Error, Result};
use crate::format::file_table::{self, Entry, Place, FIRST, MAX_FILES, TABLE};
use crate::format::CheckpointFile;
use crate::level::l1::Checked;
use crate::level::l1::HeldError;
use crate::level::{names, L1Store, Level, StorageError};
use crate::region::{ElemType, RegionId, RegionInfo};
use std::path::PathBuf;

/// Why the program's files could not be saved with a checkpoint.
#[derive(Debug, thiserror::Error)]
pub(super) enum FilesError {
    /// A region the program protected has an id frame keeps for files.
    #[error("region {0} is protected, but ids from {FIRST} up are frame's own once a checkpoint holds files")]
    Reserved(RegionId),
    /// The files could not be held in the checkpoint's directory.
    #[error(transparent)]
    Hold(#[from] HeldError),
    /// A file could not be opened or read.
    #[error("file {name:?}: {source}")]
    Open {
        /// The program's name of the file.
        name: String,
        /// Why.
        source: StorageError,
    },
    /// A file could not be mapped, or the table of files put in memory.
    #[error("{what}: {source}")]
    Map {
        /// What was being mapped.
        what: String,
        /// Why.
        source: std::io::Error,
    },
}

/// The program's files: the checkpoint being written, and what the last
/// recovery restored.
#[derive(Default)]
pub(super) struct Files {
    /// Between `begin_checkpoint` and `end_checkpoint`.
    open: Option<Open>,
    /// The files the restored checkpoint held, restored on this rank.
    pub(super) restored: Vec<String>,
}

/// A checkpoint of files being written.
struct Open {
    /// The level asked.
    level: Level,
    /// The names handed out, in order.
    names: Vec<String>,
    /// Whether the files are held as written (the checkpoint stays on the
    /// node) rather than saved into the checkpoint file; decided when it
    /// ends.
    hold: bool,
}

/// What a checkpoint of files saves: its regions (the files saved into
/// the checkpoint file, then the table), and the files held beside it
/// (name and length).
pub(super) type FileSources = (Vec<(RegionInfo, Mapped)>, Vec<(String, u64)>);

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
        self.files.open = Some(Open {
            level,
            names: Vec::new(),
            hold: false,
        });
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
        names::check_file_name(name).map_err(|e| bad(e.to_string()))?;
        let Some(Open { names: named, .. }) = self.files.open.as_mut() else {
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
    /// checkpoint's id. The program's files are gone from their paths
    /// afterwards: held by the checkpoint when it stays on the node (no
    /// level above 1 is due with it), saved into it and removed otherwise.
    /// Collective.
    pub fn end_checkpoint(&mut self) -> Result<u64> {
        let Some(open) = self.files.open.as_ref() else {
            return Err(Error::Level {
                level: Level::L1,
                reason: "no checkpoint of files is begun".into(),
            });
        };
        let forced = Some(open.level).filter(|l| *l != Level::L1);
        let hold = !self
            .levels
            .as_ref()
            .is_some_and(|levels| levels.may_promote(forced));
        if let Some(open) = self.files.open.as_mut() {
            open.hold = hold;
        }
        let result = self.checkpoint_with(forced);
        if let Some(Open { names: named, .. }) = self.files.open.take() {
            if let Err(e) = self.store.remove_files(named.iter().map(String::as_str)) {
                tracing::warn!(error = %e, "could not remove the files saved in the checkpoint");
            }
        }
        result
    }

    /// Abandons the checkpoint of files begun: nothing is saved, the files
    /// named so far are removed, and the previous checkpoint stays the
    /// newest. For a program whose ranks agreed that their files are not
    /// valid. Not collective (every rank that began calls it).
    pub fn cancel_checkpoint(&mut self) -> Result<()> {
        let Some(open) = self.files.open.take() else {
            return Err(Error::Level {
                level: Level::L1,
                reason: "no checkpoint of files is begun".into(),
            });
        };
        self.store
            .remove_files(open.names.iter().map(String::as_str))
            .map_err(|e| Error::File {
                name: open.names.join(", "),
                reason: format!("could not remove the files of an abandoned checkpoint: {e}"),
            })
    }

    /// The path of file `name` as the restored checkpoint held it (written
    /// back by [`recover`](Self::recover)). Not collective.
    pub fn recovered_file(&self, name: &str) -> Result<PathBuf> {
        let bad = |reason: String| Error::File {
            name: name.to_string(),
            reason,
        };
        names::check_file_name(name).map_err(|e| bad(e.to_string()))?;
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

    /// What checkpoint `id` saves of the program's files: with files to
    /// hold, they move into its level-1 directory and only the table is a
    /// region; otherwise every file is mapped as a region, then the table.
    pub(super) fn file_sources(&mut self, id: u64) -> std::result::Result<FileSources, FilesError> {
        let Some(open) = &self.files.open else {
            return Ok(Default::default());
        };
        if open.names.is_empty() {
            return Ok(Default::default());
        }
        if let Some(id) = self
            .registry
            .iter()
            .map(|(id, _)| id)
            .find(|id| *id >= FIRST)
        {
            return Err(FilesError::Reserved(id));
        }
        let mut out = Vec::with_capacity(open.names.len() + 1);
        let mut held = Vec::new();
        let mut table = Vec::with_capacity(open.names.len());
        if open.hold {
            let lens = self.store.hold_files(id, &open.names)?;
            for (name, len) in open.names.iter().zip(lens) {
                table.push(Entry::held(name, len));
                held.push((name.clone(), len));
            }
        } else {
            for (k, name) in open.names.iter().enumerate() {
                let region = FIRST + k as RegionId;
                let mapped = self.map_file(name)?;
                let info = RegionInfo {
                    id: region,
                    elem: ElemType::Byte,
                    count: mapped.bytes().len() as u64,
                };
                out.push((info, mapped));
                table.push(Entry::region(name, region));
            }
        }
        let json = file_table::encode(&table);
        let table_map = |source| FilesError::Map {
            what: "the table of files".into(),
            source,
        };
        let mut map = memmap2::MmapMut::map_anon(json.len()).map_err(table_map)?;
        map.copy_from_slice(&json);
        let info = RegionInfo {
            id: TABLE,
            elem: ElemType::U8,
            count: json.len() as u64,
        };
        out.push((info, Mapped::Map(map.make_read_only().map_err(table_map)?)));
        Ok((out, held))
    }

    /// The program's file `name`, mapped to be saved.
    fn map_file(&self, name: &str) -> std::result::Result<Mapped, FilesError> {
        let open = |source| FilesError::Open {
            name: name.to_string(),
            source,
        };
        let file = self.store.open_file(name).map_err(open)?;
        let len = (file.metadata())
            .map_err(|source| FilesError::Map {
                what: format!("file {name:?}: cannot read its length"),
                source,
            })?
            .len();
        if len == 0 {
            return Ok(Mapped::Empty);
        }
        // SAFETY: the program does not change its files between the end
        // of the checkpoint and its return (documented).
        unsafe { memmap2::Mmap::map(&file) }
            .map(Mapped::Map)
            .map_err(|source| FilesError::Map {
                what: format!("file {name:?}: cannot map it"),
                source,
            })
    }
}

/// Writes back every file checkpoint `ckpt` (`file`) holds into this
/// rank's directory of files (`store`), checking each; returns their
/// names.
pub(super) fn restore(
    store: &mut L1Store,
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
    let table =
        file_table::read(file).map_err(|e| LoadFailure::Data(format!("checkpoint {ckpt}: {e}")))?;
    let Some(table) = table else {
        return Ok(Vec::new());
    };
    let held = file_table::held(&table);
    let held_set = match held.is_empty() {
        true => None,
        false => Some(
            store
                .open_held(ckpt, &held)
                .map_err(|e| LoadFailure::Data(format!("checkpoint {ckpt}: {e}")))?,
        ),
    };
    if held_set
        .as_ref()
        .is_some_and(|h| h.checked() == Checked::LengthOnly)
    {
        tracing::warn!(
            checkpoint = ckpt,
            "its held files have no seal (their rank stopped while sealing them): checked by length only"
        );
    }
    let mut restored = Vec::with_capacity(table.len());
    let mut next_held = 0;
    for entry in table {
        let data =
            |e: String| LoadFailure::Data(format!("checkpoint {ckpt}, file {:?}: {e}", entry.name));
        names::check_file_name(&entry.name).map_err(|e| data(e.to_string()))?;
        let place = entry.place().map_err(|e| data(e.to_string()))?;
        let len = match place {
            Place::Region(region) => {
                file.region(region)
                    .filter(|i| i.elem == ElemType::Byte)
                    .ok_or_else(|| data(format!("no region {region} of bytes holds it")))?
                    .count
            }
            Place::Held(len) => len,
        };
        let (out, _) = store
            .restore_file(&entry.name, len)
            .map_err(|e| data(e.to_string()))?;
        let mut map = match len {
            0 => None,
            // SAFETY: the file was just created by this process and is
            // private to it; nobody else maps it.
            _ => Some(
                unsafe { memmap2::MmapMut::map_mut(&out) }
                    .map_err(|e| data(format!("cannot map it: {e}")))?,
            ),
        };
        let into = map.as_deref_mut().unwrap_or_default();
        match (place, &held_set) {
            (Place::Region(region), _) => file
                .load_region(region, into)
                .map_err(|e| data(e.to_string()))?,
            (Place::Held(_), Some(set)) => {
                set.restore(next_held, into)
                    .map_err(|e| data(e.to_string()))?;
                next_held += 1;
            }
            (Place::Held(_), None) => return Err(data("its held files are missing".into())),
        }
        restored.push(entry.name);
    }
    Ok(restored)
}
