//! Files held beside a rank's level-1 checkpoint file. A checkpoint of
//! files that stays on its node keeps each file as the program wrote it:
//! ending the checkpoint moves the file from the program's directory into
//! `ckpt-<id>/rank-<r>.files/` (a rename, never a copy), and the table in
//! the checkpoint file gives its length.
//!
//! Their CRCs are computed off the program's path: once the rank has
//! written its checkpoint file, a thread of the rank reads each held file
//! and writes a CRC per chunk into the directory's seal (`.seal`, JSON,
//! replaced atomically). Restoring a held file copies it into the
//! program's directory and checks every chunk against the seal; a file of
//! another length, or a chunk with another CRC, is damage, and recovery
//! falls back as for any damaged checkpoint. A checkpoint restored before
//! its seal was written (its rank was killed while sealing) is checked by
//! length only, and says so.
//!
//! Sealing, and removing the held files of a retired checkpoint, are
//! background jobs of the store (`background.rs`).

use super::background::Job;
use super::L1Store;
use crate::format::{copy_with_crc, MIN_CHUNK};
use crate::level::names::{self, SEAL};
use crate::level::StorageError;
use crate::safefs::{Dir, FsError, FsResult, Kind};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Why held files cannot be kept, restored or checked.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HeldError {
    /// The held directory of checkpoint `id` cannot be made ready.
    #[error("cannot hold the files of checkpoint {id}: {source}")]
    Setup {
        /// The checkpoint.
        id: u64,
        /// What failed.
        source: StorageError,
    },
    /// A file of the program's could not be moved in or checked.
    #[error("file {name:?}: {problem}")]
    Taking {
        /// The file's name.
        name: String,
        /// What is wrong.
        problem: FileProblem,
    },
    /// The held directory is not there, or not readable.
    #[error("its held files {why}: {source}")]
    Directory {
        /// "are gone", "cannot be read".
        why: &'static str,
        /// What the file system said.
        source: FsError,
    },
    /// A held file is missing, changed or damaged.
    #[error("held file {path:?}: {problem}")]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: FileProblem,
    },
    /// The seal cannot be used.
    #[error("seal {path:?}: {why}")]
    Seal {
        /// The seal file.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// A file index past the checkpoint's table.
    #[error("no such held file")]
    NoSuchFile,
}

/// What is wrong with one file.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FileProblem {
    /// It cannot be opened, moved or read.
    #[error("{0}")]
    Fs(#[from] FsError),
    /// Reading it failed.
    #[error("{0}")]
    Read(std::io::Error),
    /// Its metadata cannot be read.
    #[error("cannot inspect it: {0}")]
    Inspect(std::io::Error),
    /// Not a regular file.
    #[error("is not a regular file")]
    NotRegular,
    /// Another length than the checkpoint's table says.
    #[error("is {on_disk} bytes long, its checkpoint says {len} (was it changed after the checkpoint ended?)")]
    Length {
        /// Its length on disk.
        on_disk: u64,
        /// The table's.
        len: u64,
    },
    /// It cannot be mapped.
    #[error("cannot map it: {0}")]
    Map(std::io::Error),
    /// Another length than where it is restored to.
    #[error("{have} bytes to restore into {into}")]
    Into {
        /// Its length.
        have: usize,
        /// The destination's.
        into: usize,
    },
    /// A chunk whose CRC is not the seal's.
    #[error("chunk {k} (bytes {from} to {to}) fails its CRC")]
    Crc {
        /// The chunk.
        k: usize,
        /// Its first byte.
        from: usize,
        /// One past its last.
        to: usize,
    },
}

/// The CRCs of a directory's held files.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Seal {
    /// Bytes per chunk (the last chunk of a file may be shorter).
    chunk: u64,
    /// The files, in the table's order.
    files: Vec<Sealed>,
}

/// One held file's CRCs.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Sealed {
    name: String,
    len: u64,
    crcs: Vec<u32>,
}

/// How a held file was checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Checked {
    /// Every chunk against the seal.
    Crc,
    /// By length only: the directory has no seal.
    LengthOnly,
}

impl L1Store {
    /// Moves the program's files `names` (in its directory, written for
    /// checkpoint `id`) into this rank's held directory of that checkpoint,
    /// replacing what an earlier attempt at `id` left there; returns their
    /// lengths. An error names the file.
    pub(crate) fn hold_files(&mut self, id: u64, names: &[String]) -> Result<Vec<u64>, HeldError> {
        self.background.wait_for(id);
        let rank = self.owner.rank;
        let setup = |source: StorageError| HeldError::Setup { id, source };
        let files = self.files_dir().map_err(setup)?;
        let ckpt = self
            .root
            .sub(&names::ckpt_dir(id), true)
            .map_err(|e| setup(e.into()))?;
        remove_held(&ckpt, rank).map_err(|e| setup(e.into()))?;
        let held = ckpt
            .sub(&names::held_dir(rank), true)
            .map_err(|e| setup(e.into()))?;
        let mut lens = Vec::with_capacity(names.len());
        for name in names {
            let named = |problem: FileProblem| HeldError::Taking {
                name: name.clone(),
                problem,
            };
            files
                .rename(name, &held, name)
                .map_err(|e| named(e.into()))?;
            lens.push(open_regular(&held, name).map_err(named)?.1);
        }
        held.sync().map_err(|e| setup(e.into()))?;
        ckpt.sync().map_err(|e| setup(e.into()))?;
        Ok(lens)
    }

    /// Starts computing the seal of this rank's held files `files` (name
    /// and length) of checkpoint `id`, in chunks of `chunk` bytes, on a
    /// thread of its own. A seal that cannot be written is logged; the
    /// checkpoint stays restorable, checked by length.
    pub(crate) fn seal_held(&mut self, id: u64, files: Vec<(String, u64)>, chunk: usize) {
        let rank = self.owner.rank;
        let held = self
            .root
            .sub(&names::ckpt_dir(id), false)
            .and_then(|c| c.sub(&names::held_dir(rank), false));
        let held = match held {
            Ok(h) => h,
            Err(e) => {
                tracing::warn!(checkpoint = id, error = %e, "cannot seal the held files");
                return;
            }
        };
        self.background
            .spawn(id, Job::Seal, &format!("frame-l1-{rank}"), move || {
                if let Err(e) = seal(&held, &files, chunk as u64, &rank.to_string()) {
                    tracing::warn!(
                        checkpoint = id,
                        error = %e,
                        "the held files were not sealed: a restore checks their lengths only"
                    );
                }
            });
    }

    /// Removes this rank's held files of checkpoint `id` (in directory
    /// `ckpt`), whose record and data file are gone, in the background;
    /// then the checkpoint's directory if nothing else is in it. What is
    /// done depends only on this rank's own entries, never on whether
    /// another rank of the node removed the directory already.
    pub(super) fn remove_held_later(&mut self, id: u64, ckpt: Dir) -> Result<(), StorageError> {
        let name = names::ckpt_dir(id);
        let rank = self.owner.rank;
        if ckpt.kind(&names::held_dir(rank)).is_none() {
            drop(ckpt);
            self.root.remove_dir_if_empty(&name);
            return Ok(());
        }
        let root = self.root.try_clone()?;
        self.background
            .spawn(id, Job::Remove, &format!("frame-l1-{rank}"), move || {
                match remove_held(&ckpt, rank) {
                    Ok(kept) if kept.is_empty() => {}
                    Ok(kept) => {
                        tracing::warn!(checkpoint = id, ?kept, "left files frame did not make")
                    }
                    Err(e) => {
                        tracing::warn!(checkpoint = id, error = %e, "could not remove held files")
                    }
                }
                drop(ckpt);
                root.remove_dir_if_empty(&name);
            });
        Ok(())
    }

    /// This rank's held files `files` (name and length, in the table's
    /// order) of checkpoint `id`, with their seal, to restore them.
    pub(crate) fn open_held(
        &mut self,
        id: u64,
        files: &[(String, u64)],
    ) -> Result<HeldSet, HeldError> {
        self.background.wait_for(id);
        let held = self
            .root
            .sub(&names::ckpt_dir(id), false)
            .and_then(|c| c.sub(&names::held_dir(self.owner.rank), false))
            .map_err(|source| HeldError::Directory {
                why: "are gone",
                source,
            })?;
        // Every file is there with its length before anything is written
        // back (a table cannot make the restore create a file of a length
        // no held file has).
        for (name, len) in files {
            open_checked(&held, name, *len)?;
        }
        let seal = read_seal(&held, files)?;
        Ok(HeldSet {
            held,
            seal,
            files: files.to_vec(),
        })
    }
}

/// A rank's held files of one checkpoint, opened to be restored.
pub(crate) struct HeldSet {
    held: Dir,
    seal: Option<Seal>,
    files: Vec<(String, u64)>,
}

impl HeldSet {
    /// How the files are checked.
    pub(crate) fn checked(&self) -> Checked {
        match self.seal {
            Some(_) => Checked::Crc,
            None => Checked::LengthOnly,
        }
    }

    /// Copies file `k` of the table into `out` (as long), checking it.
    pub(crate) fn restore(&self, k: usize, out: &mut [u8]) -> Result<(), HeldError> {
        let file = self.files.get(k).ok_or(HeldError::NoSuchFile)?;
        let crcs = self.seal.as_ref().map(|s| (s.chunk, &s.files[k]));
        check_one(&self.held, file, crcs, Some(out))
    }
}

/// Bytes read at a time while sealing.
const SEAL_PIECE: usize = 1 << 20;

/// Computes and writes the seal of `files` in `held`. The files are read
/// in pieces through a buffer, not mapped: mapping them would make every
/// thread of the program take part in unmapping them (TLB shootdowns).
fn seal(held: &Dir, files: &[(String, u64)], chunk: u64, tag: &str) -> Result<(), HeldError> {
    let mut sealed = Vec::with_capacity(files.len());
    let mut buf = vec![0u8; SEAL_PIECE.min(chunk as usize)];
    for (name, len) in files {
        let mut file = open_checked(held, name, *len)?;
        let mut crcs = Vec::with_capacity(len.div_ceil(chunk) as usize);
        let mut left = *len;
        while left > 0 {
            let mut crc = crc32fast::Hasher::new();
            let mut in_chunk = left.min(chunk);
            left -= in_chunk;
            while in_chunk > 0 {
                let piece = &mut buf[..in_chunk.min(SEAL_PIECE as u64) as usize];
                std::io::Read::read_exact(&mut file, piece).map_err(|e| HeldError::File {
                    path: held.join(name),
                    problem: FileProblem::Read(e),
                })?;
                crc.update(piece);
                in_chunk -= piece.len() as u64;
            }
            crcs.push(crc.finalize());
        }
        sealed.push(Sealed {
            name: name.clone(),
            len: *len,
            crcs,
        });
    }
    let seal = Seal {
        chunk,
        files: sealed,
    };
    let sealing = |why: String| HeldError::Seal {
        path: held.join(SEAL),
        why,
    };
    let json = serde_json::to_vec(&seal).map_err(|e| sealing(e.to_string()))?;
    held.write_atomic(SEAL, &json, tag)
        .map_err(|e| sealing(e.to_string()))
}

/// Held file `name`, opened after checking that it is a regular file of
/// `len` bytes.
fn open_checked(held: &Dir, name: &str, len: u64) -> Result<std::fs::File, HeldError> {
    let named = |problem: FileProblem| HeldError::File {
        path: held.join(name),
        problem,
    };
    let (file, on_disk) = open_regular(held, name).map_err(named)?;
    if on_disk != len {
        return Err(named(FileProblem::Length { on_disk, len }));
    }
    Ok(file)
}

/// File `name` of `dir`, opened without following a link, and its length;
/// an error unless it is a regular file.
fn open_regular(dir: &Dir, name: &str) -> Result<(std::fs::File, u64), FileProblem> {
    let file = dir.open_read(name)?;
    let meta = file.metadata().map_err(FileProblem::Inspect)?;
    if !meta.is_file() {
        return Err(FileProblem::NotRegular);
    }
    Ok((file, meta.len()))
}

/// Held file `name`, mapped, after checking that it is a regular file of
/// `len` bytes (`None` for an empty file).
fn map_checked(held: &Dir, name: &str, len: u64) -> Result<Option<memmap2::Mmap>, HeldError> {
    let file = open_checked(held, name, len)?;
    if len == 0 {
        return Ok(None);
    }
    // SAFETY: frame's own file, mode 0600 in a private directory; the
    // program was told not to change its files once a checkpoint ended,
    // and a change is found by the CRCs.
    unsafe { memmap2::Mmap::map(&file) }
        .map(Some)
        .map_err(|e| HeldError::File {
            path: held.join(name),
            problem: FileProblem::Map(e),
        })
}

/// The seal of `held`, if it has one, checked for consistency and
/// against `files` (the same names and lengths, in order). The read is
/// bounded by what the files' CRCs can take.
fn read_seal(held: &Dir, files: &[(String, u64)]) -> Result<Option<Seal>, HeldError> {
    if held.kind(SEAL).is_none() {
        return Ok(None);
    }
    let bad = |why: String| HeldError::Seal {
        path: held.join(SEAL),
        why,
    };
    // Each file: its name escaped, its length, a CRC per smallest chunk.
    let max = files.iter().fold(64u64, |max, (name, len)| {
        max.saturating_add(6 * name.len() as u64 + 64)
            .saturating_add(11 * len.div_ceil(MIN_CHUNK))
    });
    let bytes = held
        .read_capped(SEAL, max)
        .map_err(|e| bad(e.to_string()))?;
    let seal: Seal = serde_json::from_slice(&bytes).map_err(|e| bad(format!("unreadable: {e}")))?;
    if !(MIN_CHUNK..=crate::format::MAX_CHUNK).contains(&seal.chunk) {
        return Err(bad(format!("chunk size {} is out of range", seal.chunk)));
    }
    let same = seal.files.len() == files.len()
        && seal
            .files
            .iter()
            .zip(files)
            .all(|(s, (n, l))| s.name == *n && s.len == *l);
    if !same {
        return Err(bad(
            "names other files or lengths than the checkpoint's table".into(),
        ));
    }
    for f in &seal.files {
        if f.crcs.len() as u64 != f.len.div_ceil(seal.chunk) {
            return Err(bad(format!(
                "file {:?}: {} CRCs for {} bytes",
                f.name,
                f.crcs.len(),
                f.len
            )));
        }
    }
    Ok(Some(seal))
}

/// Checks held file `file` (name, length) against `crcs` (the seal's
/// chunk size and its entry), copying it into `out` when given.
fn check_one(
    held: &Dir,
    file: &(String, u64),
    crcs: Option<(u64, &Sealed)>,
    mut out: Option<&mut [u8]>,
) -> Result<(), HeldError> {
    let (name, len) = file;
    let damaged = |problem: FileProblem| HeldError::File {
        path: held.join(name),
        problem,
    };
    let map = map_checked(held, name, *len)?;
    let bytes = map.as_deref().unwrap_or_default();
    if let Some(out) = out.as_deref() {
        if out.len() != bytes.len() {
            return Err(damaged(FileProblem::Into {
                have: bytes.len(),
                into: out.len(),
            }));
        }
    }
    let chunk = crcs.map_or(1 << 20, |(c, _)| c as usize);
    for (k, piece) in bytes.chunks(chunk).enumerate() {
        let mut crc = crc32fast::Hasher::new();
        match out.as_deref_mut() {
            Some(out) => copy_with_crc(
                &mut out[k * chunk..k * chunk + piece.len()],
                piece,
                &mut crc,
            ),
            None => crc.update(piece),
        }
        if let Some((_, s)) = crcs {
            if s.crcs.get(k) != Some(&crc.finalize()) {
                return Err(damaged(FileProblem::Crc {
                    k,
                    from: k * chunk,
                    to: k * chunk + piece.len(),
                }));
            }
        }
    }
    Ok(())
}

/// Removes `rank`'s held directory in checkpoint directory `ckpt`, if
/// there is one: the seal first (so that a removal cut short leaves files
/// a restore checks by length rather than a seal naming missing files),
/// then the files and temporaries frame made, then the directory.
/// Returns what it left (entries frame did not make).
pub(crate) fn remove_held(ckpt: &Dir, rank: u32) -> FsResult<Vec<PathBuf>> {
    let name = names::held_dir(rank);
    let Some(held) = ckpt.try_sub(&name)? else {
        return Ok(Vec::new());
    };
    held.remove_file(SEAL)?;
    let mut kept = Vec::new();
    for (file, kind) in held.entries()? {
        let ours = names::check_file_name(&file).is_ok() || names::is_temporary(&file);
        if ours && kind != Kind::Dir {
            held.remove_file(&file)?;
        } else {
            kept.push(held.join(&file));
        }
    }
    drop(held);
    ckpt.remove_dir_if_empty(&name);
    Ok(kept)
}

/// Checks `rank`'s held files `files` (name and length, in the table's
/// order) of the checkpoint in directory `ckpt` (for `frame verify`).
pub(crate) fn check_held(
    ckpt: &Path,
    rank: u32,
    files: &[(String, u64)],
) -> Result<Checked, HeldError> {
    let held =
        Dir::open(&ckpt.join(names::held_dir(rank))).map_err(|source| HeldError::Directory {
            why: "cannot be read",
            source,
        })?;
    let seal = read_seal(&held, files)?;
    for (k, file) in files.iter().enumerate() {
        let crcs = seal.as_ref().map(|s| (s.chunk, &s.files[k]));
        check_one(&held, file, crcs, None)?;
    }
    Ok(if seal.is_some() {
        Checked::Crc
    } else {
        Checked::LengthOnly
    })
}
