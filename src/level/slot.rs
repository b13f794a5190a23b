//! A reusable checkpoint file: preallocated, mapped once, kept mapped.
//!
//! Checkpoints of the same size land in the same pages again and again, so a
//! steady-state snapshot neither allocates storage nor takes page faults: it
//! is one fused copy-and-CRC pass into memory that is already there. Blocks are
//! reserved with `fallocate` before any store through the mapping, so a full
//! file system is an error instead of a SIGBUS.

use super::fsio::StorageError;
use crate::format::{
    self, FileSink, FormatError, FormatErrorKind, RegionSource, SliceSink, WriteSpec,
};
use memmap2::{MmapMut, MmapOptions};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// A file checkpoints are written into, with its mapping kept between uses.
pub(crate) struct Slot {
    /// Where the file currently is (it is renamed between uses).
    pub(crate) path: PathBuf,
    file: File,
    map: Option<MmapMut>,
    len: u64,
}

impl Slot {
    /// Creates a new, empty slot file (mode 0600).
    pub(crate) fn create(path: PathBuf) -> Result<Self, StorageError> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| StorageError::io("create", &path, 0, e))?;
        Ok(Self {
            path,
            file,
            map: None,
            len: 0,
        })
    }

    /// Whether the slot's file is still the one at its path (nobody replaced
    /// or removed it since the slot was made).
    pub(crate) fn still_there(&self) -> bool {
        use std::os::unix::fs::MetadataExt;
        match (self.file.metadata(), std::fs::metadata(&self.path)) {
            (Ok(a), Ok(b)) => a.ino() == b.ino() && a.dev() == b.dev(),
            _ => false,
        }
    }

    /// Adopts an existing file as a slot.
    pub(crate) fn open(path: &Path) -> Option<Self> {
        let file = OpenOptions::new().read(true).write(true).open(path).ok()?;
        let len = file.metadata().map(|m| m.len()).unwrap_or(0);
        Some(Self {
            path: path.to_path_buf(),
            file,
            map: None,
            len,
        })
    }

    /// Makes the file exactly `capacity` bytes, allocated, and mapped when
    /// the file system allows. Returns whether it is mapped.
    fn prepare(&mut self, capacity: u64) -> Result<bool, StorageError> {
        let path = self.path.clone();
        let io_err = |op, e| StorageError::io(op, &path, capacity, e);
        if self.len > capacity {
            self.map = None;
            self.file
                .set_len(capacity)
                .map_err(|e| io_err("shrink", e))?;
            self.len = capacity;
        }
        let mut mappable = true;
        if self.len < capacity {
            self.map = None;
            // Reserve the blocks now: writing into a mapping of a sparse file
            // on a full file system would kill the process with SIGBUS.
            let grown = rustix::fs::fallocate(
                &self.file,
                rustix::fs::FallocateFlags::empty(),
                self.len,
                capacity - self.len,
            );
            match grown {
                Ok(()) => {}
                Err(rustix::io::Errno::OPNOTSUPP) => {
                    mappable = false;
                    self.file
                        .set_len(capacity)
                        .map_err(|e| io_err("extend", e))?;
                }
                Err(e) => {
                    // Give the space back; the file is only a spare.
                    let _ = self.file.set_len(0);
                    self.len = 0;
                    return Err(io_err("allocate", io::Error::from(e)));
                }
            }
            self.len = capacity;
        }
        if mappable && self.map.is_none() {
            let len = usize::try_from(capacity)
                .map_err(|_| io_err("map", io::Error::other("file too large to map")))?;
            // SAFETY: the file lives in its rank's private (0700) directory and
            // only this slot writes it; its blocks were allocated above, so
            // stores through the mapping cannot fault for lack of space.
            let map = unsafe { MmapOptions::new().len(len).populate().map_mut(&self.file) };
            self.map = Some(map.map_err(|e| io_err("map", e))?);
        }
        Ok(self.map.is_some())
    }

    /// Writes a checkpoint file into the slot and makes it durable.
    pub(crate) fn fill(
        &mut self,
        spec: &WriteSpec<'_>,
        regions: &[RegionSource<'_>],
        layout: &format::Layout,
    ) -> Result<format::Written, StorageError> {
        let mapped = self.prepare(layout.capacity)?;
        let result = match self.map.as_mut().filter(|_| mapped) {
            Some(map) => format::write_checkpoint(&mut SliceSink::new(map), spec, regions, layout),
            None => format::write_checkpoint(&mut FileSink::new(&self.file), spec, regions, layout),
        };
        let path = self.path.clone();
        let written = result.map_err(|kind| match kind {
            FormatErrorKind::Io(e) => StorageError::io("write", &path, layout.capacity, e),
            other => FormatError::new(&path, other).into(),
        })?;
        let io_err = |op, e| StorageError::io(op, &path, layout.capacity, e);
        if let Some(map) = self.map.as_ref() {
            map.flush().map_err(|e| io_err("flush", e))?;
        }
        if written.file_len < self.len {
            self.map = None;
            self.file
                .set_len(written.file_len)
                .map_err(|e| io_err("truncate", e))?;
            self.len = written.file_len;
        }
        self.file.sync_data().map_err(|e| io_err("sync", e))?;
        Ok(written)
    }
}
