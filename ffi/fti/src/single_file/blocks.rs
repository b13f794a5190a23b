//! The checksums of a single file's data: each `dataset-<id>.bin` is cut
//! into blocks of [`BLOCK`] bytes (the last one shorter) and
//! `dataset-<id>.crc` holds one CRC-32 per block, little-endian, in block
//! order. The ranks sum an even share of the blocks each once every rank's
//! subsets are synced; a reader checks every block its hyperslab touches
//! before it copies from it, so a flipped bit anywhere in the data or the
//! sums is `FTI_NREC` naming the file and the byte, never wrong values.
//!
//! Memory stays bounded: one block at a time is read, summed or checked.

use frame_core::internals::safefs::Dir;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// The bytes one checksum covers: small enough that a rank reading a
/// narrow hyperslab reads little it does not need, large enough that the
/// sums are a 16384th of the data.
pub(super) const BLOCK: u64 = 64 << 10;

/// The sums written at most at once, in bytes (4 per block).
const SUMS_AT_ONCE: usize = 16 << 10;

/// The sums' file of data set file `data` (`dataset-<id>.bin`).
pub(super) fn sums_file(data: &str) -> String {
    format!("{}.crc", data.trim_end_matches(".bin"))
}

/// How many blocks a data set of `bytes` bytes has.
pub(super) fn blocks(bytes: u64) -> u64 {
    bytes.div_ceil(BLOCK)
}

/// The length of the sums' file of a data set of `bytes` bytes.
pub(super) fn sums_len(bytes: u64) -> u64 {
    blocks(bytes) * 4
}

/// Sums rank `rank`'s share (of `ranks`) of the blocks of data file `data`
/// (`bytes` long) in `dir` into its sums' file, and syncs it.
pub(super) fn sum_share(
    dir: &Dir,
    data: &str,
    bytes: u64,
    rank: usize,
    ranks: usize,
) -> Result<(), String> {
    let n = blocks(bytes);
    let ranks = ranks.max(1) as u64;
    let (first, end) = (n * rank as u64 / ranks, n * (rank as u64 + 1) / ranks);
    if first == end {
        return Ok(());
    }
    let sums_name = sums_file(data);
    let open = |name: &str, rw: bool| {
        if rw {
            dir.open_rw(name)
        } else {
            dir.open_read(name)
        }
        .map_err(|e| e.to_string())
    };
    let (file, sums) = (open(data, false)?, open(&sums_name, true)?);
    let mut block = vec![0u8; BLOCK as usize];
    let mut out = Vec::with_capacity(SUMS_AT_ONCE);
    let mut out_at = first * 4;
    for b in first..end {
        let len = (bytes - b * BLOCK).min(BLOCK) as usize;
        file.read_exact_at(&mut block[..len], b * BLOCK)
            .map_err(|e| format!("{}: {e}", dir.join(data).display()))?;
        out.extend_from_slice(&crc32fast::hash(&block[..len]).to_le_bytes());
        if out.len() == SUMS_AT_ONCE || b + 1 == end {
            sums.write_all_at(&out, out_at)
                .map_err(|e| format!("{}: {e}", dir.join(&sums_name).display()))?;
            out_at += out.len() as u64;
            out.clear();
        }
    }
    sums.sync_data()
        .map_err(|e| format!("{}: {e}", dir.join(&sums_name).display()))
}

/// A data set's file read through its checksums.
pub(super) struct Checked {
    data: File,
    sums: File,
    path: PathBuf,
    bytes: u64,
    /// The block last checked, and its bytes.
    held: Option<u64>,
    block: Vec<u8>,
}

impl Checked {
    /// Opens data file `data` of `dir` (at `path`), which must be `bytes`
    /// long, and its sums.
    pub fn open(dir: &Dir, path: &Path, data: &str, bytes: u64) -> Result<Self, String> {
        let sums_name = sums_file(data);
        let open = |name: &str| dir.open_read(name).map_err(|e| e.to_string());
        let (file, sums) = (open(data)?, open(&sums_name)?);
        let len = |f: &File, name: &str| {
            f.metadata()
                .map(|m| m.len())
                .map_err(|e| format!("{}: {e}", dir.join(name).display()))
        };
        let have = len(&file, data)?;
        if have != bytes {
            return Err(format!(
                "{} holds {have} bytes, its table says {bytes}",
                path.display()
            ));
        }
        let have = len(&sums, &sums_name)?;
        if have != sums_len(bytes) {
            return Err(format!(
                "{} holds {have} bytes, {} blocks of {} need {}",
                dir.join(&sums_name).display(),
                blocks(bytes),
                path.display(),
                sums_len(bytes)
            ));
        }
        Ok(Self {
            data: file,
            sums,
            path: path.to_path_buf(),
            bytes,
            held: None,
            block: Vec::new(),
        })
    }

    /// Fills `into` from byte `at` of the data, every block it touches
    /// checked first.
    pub fn read_at(&mut self, into: &mut [u8], at: u64) -> Result<(), String> {
        let end = at
            .checked_add(into.len() as u64)
            .filter(|e| *e <= self.bytes)
            .ok_or_else(|| format!("{}: a read past its end", self.path.display()))?;
        let mut pos = at;
        while pos < end {
            let b = pos / BLOCK;
            self.hold(b)?;
            let start = b * BLOCK;
            let upto = end.min(start + self.block.len() as u64);
            let dst = (pos - at) as usize..(upto - at) as usize;
            into[dst].copy_from_slice(&self.block[(pos - start) as usize..(upto - start) as usize]);
            pos = upto;
        }
        Ok(())
    }

    /// Reads block `b` and checks it against its sum.
    fn hold(&mut self, b: u64) -> Result<(), String> {
        if self.held == Some(b) {
            return Ok(());
        }
        self.held = None;
        let len = (self.bytes - b * BLOCK).min(BLOCK) as usize;
        self.block.resize(len, 0);
        self.data
            .read_exact_at(&mut self.block, b * BLOCK)
            .map_err(|e| format!("{}: {e}", self.path.display()))?;
        let mut sum = [0u8; 4];
        self.sums
            .read_exact_at(&mut sum, b * 4)
            .map_err(|e| format!("{}'s sums: {e}", self.path.display()))?;
        if crc32fast::hash(&self.block) != u32::from_le_bytes(sum) {
            return Err(format!(
                "{}: bytes {}..{} do not match their checksum (the file is damaged)",
                self.path.display(),
                b * BLOCK,
                b * BLOCK + len as u64
            ));
        }
        self.held = Some(b);
        Ok(())
    }
}
