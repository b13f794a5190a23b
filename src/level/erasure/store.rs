//! A node's level-3 directory: its own ranks' files (through a
//! [`CopyStore`]), its parity shards and the group's manifest.
//!
//! ```text
//! ckpt-<id>/rank-<r>.fck, rank-<r>.meta.json   the node's own ranks
//! ckpt-<id>/parity-<stripe>-<index>.bin          parity shards held here
//! ckpt-<id>/group.json                           the group's manifest,
//!                                                written after the parity
//! ```

use super::{add, BlobEntry, GroupManifest};
use crate::format::{FormatError, FormatErrorKind, Metadata};
use crate::level::fsio::{write_small, StorageError};
use crate::level::{names, CopyStore, Level, Pieces};
use crate::safefs::Dir;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// The tag of the temporary names of parity shards being summed.
const SUM_TAG: &str = "sum";

/// The temporary name of a parity shard being summed (a temporary name
/// in the sense of [`names::is_temporary`]).
fn sum_file(key: ParityKey) -> String {
    format!(".{}.tmp-{SUM_TAG}", parity_file(key))
}

/// The name of the group manifest.
pub const MANIFEST: &str = "group.json";

/// Identifies a parity shard: its stripe and its index in the stripe.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct ParityKey {
    /// Stripe.
    pub stripe: u32,
    /// Parity index within the stripe.
    pub index: u32,
}

/// The file name of a parity shard.
pub fn parity_file(key: ParityKey) -> String {
    format!("parity-{}-{}.bin", key.stripe, key.index)
}

/// Whether `name` is a parity shard's file name.
pub fn is_parity_file(name: &str) -> bool {
    name.strip_prefix("parity-")
        .and_then(|r| r.strip_suffix(".bin"))
        .and_then(|r| r.split_once('-'))
        .is_some_and(|(a, b)| a.parse::<u32>().is_ok() && b.parse::<u32>().is_ok())
}

/// One node's level-3 directory.
pub struct ErasureStore {
    copies: CopyStore,
}

impl ErasureStore {
    /// Opens (creating) the node's level-3 directory for `job_id`.
    pub fn open(local_dir: &Path, job_id: &str, who: u32) -> Result<Self, StorageError> {
        Ok(Self {
            copies: CopyStore::open(local_dir, job_id, Level::L3, who)?,
        })
    }

    /// Opens the directory if it exists.
    pub fn open_existing(local_dir: &Path, job_id: &str) -> Result<Option<Self>, StorageError> {
        Ok(CopyStore::open_existing(local_dir, job_id, Level::L3)?.map(|copies| Self { copies }))
    }

    /// The own ranks' files (link, scan, read, retain, commit markers).
    pub fn copies(&self) -> &CopyStore {
        &self.copies
    }

    /// The node's blob of checkpoint `id` (each rank's record as stored
    /// here, then its data file, in order), opened for reading at any
    /// offset, with its entries.
    pub fn blob(&self, id: u64, ranks: &[u32]) -> Result<(Blob, Vec<BlobEntry>), StorageError> {
        let ckpt = self.copies.checkpoint_dir(id, false)?;
        let mut parts = Vec::with_capacity(2 * ranks.len());
        let mut entries = Vec::with_capacity(ranks.len());
        for &rank in ranks {
            let record = ckpt.read_capped(&names::record_file(rank), crate::format::MAX_RECORD)?;
            let meta = Metadata::from_json(&record, ckpt.join(&names::record_file(rank)))?;
            let data = Pieces::open(&ckpt, &names::data_file(rank), meta.file_len)?;
            entries.push(BlobEntry {
                rank,
                record_len: record.len() as u64,
                data_len: meta.file_len,
            });
            parts.push(Part::Bytes(record));
            parts.push(Part::File(data));
        }
        Ok((Blob { parts }, entries))
    }

    /// Adds `term` into bytes `offset..` of the sum of parity shard `key`
    /// of checkpoint `id` (kept under a temporary name until
    /// [`seal_parity`](Self::seal_parity)).
    pub fn add_to_parity(
        &self,
        id: u64,
        key: ParityKey,
        offset: u64,
        term: &[u8],
    ) -> Result<(), StorageError> {
        let ckpt = self.copies.checkpoint_dir(id, true)?;
        let name = sum_file(key);
        let file = match ckpt.kind(&name) {
            Some(_) => ckpt.open_rw(&name)?,
            None => ckpt.create_new(&name)?,
        };
        let path = ckpt.join(&name);
        let need = term.len() as u64;
        let io = |op: &'static str, e: std::io::Error| StorageError::io(op, &path, need, e);
        let len = file.metadata().map_err(|e| io("stat", e))?.len();
        if len <= offset {
            // The window's first term: the sum is the term.
            return file.write_all_at(term, offset).map_err(|e| io("write", e));
        }
        // Every byte of the window gets its storage now (an error such as a
        // full disk comes back here, not as a fault when the mapping is
        // written).
        match rustix::fs::fallocate(&file, rustix::fs::FallocateFlags::empty(), offset, need) {
            Ok(()) => {}
            Err(rustix::io::Errno::OPNOTSUPP) => {
                // A file system without it: read, add, write back.
                let mut sum = vec![0u8; term.len()];
                let have = len.saturating_sub(offset).min(need) as usize;
                file.read_exact_at(&mut sum[..have], offset)
                    .map_err(|e| io("read", e))?;
                add(&mut sum, term);
                return file.write_all_at(&sum, offset).map_err(|e| io("write", e));
            }
            Err(e) => return Err(io("allocate", e.into())),
        }
        // The term is added into the file's pages where they are, with no
        // buffer read, summed and written back.
        // SAFETY: the sum file is this node's own (made by this manager in
        // its private node directory, under the state's lock that orders
        // every sum of the checkpoint); nothing else maps or truncates it
        // while the mapping lives, and the window's storage is allocated.
        let mut map = unsafe {
            memmap2::MmapOptions::new()
                .offset(offset)
                .len(term.len())
                .map_mut(&file)
        }
        .map_err(|e| io("map", e))?;
        add(&mut map, term);
        Ok(())
    }

    /// Makes the sum of parity shard `key` of checkpoint `id` (which must
    /// be `len` bytes) durable and gives it its name.
    pub fn seal_parity(&self, id: u64, key: ParityKey, len: u64) -> Result<(), StorageError> {
        let ckpt = self.copies.checkpoint_dir(id, false)?;
        let name = sum_file(key);
        let file = ckpt.open_rw(&name)?;
        let path = ckpt.join(&name);
        let have = file
            .metadata()
            .map_err(|e| StorageError::io("stat", &path, 0, e))?
            .len();
        if have != len {
            return Err(FormatError::new(
                &path,
                FormatErrorKind::Metadata(format!("sums {have} bytes of a {len}-byte shard")),
            )
            .into());
        }
        file.sync_all()
            .map_err(|e| StorageError::io("fsync", &path, 0, e))?;
        ckpt.rename(&name, &ckpt, &parity_file(key))?;
        Ok(ckpt.sync()?)
    }

    /// Removes the sums of checkpoint `id` left unfinished.
    pub fn drop_sums(&self, id: u64) {
        if let Ok(ckpt) = self.copies.checkpoint_dir(id, false) {
            for (name, _) in ckpt.entries().unwrap_or_default() {
                if name.starts_with(".parity-") && name.ends_with(&format!(".tmp-{SUM_TAG}")) {
                    let _ = ckpt.remove_file(&name);
                }
            }
        }
    }

    /// Opens a parity shard of checkpoint `id` (exactly `len` bytes) for
    /// reading in pieces.
    pub fn open_parity(&self, id: u64, key: ParityKey, len: u64) -> Result<Pieces, StorageError> {
        let ckpt = self.copies.checkpoint_dir(id, false)?;
        Pieces::open(&ckpt, &parity_file(key), len)
    }

    /// Reads a parity shard of checkpoint `id` through (exactly `len`
    /// bytes, one piece in memory at a time).
    pub fn check_parity(&self, id: u64, key: ParityKey, len: u64) -> Result<(), StorageError> {
        self.open_parity(id, key, len)?
            .for_each(|_| Ok::<(), StorageError>(()))
    }

    /// Whether a parity shard of checkpoint `id` is here with `len` bytes
    /// (nothing is read).
    pub fn has_parity(&self, id: u64, key: ParityKey, len: u64) -> bool {
        let Ok(ckpt) = self.copies.checkpoint_dir(id, false) else {
            return false;
        };
        let Ok(file) = ckpt.open_read(&parity_file(key)) else {
            return false;
        };
        file.metadata().is_ok_and(|m| m.len() == len)
    }

    /// Stores the group manifest (after every parity shard it covers).
    pub fn write_manifest(&self, m: &GroupManifest) -> Result<(), StorageError> {
        let ckpt = self.copies.checkpoint_dir(m.checkpoint_id, true)?;
        let bytes = serde_json::to_vec(m).unwrap_or_default();
        write_small(&ckpt, MANIFEST, &bytes, "group")
    }

    /// The group manifest of checkpoint `id`, if present and about it.
    pub fn manifest(&self, id: u64) -> Option<GroupManifest> {
        let ckpt: Dir = self.copies.checkpoint_dir(id, false).ok()?;
        let bytes = ckpt.read_capped(MANIFEST, crate::format::MAX_RECORD).ok()?;
        serde_json::from_slice::<GroupManifest>(&bytes)
            .ok()
            .filter(|m| m.checkpoint_id == id && m.job_id == self.copies.job_id())
    }

    /// Ids of the checkpoints here, ascending.
    pub fn ids(&self) -> Vec<u64> {
        self.copies.ids()
    }
}

/// A node's blob being read: its parts in order.
pub struct Blob {
    parts: Vec<Part>,
}

enum Part {
    Bytes(Vec<u8>),
    File(Pieces),
}

impl Part {
    fn len(&self) -> u64 {
        match self {
            Part::Bytes(b) => b.len() as u64,
            Part::File(f) => f.len(),
        }
    }
}

impl Blob {
    /// The blob's length.
    pub fn len(&self) -> u64 {
        self.parts.iter().map(Part::len).sum()
    }

    /// Whether the blob is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Fills `buf` with bytes `at..at + buf.len()` of the blob, padded with
    /// zeros past its end.
    pub fn read_at(&self, buf: &mut [u8], at: u64) -> Result<(), StorageError> {
        buf.fill(0);
        let mut start = 0u64;
        for part in &self.parts {
            let len = part.len();
            let end = at + buf.len() as u64;
            if start < end && at < start + len {
                let from = at.max(start);
                let to = end.min(start + len);
                let out = &mut buf[(from - at) as usize..(to - at) as usize];
                match part {
                    Part::Bytes(b) => {
                        out.copy_from_slice(&b[(from - start) as usize..(to - start) as usize])
                    }
                    Part::File(f) => f.read_at(out, from - start)?,
                }
            }
            start += len;
        }
        Ok(())
    }
}
