//! Replacing a file atomically and durably, whole or piece by piece.
//!
//! The new content goes to a temporary name (`.<name>.tmp-<tag>`, created
//! exclusively, mode 0600), is synced, then renamed over `name`, then the
//! directory is synced. A reader sees the old file or the new one, never a
//! mix; a crash leaves at most the temporary, which a dropped
//! [`AtomicFile`] (or the next writer of the name) removes. `tag` keeps
//! concurrent writers of one name apart.

use super::{Dir, FsError, FsResult};
use std::fs::File;
use std::io::Write;

/// A file being written under its temporary name, until [`commit`](Self::commit).
pub struct AtomicFile {
    dir: Dir,
    name: String,
    tmp: String,
    file: Option<File>,
    written: u64,
}

impl Dir {
    /// Replaces `name` with `bytes` atomically and durably.
    pub fn write_atomic(&self, name: &str, bytes: &[u8], tag: &str) -> FsResult<()> {
        let mut f = self.begin_atomic(name, tag)?;
        f.write(bytes)?;
        f.commit()
    }

    /// Starts replacing `name`: the bytes given to `AtomicFile::write`
    /// become its content at `AtomicFile::commit`.
    pub fn begin_atomic(&self, name: &str, tag: &str) -> FsResult<AtomicFile> {
        let tmp = format!(".{name}.tmp-{tag}");
        let dir = self.try_clone()?;
        let file = self.create_replacing(&tmp)?;
        self.crash_point("write", &tmp);
        Ok(AtomicFile {
            dir,
            name: name.to_string(),
            tmp,
            file: Some(file),
            written: 0,
        })
    }
}

impl AtomicFile {
    /// Appends `bytes`.
    pub fn write(&mut self, bytes: &[u8]) -> FsResult<()> {
        let Some(f) = self.file.as_mut() else {
            return Err(FsError::io(
                "write",
                self.dir.join(&self.tmp),
                std::io::Error::other("already committed"),
            ));
        };
        f.write_all(bytes)
            .map_err(|e| FsError::io("write", self.dir.join(&self.tmp), e))?;
        self.written += bytes.len() as u64;
        Ok(())
    }

    /// Bytes written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Makes the content durable and names it `name` instead of the name
    /// it was begun with (content named after itself, such as a hash known
    /// only once every byte was written).
    pub fn commit_as(mut self, name: &str) -> FsResult<()> {
        self.name = name.to_string();
        self.commit()
    }

    /// Makes the content durable and gives it its name.
    pub fn commit(mut self) -> FsResult<()> {
        let Some(f) = self.file.take() else {
            return Ok(());
        };
        self.dir.crash_point("fsync", &self.tmp);
        if let Err(e) = f.sync_all() {
            let _ = self.dir.remove_file(&self.tmp);
            return Err(FsError::io("write", self.dir.join(&self.tmp), e));
        }
        drop(f);
        if let Err(e) = self.dir.rename(&self.tmp, &self.dir, &self.name) {
            let _ = self.dir.remove_file(&self.tmp);
            return Err(e);
        }
        self.dir.sync()
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            let _ = self.dir.remove_file(&self.tmp);
        }
    }
}
