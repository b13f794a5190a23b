//! Checking a checkpoint file while its bytes go by, in bounded memory.
//!
//! A file that arrives from elsewhere (a partner's copy, a decoded file, a
//! file read back from level 4) is written piece by piece; [`StreamCheck`]
//! is fed the same pieces in order and checks what [`CheckpointFile::open`]
//! and [`CheckpointFile::verify`] check on disk: the header and tables, the
//! length, and every chunk's CRC (and that compressed chunks decompress).
//! It holds the header and tables, and at most one compressed chunk (raw
//! chunks are hashed as they pass): never the file.
//!
//! Given [`Target`]s, it also loads the file's regions into the program's
//! memory as their chunks pass (raw chunks copied with their CRC computed
//! in the same pass, compressed ones once checked): a file read back from
//! a higher level is installed and loaded in one pass over its bytes.
//!
//! [`CheckpointFile::open`]: super::CheckpointFile::open
//! [`CheckpointFile::verify`]: super::CheckpointFile::verify

use super::copy::copy_with_crc;
use super::layout::HEADER_SIZE;
use super::reader::{crc_error, header_len_of, read_head, ChunkCheck};
use super::{ChunkInfo, Codec, FileHeader, FormatError, FormatErrorKind};
use crate::region::RegionId;
use std::path::{Path, PathBuf};

/// A protected region's memory that a streamed file's region of the same
/// id is loaded into; its length must be the stored region's.
pub(crate) struct Target<'a> {
    /// The region's id.
    pub(crate) region: RegionId,
    /// Its bytes.
    pub(crate) bytes: &'a mut [u8],
    /// Bytes loaded so far.
    filled: u64,
}

impl<'a> Target<'a> {
    /// Region `region`'s memory, `bytes`.
    pub(crate) fn new(region: RegionId, bytes: &'a mut [u8]) -> Self {
        Self {
            region,
            bytes,
            filled: 0,
        }
    }
}

/// The part of the file being checked.
enum Part {
    /// The header and tables, up to the given length once known.
    Head(Option<u64>),
    /// The chunks: the index of the current one.
    Chunks(usize),
}

/// Checks a checkpoint file fed in order, piece by piece (and loads its
/// regions into [`Target`]s, when given some).
pub(crate) struct StreamCheck<'t> {
    path: PathBuf,
    expected: u64,
    seen: u64,
    part: Part,
    head: Vec<u8>,
    header: Option<FileHeader>,
    chunks: Vec<ChunkInfo>,
    /// Bytes of the current chunk seen so far.
    in_chunk: u64,
    /// A raw chunk's running CRC.
    crc: crc32fast::Hasher,
    /// A compressed chunk's stored bytes (checked whole).
    stored: Vec<u8>,
    check: ChunkCheck,
    /// Where regions are loaded.
    targets: Vec<Target<'t>>,
    /// The target of the current chunk.
    dest: Option<usize>,
}

impl StreamCheck<'static> {
    /// A check of a file that must be `expected` bytes long; `path` names it
    /// in errors.
    pub(crate) fn new(path: impl AsRef<Path>, expected: u64) -> Result<Self, FormatError> {
        let path = path.as_ref().to_path_buf();
        let check = ChunkCheck::new().map_err(|k| FormatError::new(&path, k))?;
        Ok(Self {
            path,
            expected,
            seen: 0,
            part: Part::Head(None),
            head: Vec::with_capacity(HEADER_SIZE),
            header: None,
            chunks: Vec::new(),
            in_chunk: 0,
            crc: crc32fast::Hasher::new(),
            stored: Vec::new(),
            check,
            targets: Vec::new(),
            dest: None,
        })
    }
}

impl<'t> StreamCheck<'t> {
    /// The same check, loading the regions of `targets` as they pass; a
    /// stored region none names is only checked. [`finish`](Self::finish)
    /// fails unless every target was filled exactly.
    pub(crate) fn loading<'b>(self, targets: Vec<Target<'b>>) -> StreamCheck<'b> {
        StreamCheck {
            path: self.path,
            expected: self.expected,
            seen: self.seen,
            part: self.part,
            head: self.head,
            header: self.header,
            chunks: self.chunks,
            in_chunk: self.in_chunk,
            crc: self.crc,
            stored: self.stored,
            check: self.check,
            targets,
            dest: None,
        }
    }

    fn err(&self, kind: FormatErrorKind) -> FormatError {
        FormatError::new(&self.path, kind)
    }

    /// Refuses `len` more bytes when they would run past the file's
    /// announced length (as [`feed`](Self::feed) would).
    pub(crate) fn room(&self, len: usize) -> Result<(), FormatError> {
        if self.seen + len as u64 > self.expected {
            return Err(self.err(FormatErrorKind::Inconsistent(format!(
                "more than the {} bytes announced",
                self.expected
            ))));
        }
        Ok(())
    }

    /// Checks the next `bytes` of the file.
    pub(crate) fn feed(&mut self, mut bytes: &[u8]) -> Result<(), FormatError> {
        self.room(bytes.len())?;
        self.seen += bytes.len() as u64;
        while !bytes.is_empty() {
            bytes = match self.part {
                Part::Head(len) => self.feed_head(len, bytes)?,
                Part::Chunks(i) => self.feed_chunk(i, bytes)?,
            };
        }
        Ok(())
    }

    /// Takes header bytes from `bytes`; returns the rest.
    fn feed_head<'a>(
        &mut self,
        len: Option<u64>,
        bytes: &'a [u8],
    ) -> Result<&'a [u8], FormatError> {
        let want = len.unwrap_or(HEADER_SIZE as u64) as usize;
        let take = (want - self.head.len()).min(bytes.len());
        self.head.extend_from_slice(&bytes[..take]);
        if self.head.len() == want {
            match len {
                None => {
                    let header_len = header_len_of(&self.head).map_err(|k| self.err(k))?;
                    if header_len > self.expected {
                        return Err(self.err(FormatErrorKind::Truncated {
                            expected: header_len,
                            actual: self.expected,
                        }));
                    }
                    self.head.reserve(header_len as usize - self.head.len());
                    self.part = Part::Head(Some(header_len));
                    if header_len as usize == self.head.len() {
                        self.parse_head()?;
                    }
                }
                Some(_) => self.parse_head()?,
            }
        }
        Ok(&bytes[take..])
    }

    fn parse_head(&mut self) -> Result<(), FormatError> {
        let head = std::mem::take(&mut self.head);
        let (header, _, chunks) = read_head(self.expected, |buf, at| {
            let start = usize::try_from(at).unwrap_or(usize::MAX);
            match head.get(start..start.saturating_add(buf.len())) {
                Some(src) => {
                    buf.copy_from_slice(src);
                    Ok(())
                }
                None => Err(std::io::ErrorKind::UnexpectedEof.into()),
            }
        })
        .map_err(|k| self.err(k))?;
        self.header = Some(header);
        self.chunks = chunks;
        self.part = Part::Chunks(0);
        Ok(())
    }

    /// Takes bytes of chunk `i` from `bytes`; returns the rest.
    fn feed_chunk<'a>(&mut self, i: usize, bytes: &'a [u8]) -> Result<&'a [u8], FormatError> {
        let Some(c) = self.chunks.get(i).copied() else {
            // The layout tiles the file exactly: nothing follows the last chunk.
            return Err(self.err(FormatErrorKind::Inconsistent(
                "bytes after the last chunk".into(),
            )));
        };
        if self.in_chunk == 0 {
            self.dest = self.targets.iter().position(|t| t.region == c.region);
        }
        let left = u64::from(c.stored_len) - self.in_chunk;
        let take = usize::try_from(left).unwrap_or(usize::MAX).min(bytes.len());
        let piece = &bytes[..take];
        match (c.codec, self.dest) {
            (Codec::Raw, Some(t)) => {
                let target = &mut self.targets[t];
                let Some(out) = span(target, self.in_chunk, take) else {
                    return Err(self.err(overrun(&c)));
                };
                copy_with_crc(out, piece, &mut self.crc);
            }
            (Codec::Raw, None) => self.crc.update(piece),
            (Codec::Zstd, _) => self.stored.extend_from_slice(piece),
        }
        self.in_chunk += take as u64;
        if self.in_chunk == u64::from(c.stored_len) {
            let result = match c.codec {
                Codec::Raw => {
                    let computed = std::mem::take(&mut self.crc).finalize();
                    if computed == c.crc {
                        Ok(())
                    } else {
                        Err(crc_error(&c, computed))
                    }
                }
                Codec::Zstd => {
                    let stored = std::mem::take(&mut self.stored);
                    let done = self.check.check(&c, &stored);
                    self.stored = stored;
                    self.stored.clear();
                    done
                }
            };
            result.map_err(|k| self.err(k))?;
            if let Some(t) = self.dest.take() {
                let target = &mut self.targets[t];
                if c.codec == Codec::Zstd {
                    let raw = self.check.raw();
                    let Some(out) = span(target, 0, raw.len()) else {
                        return Err(self.err(overrun(&c)));
                    };
                    out.copy_from_slice(raw);
                }
                target.filled += u64::from(c.raw_len);
            }
            self.in_chunk = 0;
            self.part = Part::Chunks(i + 1);
        }
        Ok(&bytes[take..])
    }

    /// Ends the check: the whole file arrived and every chunk was sound.
    /// Returns its header.
    pub(crate) fn finish(self) -> Result<FileHeader, FormatError> {
        let complete = matches!(self.part, Part::Chunks(i) if i == self.chunks.len());
        if let Some(t) = self
            .targets
            .iter()
            .find(|t| t.filled != t.bytes.len() as u64)
        {
            return Err(self.err(FormatErrorKind::Inconsistent(format!(
                "region {} holds {} bytes, {} were expected",
                t.region,
                t.filled,
                t.bytes.len()
            ))));
        }
        match self.header {
            Some(h) if complete && self.seen == self.expected => Ok(h),
            _ => Err(self.err(FormatErrorKind::Truncated {
                expected: self.expected,
                actual: self.seen,
            })),
        }
    }
}

#[cfg(test)]
mod tests;

/// The `len` bytes of `target` at `at` past what it holds so far; `None`
/// past its end.
fn span<'t>(target: &'t mut Target<'_>, at: u64, len: usize) -> Option<&'t mut [u8]> {
    let start = usize::try_from(target.filled.checked_add(at)?).ok()?;
    target.bytes.get_mut(start..start.checked_add(len)?)
}

/// A chunk that runs past the end of the region it is loaded into.
fn overrun(c: &ChunkInfo) -> FormatErrorKind {
    FormatErrorKind::Inconsistent(format!(
        "chunk {} runs past the end of region {}",
        c.index, c.region
    ))
}
