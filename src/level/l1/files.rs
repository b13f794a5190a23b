//! The program's own files on level 1: the private directory
//! `files/rank-<r>/` in which a rank's program writes the files of a file
//! checkpoint before they are saved into its checkpoint file, and into
//! which they are restored. Names are checked ([`names::check_file_name`]);
//! every file is created by frame (mode 0600, exclusively, no link
//! followed), and only the names the checkpointer hands out are touched.

use super::L1Store;
use crate::level::names::{self, FILES};
use crate::level::StorageError;
use crate::safefs::{Dir, FsError, Kind};
use std::fs::File;
use std::path::PathBuf;

impl L1Store {
    /// This rank's directory of files, created if needed.
    pub(super) fn files_dir(&self) -> Result<Dir, StorageError> {
        Ok(self
            .root
            .sub(FILES, true)?
            .sub(&names::files_of(self.owner.rank), true)?)
    }

    /// Creates file `name` empty (replacing one of that name) for the
    /// program to write, and returns its path.
    pub(crate) fn new_file(&self, name: &str) -> Result<PathBuf, StorageError> {
        let dir = self.files_dir()?;
        drop(dir.create_replacing(name)?);
        Ok(dir.join(name))
    }

    /// Opens file `name` the program wrote, to be saved.
    pub(crate) fn open_file(&self, name: &str) -> Result<File, StorageError> {
        Ok(self.files_dir()?.open_read(name)?)
    }

    /// Creates file `name` of `len` bytes to restore it into; returns the
    /// file and its path.
    pub(crate) fn restore_file(
        &self,
        name: &str,
        len: u64,
    ) -> Result<(File, PathBuf), StorageError> {
        let dir = self.files_dir()?;
        let file = dir.create_replacing(name)?;
        file.set_len(len)
            .map_err(|e| FsError::io("resize", dir.join(name), e))?;
        Ok((file, dir.join(name)))
    }

    /// The path file `name` has (whether or not it exists).
    pub(crate) fn file_path(&self, name: &str) -> Result<PathBuf, StorageError> {
        Ok(self.files_dir()?.join(name))
    }

    /// Removes the files `names` (those a checkpoint saved, or the
    /// program's files at the end of the job), then this rank's directory
    /// if nothing else is in it. The directory of all ranks' directories
    /// stays: the other ranks of the node create theirs in it at any time
    /// ([`remove_all`](L1Store::remove_all) removes it at the end).
    pub(crate) fn remove_files<'a>(
        &self,
        names: impl IntoIterator<Item = &'a str>,
    ) -> Result<(), StorageError> {
        let Some(files) = self.root.try_sub(FILES)? else {
            return Ok(());
        };
        let mine = names::files_of(self.owner.rank);
        // Only this rank's own directory decides what is done (and so which
        // crash points are passed): whether another rank of the node has
        // already removed the shared `files/` is a race, but `files/` holds
        // this directory while it exists, so it cannot be gone then.
        let Some(dir) = files.try_sub(&mine)? else {
            return Ok(());
        };
        for name in names {
            if names::check_file_name(name).is_ok() {
                dir.remove_file(name)?;
            }
        }
        files.remove_dir_if_empty(&mine);
        Ok(())
    }

    /// The names of the regular files in this rank's directory.
    pub(crate) fn file_names(&self) -> Result<Vec<String>, StorageError> {
        let Some(files) = self.root.try_sub(FILES)? else {
            return Ok(Vec::new());
        };
        let Some(dir) = files.try_sub(&names::files_of(self.owner.rank))? else {
            return Ok(Vec::new());
        };
        Ok(dir
            .entries()?
            .into_iter()
            .filter(|(n, k)| *k == Kind::File && names::check_file_name(n).is_ok())
            .map(|(n, _)| n)
            .collect())
    }
}
