//! Reading a group member's level-3 shards: the pieces of its blob, or
//! the parity shards it holds, a window at a time (a rebuild's members,
//! and a manager giving shards to a replacement that decodes its own
//! file).

use super::{Blob, ErasureStore, GroupManifest, ParityKey, Stripes};
use crate::level::Pieces;
use std::collections::BTreeMap;

/// A group member's shards of some stripes, read a window at a time: the
/// pieces of its blob, or the parity shards it holds.
pub(crate) struct ShardReader {
    blob: Blob,
    parity: BTreeMap<usize, Pieces>,
    stripes: Stripes,
    pos: usize,
    piece: u64,
}

impl ShardReader {
    /// Opens position `pos`'s shards of `stripes` of group `m`.
    pub(crate) fn open(
        store: &ErasureStore,
        m: &GroupManifest,
        pos: usize,
        stripes: &[usize],
    ) -> Result<Self, String> {
        let s = Stripes {
            g: m.nodes.len(),
            p: m.parity as usize,
        };
        let ranks: Vec<u32> = m
            .blobs
            .get(pos)
            .map(|b| b.iter().map(|e| e.rank).collect())
            .unwrap_or_default();
        let (blob, _) = store
            .blob(m.checkpoint_id, &ranks)
            .map_err(|e| e.to_string())?;
        let mut parity = BTreeMap::new();
        for &t in stripes {
            if let Some(j) = s.parity_index(t, pos) {
                let key = ParityKey {
                    stripe: t as u32,
                    index: j as u32,
                };
                let file = store
                    .open_parity(m.checkpoint_id, key, m.piece)
                    .map_err(|e| e.to_string())?;
                parity.insert(t, file);
            }
        }
        Ok(Self {
            blob,
            parity,
            stripes: s,
            pos,
            piece: m.piece,
        })
    }

    /// Fills `buf` with the window at `offset` of this member's shard of
    /// stripe `t`.
    pub(crate) fn read(&self, t: usize, offset: u64, buf: &mut [u8]) -> Result<(), String> {
        if let Some(file) = self.parity.get(&t) {
            return file.read_at(buf, offset).map_err(|e| e.to_string());
        }
        let q = self
            .stripes
            .data_stripes(self.pos)
            .iter()
            .position(|x| *x == t)
            .ok_or_else(|| format!("position {} has no shard in stripe {t}", self.pos))?;
        self.blob
            .read_at(buf, q as u64 * self.piece + offset)
            .map_err(|e| e.to_string())
    }
}
