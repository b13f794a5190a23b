//! A node's level-3 directory: its own ranks' files (through a
//! [`CopyStore`]), its parity shards and the group's manifest.
//!
//! ```text
//! ckpt-<id>/rank-<r>.fck, rank-<r>.meta.json   the node's own ranks
//! ckpt-<id>/parity-<stripe>-<index>.bin          parity shards held here
//! ckpt-<id>/group.json                           the group's manifest,
//!                                                written after the parity
//! ```

use super::{BlobEntry, GroupManifest};
use crate::format::Metadata;
use crate::level::fsio::StorageError;
use crate::level::{commit, names, CopyStore, Level};
use crate::safefs::Dir;
use std::path::Path;

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

    /// The node's blob of checkpoint `id`: each entry's record (as stored
    /// here) then data file, concatenated in order, with the entries.
    pub fn blob(&self, id: u64, ranks: &[u32]) -> Result<(Vec<u8>, Vec<BlobEntry>), StorageError> {
        let ckpt = self.copies.checkpoint_dir(id, false)?;
        let mut parts = Vec::with_capacity(ranks.len());
        for &rank in ranks {
            let record = ckpt.read_capped(&names::record_file(rank), crate::format::MAX_RECORD)?;
            let meta = Metadata::from_json(&record, ckpt.join(&names::record_file(rank)))?;
            let data = commit::read_exact(&ckpt, &names::data_file(rank), meta.file_len)?;
            parts.push((rank, record, data));
        }
        let total = parts.iter().map(|(_, r, d)| r.len() + d.len()).sum();
        let mut blob = Vec::with_capacity(total);
        let mut entries = Vec::with_capacity(parts.len());
        for (rank, record, data) in parts {
            entries.push(BlobEntry {
                rank,
                record_len: record.len() as u64,
                data_len: data.len() as u64,
            });
            blob.extend_from_slice(&record);
            blob.extend_from_slice(&data);
        }
        Ok((blob, entries))
    }

    /// Stores a parity shard of checkpoint `id`, durably.
    pub fn write_parity(&self, id: u64, key: ParityKey, bytes: &[u8]) -> Result<(), StorageError> {
        let ckpt = self.copies.checkpoint_dir(id, true)?;
        ckpt.write_atomic(&parity_file(key), bytes, "parity")
            .map_err(|e| StorageError::from_fs(e, bytes.len() as u64))
    }

    /// Reads a parity shard of checkpoint `id` (exactly `len` bytes).
    pub fn read_parity(&self, id: u64, key: ParityKey, len: u64) -> Result<Vec<u8>, StorageError> {
        let ckpt = self.copies.checkpoint_dir(id, false)?;
        commit::read_exact(&ckpt, &parity_file(key), len)
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
        Ok(ckpt.write_atomic(MANIFEST, &bytes, "group")?)
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
