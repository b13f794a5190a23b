//! A reusable checkpoint file: written once, then mapped and kept mapped.
//!
//! A file's first checkpoint (every job's first, and the first after a
//! restart) is written with `pwrite` straight from the regions, each block's
//! CRC computed from the cache right after the kernel copied it: as fast as
//! a plain write of the same bytes, with no page faults. From then on the file is mapped,
//! and checkpoints of the same size land in the same pages again and again:
//! a steady-state snapshot neither allocates storage nor takes page faults,
//! it is one fused copy-and-CRC pass into memory that is already there.
//! Where huge pages back the file (a tmpfs mounted with `huge=`), mapping
//! costs next to nothing and even a new file is written through a mapping.
//! Blocks are reserved with `fallocate` before any store through a mapping,
//! so a full file system is an error instead of a SIGBUS.

use super::fsio::StorageError;
use super::stream::{PieceSource, CHECK_BLOCK};
use crate::format::{
    self, FileHeader, FileSink, FormatError, FormatErrorKind, RegionSource, SliceSink, StreamCheck,
    WriteSpec,
};
use crate::safefs::{crash, Dir};
use memmap2::{MmapMut, MmapOptions};
use std::fs::File;
use std::io;
use std::path::PathBuf;

/// A file checkpoints are written into, with its mapping kept between uses.
pub(crate) struct Slot {
    /// The file's name in the directory that holds it now.
    pub(crate) name: String,
    /// Where it is: `None` in `spare/`, `Some(id)` in checkpoint `id`'s directory.
    pub(crate) at: Option<u64>,
    /// Its full path, for messages.
    pub(crate) path: PathBuf,
    file: File,
    /// Shared with a checkpoint being loaded from it, if any.
    map: Option<std::sync::Arc<MmapMut>>,
    len: u64,
    who: u32,
}

impl Slot {
    /// Creates a new, empty slot file `name` in `dir` (mode 0600, exclusive).
    pub(crate) fn create(dir: &Dir, name: &str, who: u32) -> Result<Self, StorageError> {
        let file = dir.create_replacing(name)?;
        Ok(Self {
            name: name.to_string(),
            at: None,
            path: dir.join(name),
            file,
            map: None,
            len: 0,
            who,
        })
    }

    /// Adopts the existing file `name` of `dir` as a slot located `at`.
    pub(crate) fn adopt(dir: &Dir, name: &str, at: Option<u64>, who: u32) -> Option<Self> {
        let file = dir.open_rw(name).ok()?;
        let len = file.metadata().map(|m| m.len()).unwrap_or(0);
        Some(Self {
            name: name.to_string(),
            at,
            path: dir.join(name),
            file,
            map: None,
            len,
            who,
        })
    }

    /// Whether the file has other names too (a higher level's hard link to
    /// it): such a file must never be written again.
    pub(crate) fn shared(&self) -> bool {
        use std::os::unix::fs::MetadataExt;
        self.file.metadata().map_or(true, |m| m.nlink() > 1)
    }

    /// Whether the slot's file is still the one named `name` in `dir`
    /// (nobody replaced or removed it since the slot was made).
    pub(crate) fn still_in(&self, dir: &Dir) -> bool {
        use std::os::unix::fs::MetadataExt;
        match (self.file.metadata(), dir.identity_of(&self.name)) {
            (Ok(a), Some(b)) => (a.dev(), a.ino()) == b,
            _ => false,
        }
    }

    /// Whether the slot's file is still the one at its path.
    pub(crate) fn still_at_path(&self) -> bool {
        use std::os::unix::fs::MetadataExt;
        match (self.file.metadata(), std::fs::symlink_metadata(&self.path)) {
            (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
            _ => false,
        }
    }

    /// Records that the file was renamed to `name` in `dir`, located `at`.
    pub(crate) fn moved(&mut self, dir: &Dir, name: &str, at: Option<u64>) {
        self.name = name.to_string();
        self.path = dir.join(name);
        self.at = at;
    }

    fn crash_point(&self, op: &str) {
        crash::point(self.who, op, &self.path, "");
    }

    /// Readies the file for a checkpoint of `capacity` bytes at most and
    /// returns whether to write it through its mapping. A file shorter than
    /// that is new (or grows): it is written with `pwrite`, unless huge
    /// pages back it. A file that
    /// already had that size is mapped (once; the mapping is kept), after
    /// `fallocate` made sure every block exists, so that no store through
    /// the mapping can fault for lack of space.
    fn prepare(&mut self, capacity: u64) -> Result<bool, StorageError> {
        let path = self.path.clone();
        let io_err = |op, e| StorageError::io(op, &path, capacity, e);
        if self.len < capacity {
            self.map = None;
            // The file gets its full length first (no blocks yet): a tmpfs
            // mounted with huge=within_size backs it with 2 MiB pages then,
            // and with those a new file is mapped as cheaply as an old one.
            self.file.set_len(capacity).map_err(|e| io_err("grow", e))?;
            self.len = capacity;
            if !self.huge_pages() {
                return Ok(false);
            }
        }
        if self.len > capacity {
            self.map = None;
            self.crash_point("truncate");
            self.file
                .set_len(capacity)
                .map_err(|e| io_err("shrink", e))?;
            self.len = capacity;
        }
        if self.map.is_none() {
            self.crash_point("allocate");
            match rustix::fs::fallocate(
                &self.file,
                rustix::fs::FallocateFlags::empty(),
                0,
                capacity,
            ) {
                Ok(()) => {}
                // No way to reserve blocks: keep writing with pwrite.
                Err(rustix::io::Errno::OPNOTSUPP) => return Ok(false),
                Err(e) => return Err(io_err("allocate", io::Error::from(e))),
            }
            let len = usize::try_from(capacity)
                .map_err(|_| io_err("map", io::Error::other("file too large to map")))?;
            // SAFETY: the file lives in its rank's private (0700) directory,
            // opened without following links, and only this slot writes it
            // (the rank's lock keeps other processes out); its blocks were
            // allocated above, so stores through the mapping cannot fault for
            // lack of space.
            let map = unsafe { MmapOptions::new().len(len).populate().map_mut(&self.file) };
            self.map = Some(std::sync::Arc::new(map.map_err(|e| io_err("map", e))?));
        }
        Ok(true)
    }

    /// Whether the file system backs this file with huge pages (a tmpfs
    /// mounted with `huge=` reports their size as the block size of a file
    /// they back).
    fn huge_pages(&self) -> bool {
        use std::os::unix::fs::MetadataExt;
        self.file.metadata().is_ok_and(|m| m.blksize() >= 2 << 20)
    }

    /// The slot's mapping, for loading the checkpoint it holds, if it has
    /// one and holds the file `identity`.
    pub(crate) fn mapping(&self, identity: Option<(u64, u64)>) -> Option<std::sync::Arc<MmapMut>> {
        use std::os::unix::fs::MetadataExt;
        let mine = self.file.metadata().ok().map(|m| (m.dev(), m.ino()));
        (mine.is_some() && mine == identity)
            .then(|| self.map.clone())
            .flatten()
    }

    /// Writes a checkpoint file into the slot and makes it durable. After a
    /// failure the file is emptied: it is a fresh file for the next attempt.
    pub(crate) fn fill(
        &mut self,
        spec: &WriteSpec<'_>,
        regions: &[RegionSource<'_>],
        layout: &format::Layout,
    ) -> Result<format::Written, StorageError> {
        let result = self.try_fill(spec, regions, layout);
        if result.is_err() {
            self.map = None;
            let _ = self.file.set_len(0);
            self.len = 0;
        }
        result
    }

    /// Writes a checkpoint file brought from another level into the slot
    /// (with `pwrite`; its mapping is dropped), piece by piece as `source`
    /// lends them, each piece checked by `check`, and makes it durable.
    /// After a failure the file is emptied.
    pub(crate) fn fill_from<S: PieceSource>(
        &mut self,
        mut check: StreamCheck,
        source: &mut S,
    ) -> Result<FileHeader, S::Error> {
        use std::os::unix::fs::FileExt;
        self.map = None;
        let path = self.path.clone();
        let io_err = |op, need, e| StorageError::io(op, &path, need, e);
        self.crash_point("truncate");
        self.file.set_len(0).map_err(|e| io_err("truncate", 0, e))?;
        self.len = 0;
        self.crash_point("write");
        let mut at = 0u64;
        let result = (|| {
            // As an arriving copy: refused whole if it overruns, then
            // written and checked (and loaded, given targets) a block at a
            // time, from the cache the write left it in.
            while let Some(piece) = source.next_piece()? {
                check.room(piece.len()).map_err(StorageError::from)?;
                for block in piece.chunks(CHECK_BLOCK) {
                    self.file
                        .write_all_at(block, at)
                        .map_err(|e| io_err("write", at + block.len() as u64, e))?;
                    check.feed(block).map_err(StorageError::from)?;
                    at += block.len() as u64;
                }
            }
            let header = check.finish().map_err(StorageError::from)?;
            self.crash_point("fsync");
            self.file.sync_data().map_err(|e| io_err("sync", at, e))?;
            Ok(header)
        })();
        match result {
            Ok(header) => {
                self.len = at;
                Ok(header)
            }
            Err(e) => {
                let _ = self.file.set_len(0);
                Err(e)
            }
        }
    }

    fn try_fill(
        &mut self,
        spec: &WriteSpec<'_>,
        regions: &[RegionSource<'_>],
        layout: &format::Layout,
    ) -> Result<format::Written, StorageError> {
        // A mapping still shared with a load is given up, not written to.
        if self
            .map
            .as_mut()
            .is_some_and(|m| std::sync::Arc::get_mut(m).is_none())
        {
            self.map = None;
        }
        let mapped = self.prepare(layout.capacity)?;
        self.crash_point("write");
        let result = match self
            .map
            .as_mut()
            .and_then(std::sync::Arc::get_mut)
            .filter(|_| mapped)
        {
            Some(map) => format::write_checkpoint(&mut SliceSink::new(map), spec, regions, layout),
            None => format::write_checkpoint(&mut FileSink::new(&self.file), spec, regions, layout),
        };
        let path = self.path.clone();
        let written = result.map_err(|kind| match kind {
            FormatErrorKind::Io(e) => StorageError::io("write", &path, layout.capacity, e),
            other => FormatError::new(&path, other).into(),
        })?;
        let io_err = |op, e| StorageError::io(op, &path, layout.capacity, e);
        if mapped {
            if let Some(map) = self.map.as_ref() {
                self.crash_point("msync");
                map.flush().map_err(|e| io_err("flush", e))?;
            }
        }
        // Compressed data may end before the file did.
        if written.file_len < self.len {
            self.map = None;
            self.crash_point("truncate");
            self.file
                .set_len(written.file_len)
                .map_err(|e| io_err("truncate", e))?;
        }
        self.len = written.file_len;
        self.crash_point("fsync");
        self.file.sync_data().map_err(|e| io_err("sync", e))?;
        Ok(written)
    }
}
