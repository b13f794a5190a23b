//! Destinations a checkpoint file is written into.
//!
//! The writer asks a [`Sink`] for a writable window at an offset, fills it and
//! commits it. A memory-mapped file is a [`SliceSink`] (windows are the mapped
//! pages themselves, so the data is copied exactly once); [`FileSink`] writes
//! with `pwrite` for file systems where mapping is not wanted.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use super::copy::copy_with_crc;

/// A destination for the bytes of one checkpoint file.
pub(crate) trait Sink {
    /// A writable buffer for `len` bytes that will land at `offset`.
    fn window(&mut self, offset: u64, len: usize) -> io::Result<&mut [u8]>;
    /// Declares the first `len` bytes of the last window written.
    fn commit(&mut self, offset: u64, len: usize) -> io::Result<()>;
    /// Writes `src` at `offset`, feeding it to `crc` in the same pass.
    fn copy_in(&mut self, offset: u64, src: &[u8], crc: &mut crc32fast::Hasher) -> io::Result<()> {
        copy_with_crc(self.window(offset, src.len())?, src, crc);
        self.commit(offset, src.len())
    }
}

fn out_of_range(offset: u64, len: usize, cap: usize) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("write at {offset}+{len} exceeds the {cap}-byte destination"),
    )
}

/// Writes into borrowed memory of fixed size, such as a mapped file.
pub(crate) struct SliceSink<'a> {
    buf: &'a mut [u8],
}

impl<'a> SliceSink<'a> {
    /// A sink writing into `buf`.
    pub(crate) fn new(buf: &'a mut [u8]) -> Self {
        Self { buf }
    }
}

impl Sink for SliceSink<'_> {
    fn window(&mut self, offset: u64, len: usize) -> io::Result<&mut [u8]> {
        let cap = self.buf.len();
        usize::try_from(offset)
            .ok()
            .and_then(|start| Some(start..start.checked_add(len)?))
            .and_then(|range| self.buf.get_mut(range))
            .ok_or_else(|| out_of_range(offset, len, cap))
    }

    fn commit(&mut self, _offset: u64, _len: usize) -> io::Result<()> {
        Ok(())
    }
}

/// Writes through `pwrite` on an open file.
pub(crate) struct FileSink<'a> {
    file: &'a File,
    scratch: Vec<u8>,
}

impl<'a> FileSink<'a> {
    /// A sink writing into `file`.
    pub(crate) fn new(file: &'a File) -> Self {
        Self {
            file,
            scratch: Vec::new(),
        }
    }
}

impl Sink for FileSink<'_> {
    fn window(&mut self, _offset: u64, len: usize) -> io::Result<&mut [u8]> {
        self.scratch.resize(len, 0);
        Ok(&mut self.scratch[..])
    }

    fn commit(&mut self, offset: u64, len: usize) -> io::Result<()> {
        let data = self
            .scratch
            .get(..len)
            .ok_or_else(|| out_of_range(offset, len, self.scratch.len()))?;
        self.file.write_all_at(data, offset)
    }

    fn copy_in(&mut self, offset: u64, src: &[u8], crc: &mut crc32fast::Hasher) -> io::Result<()> {
        // Block by block: the kernel's copy into the file brings each
        // block into the cache, and the CRC reads it from there. (The other
        // order makes the CRC fetch the block from memory, a pass a plain
        // write never pays: measured at 1.2x a plain write, against 0.9x
        // to 1.0x this way.)
        let mut at = offset;
        for block in src.chunks(WRITE_BLOCK) {
            self.file.write_all_at(block, at)?;
            crc.update(block);
            at += block.len() as u64;
        }
        Ok(())
    }
}

/// Granularity of [`FileSink`]'s writes: small enough to stay in L2 cache
/// between the copy into the file and the CRC.
const WRITE_BLOCK: usize = 256 * 1024;

#[cfg(test)]
mod tests;
