//! Moving checkpoint files in bounded pieces: reading one in order, and
//! writing one that arrives in pieces while checking it.
//!
//! No level holds a whole file in memory to copy, send, receive or install
//! it: files are read [`PIECE`] bytes at a time, and a file arriving from
//! elsewhere is written under a temporary name while a
//! [`StreamCheck`] checks every chunk, and only gets its name once the
//! whole file arrived sound.

use super::fsio::StorageError;
use crate::format::{FileHeader, StreamCheck};
use crate::safefs::{AtomicFile, Dir};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

/// Bytes moved at a time when a file is copied, sent or installed.
pub(crate) const PIECE: usize = 8 << 20;

/// The pieces of a file being installed into level 1, in order: a file
/// received from another rank, or read back from level 4. Each piece is
/// lent until the next call, so a source hands out its own buffer (a
/// message received, a mapped chunk) rather than a copy of it.
pub(crate) trait PieceSource {
    /// Why the pieces stopped, besides storage.
    type Error: From<StorageError>;

    /// The next piece; `None` at the end.
    fn next_piece(&mut self) -> Result<Option<&[u8]>, Self::Error>;
}

/// A file read from its start, piece by piece.
pub struct Pieces {
    file: File,
    path: PathBuf,
    len: u64,
    at: u64,
}

impl Pieces {
    /// Reads the `len` bytes of `file` (named `path` in errors).
    pub fn new(file: File, path: PathBuf, len: u64) -> Self {
        Self {
            file,
            path,
            len,
            at: 0,
        }
    }

    /// Opens `name` in `dir`, which must be exactly `len` bytes long.
    pub fn open(dir: &Dir, name: &str, len: u64) -> Result<Self, StorageError> {
        let file = dir.open_read(name)?;
        let path = dir.join(name);
        let actual = file
            .metadata()
            .map_err(|e| StorageError::io("stat", &path, 0, e))?
            .len();
        if actual != len {
            return Err(crate::format::FormatError::new(
                &path,
                crate::format::FormatErrorKind::Metadata(format!(
                    "holds {actual} bytes, its record says {len}"
                )),
            )
            .into());
        }
        Ok(Self::new(file, path, len))
    }

    /// The whole file mapped read-only, each piece's page tables to be
    /// filled just before it is used ([`populate`](Self::populate)); `None`
    /// where it cannot be mapped (then read it piece by piece). A sender
    /// hands slices of the mapping to the transport instead of reading
    /// every piece into a buffer first. The length was checked when the
    /// file was opened; frame replaces its files by renaming, never
    /// truncates one being read.
    pub fn map(&self) -> Option<memmap2::Mmap> {
        if self.len == 0 {
            return None;
        }
        // SAFETY: read-only, of a file frame wrote in a private directory
        // and never truncates in place (it is replaced by renaming).
        let map = unsafe { memmap2::Mmap::map(&self.file) }.ok()?;
        (map.len() as u64 == self.len).then_some(map)
    }

    /// Fills the page tables of `range` of a mapping from [`map`](Self::map)
    /// (one call instead of a fault per page; a hint that may fail).
    pub fn populate(map: &memmap2::Mmap, range: std::ops::Range<usize>) {
        let _ = map.advise_range(memmap2::Advice::PopulateRead, range.start, range.len());
    }

    /// Drops `range` of a mapping from [`map`](Self::map) from this
    /// process once it is used: the file's pages stay where they are, and
    /// the process does not hold the whole file mapped by the end (its
    /// resident size stays bounded).
    pub fn release(map: &memmap2::Mmap, range: std::ops::Range<usize>) {
        // SAFETY: a read-only shared mapping of a file: dropped pages are
        // read again from the file if touched, never zeroed.
        let _ = unsafe {
            map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, range.start, range.len())
        };
    }

    /// The file's length.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the file is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes not read yet by [`next_into`](Self::next_into) or
    /// [`read_next`](Self::read_next).
    pub fn left(&self) -> u64 {
        self.len - self.at
    }

    /// The file and the offset of the next byte not read yet.
    pub(crate) fn next_at(&self) -> (std::os::fd::BorrowedFd<'_>, u64) {
        use std::os::fd::AsFd;
        (self.file.as_fd(), self.at)
    }

    /// Passes over the next `n` bytes (at most [`left`](Self::left)), read
    /// by other means.
    pub(crate) fn skip(&mut self, n: u64) -> Result<(), StorageError> {
        if n > self.left() {
            return Err(StorageError::io(
                "read",
                &self.path,
                0,
                std::io::Error::from(std::io::ErrorKind::UnexpectedEof),
            ));
        }
        self.at += n;
        Ok(())
    }

    /// Reads the next `out.len()` bytes (at most [`left`](Self::left)).
    pub fn read_next(&mut self, out: &mut [u8]) -> Result<(), StorageError> {
        if out.len() as u64 > self.left() {
            return Err(StorageError::io(
                "read",
                &self.path,
                0,
                std::io::Error::from(std::io::ErrorKind::UnexpectedEof),
            ));
        }
        self.file
            .read_exact_at(out, self.at)
            .map_err(|e| StorageError::io("read", &self.path, 0, e))?;
        self.at += out.len() as u64;
        Ok(())
    }

    /// Calls `f` with each piece of `step` bytes (the last one shorter),
    /// from a mapping of the file where it maps (no copy into a buffer),
    /// else read.
    pub fn each(
        &mut self,
        step: usize,
        mut f: impl FnMut(&[u8]) -> Result<(), StorageError>,
    ) -> Result<(), StorageError> {
        let step = step.max(1);
        if let Some(map) = self.map() {
            let mut at = 0usize;
            while at < map.len() {
                let end = map.len().min(at.saturating_add(step));
                Self::populate(&map, at..end);
                f(&map[at..end])?;
                Self::release(&map, at..end);
                at = end;
            }
            return Ok(());
        }
        let mut buf = Vec::new();
        while self.next_into(&mut buf, step)? {
            f(&buf)?;
        }
        Ok(())
    }

    /// Reads the next piece (at most `max` bytes) into `buf`; `false` at
    /// the end.
    pub fn next_into(&mut self, buf: &mut Vec<u8>, max: usize) -> Result<bool, StorageError> {
        let left = self.len - self.at;
        if left == 0 {
            buf.clear();
            return Ok(false);
        }
        let n = usize::try_from(left).unwrap_or(usize::MAX).min(max.max(1));
        buf.resize(n, 0);
        self.file
            .read_exact_at(buf, self.at)
            .map_err(|e| StorageError::io("read", &self.path, 0, e))?;
        self.at += n as u64;
        Ok(true)
    }

    /// Reads bytes `at..at + buf.len()` of the file, wherever the reading
    /// stands.
    pub fn read_at(&self, buf: &mut [u8], at: u64) -> Result<(), StorageError> {
        self.file
            .read_exact_at(buf, at)
            .map_err(|e| StorageError::io("read", &self.path, 0, e))
    }

    /// Calls `f` with every piece of the file, in order.
    pub fn for_each<E: From<StorageError>>(
        mut self,
        mut f: impl FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut buf = Vec::new();
        while self.next_into(&mut buf, PIECE)? {
            f(&buf)?;
        }
        Ok(())
    }
}

/// How much of an arriving piece is written, then checked, at a time:
/// small enough to stay in the L2 cache between the two.
pub(crate) const CHECK_BLOCK: usize = 256 * 1024;

/// A checkpoint file arriving in pieces: written under a temporary name and
/// checked on the way; it gets its name only when whole and sound.
pub(crate) struct Arriving {
    file: AtomicFile,
    check: StreamCheck<'static>,
}

impl Arriving {
    /// Starts receiving `name` in `dir`, `len` bytes long; `tag` keeps
    /// concurrent writers of the name apart.
    pub(crate) fn begin(dir: &Dir, name: &str, len: u64, tag: &str) -> Result<Self, StorageError> {
        let check = StreamCheck::new(dir.join(name), len)?;
        let file = dir
            .begin_atomic(name, tag)
            .map_err(|e| StorageError::from_fs(e, len))?;
        Ok(Self { file, check })
    }

    /// Writes and checks the next piece: refused whole, before a byte is
    /// written, if it runs past the file's length; then block by block,
    /// each checked right after the kernel copied it, from the cache the
    /// copy left it in (checked first, every block would be read from
    /// memory twice). The file is named only once whole and sound.
    pub(crate) fn write(&mut self, piece: &[u8]) -> Result<(), StorageError> {
        self.check.room(piece.len())?;
        for block in piece.chunks(CHECK_BLOCK) {
            let need = block.len() as u64;
            (self.file.write(block)).map_err(|e| StorageError::from_fs(e, need))?;
            self.check.feed(block)?;
        }
        Ok(())
    }

    /// Ends the file: it must be whole and sound, and `accept` must take
    /// its header; then it is made durable and named. Returns its header.
    pub(crate) fn finish(
        self,
        accept: impl FnOnce(&FileHeader) -> Result<(), StorageError>,
    ) -> Result<FileHeader, StorageError> {
        let header = self.check.finish()?;
        accept(&header)?;
        self.file.commit()?;
        Ok(header)
    }
}
