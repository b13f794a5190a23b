//! Level 3: parity across a group of nodes, by an erasure code its scheme
//! names (Reed-Solomon, or XOR with one parity).
//!
//! A group of g nodes tolerating p lost nodes stores, for each checkpoint:
//! - on every node, its own ranks' files (linked from level 1, as level 2
//!   does), which together form the node's *blob*: every rank's record then
//!   data file, in rank order;
//! - p parity shards per node;
//! - on every node, the group's [`GroupManifest`]: each node's blob layout
//!   and the piece size.
//!
//! Layout: there are g stripes. Stripe t's parity shards are held by the
//! nodes at group positions t, t+1, …, t+p-1 (mod g); the other g-p nodes
//! are its data nodes. Each blob is padded to (g-p)·P bytes and cut into
//! g-p pieces of P bytes; a node's q-th piece is its data shard in the q-th
//! stripe where it is a data node. Every stripe is a code of g-p data and
//! p parity shards ([`ErasureCode`]), and a lost node loses one shard of each
//! stripe, so any p lost nodes leave every stripe decodable. Each node
//! keeps p·P bytes of parity: p/(g-p) of the largest blob.
//!
//! Parity is linear: a parity shard is the sum over the stripe's data
//! nodes of a coefficient times their piece. Each data node computes its
//! own terms ([`scale`]) and sends them to the holders, which add them up
//! ([`add`]); no node needs another's data to encode.

mod shard;
mod store;

pub(crate) use shard::ShardReader;
pub use store::{is_parity_file, parity_file, Blob, ErasureStore, ParityKey, MANIFEST};

use reed_solomon_erasure::galois_8;
use serde::{Deserialize, Serialize};

/// One entry of a node's blob: a rank's record then its data file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlobEntry {
    /// Rank.
    pub rank: u32,
    /// Length of its record (JSON).
    pub record_len: u64,
    /// Length of its data file.
    pub data_len: u64,
}

/// What a group's parity protects, kept by every member.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupManifest {
    /// Job id.
    pub job_id: String,
    /// Checkpoint id.
    pub checkpoint_id: u64,
    /// Its stamp.
    pub stamp: u64,
    /// Member nodes, ascending (their group positions).
    pub nodes: Vec<u32>,
    /// Parity shards per stripe.
    pub parity: u32,
    /// Bytes per piece (and per parity shard).
    pub piece: u64,
    /// Each member's blob, by position.
    pub blobs: Vec<Vec<BlobEntry>>,
    /// The erasure code's name (its scheme's): [`FIRST_CODE`] in
    /// manifests that predate it.
    #[serde(default = "first_code")]
    pub code: String,
}

fn first_code() -> String {
    FIRST_CODE.to_string()
}

impl GroupManifest {
    /// Why this manifest cannot describe a group (a damaged or foreign
    /// one): parity not below the group's size, no piece size, blobs
    /// that do not match the members, a record longer than any frame
    /// writes, or a blob longer than its pieces.
    pub fn check(&self) -> Result<(), String> {
        let g = self.nodes.len();
        if self.parity == 0 || self.parity as usize >= g {
            return Err(format!("parity {} in a group of {g}", self.parity));
        }
        if self.piece == 0 || self.blobs.len() != g {
            return Err(format!(
                "pieces of {} bytes, {} blobs for {g} nodes",
                self.piece,
                self.blobs.len()
            ));
        }
        let room = (g as u64 - u64::from(self.parity)).checked_mul(self.piece);
        for blob in &self.blobs {
            if blob
                .iter()
                .any(|e| e.record_len > crate::format::MAX_RECORD)
            {
                return Err("a record longer than any frame writes".into());
            }
            let len = blob.iter().try_fold(0u64, |at, e| {
                at.checked_add(e.record_len)?.checked_add(e.data_len)
            });
            if len.zip(room).is_none_or(|(len, room)| len > room) {
                return Err("a blob longer than its pieces".into());
            }
        }
        Ok(())
    }
}

/// Length of a blob.
pub fn blob_len(entries: &[BlobEntry]) -> u64 {
    entries.iter().map(|e| e.record_len + e.data_len).sum()
}

/// Stripe geometry of a group of `g` nodes with `p` parity shards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stripes {
    /// Group size.
    pub g: usize,
    /// Parity shards per stripe.
    pub p: usize,
}

impl Stripes {
    /// Data shards per stripe.
    pub fn k(&self) -> usize {
        self.g - self.p
    }

    /// Whether position `pos` holds parity in stripe `t`, and as which
    /// parity index.
    pub fn parity_index(&self, t: usize, pos: usize) -> Option<usize> {
        let j = (pos + self.g - t) % self.g;
        (j < self.p).then_some(j)
    }

    /// The position holding parity shard `j` of stripe `t`.
    pub fn parity_holder(&self, t: usize, j: usize) -> usize {
        (t + j) % self.g
    }

    /// The data positions of stripe `t`, in shard order.
    pub fn data_nodes(&self, t: usize) -> Vec<usize> {
        (0..self.g)
            .filter(|pos| self.parity_index(t, *pos).is_none())
            .collect()
    }

    /// The stripes where `pos` is a data node, in piece order: piece q of
    /// the node's blob is its shard in stripe `data_stripes(pos)[q]`.
    pub fn data_stripes(&self, pos: usize) -> Vec<usize> {
        (0..self.g)
            .filter(|t| self.parity_index(*t, pos).is_none())
            .collect()
    }

    /// The shard index of data position `pos` within stripe `t`.
    pub fn data_index(&self, t: usize, pos: usize) -> Option<usize> {
        self.data_nodes(t).iter().position(|p| *p == pos)
    }

    /// The piece size for blobs of at most `largest` bytes (a multiple of 64).
    pub fn piece(&self, largest: u64) -> u64 {
        largest.div_ceil(self.k() as u64).div_ceil(64).max(1) * 64
    }
}

/// Why coding failed.
#[derive(Debug, thiserror::Error)]
#[error("erasure coding: {0}")]
pub struct CodecError(pub String);

/// A linear erasure code over the stripes of a group: each parity shard is
/// the sum (GF(2^8) addition, a byte-wise XOR) of every data shard times a
/// coefficient, so each data node computes its own terms
/// ([`scale`]) and the holders add them up ([`add`]). Each scheme that
/// keeps parity has one (`scheme/`), named in the group's manifest.
pub trait ErasureCode: Send + Sync {
    /// The coefficients data shard `index` is multiplied by in each parity
    /// shard.
    fn coefficients(&self, index: usize) -> Result<Vec<u8>, CodecError>;

    /// Fills in the missing data shards of a stripe (`shards`: k data then
    /// p parity, `None` where lost).
    fn reconstruct(&self, shards: &mut [Option<Vec<u8>>]) -> Result<(), CodecError>;

    /// All parity shards of a stripe at once, from the coefficients (for
    /// checks, tests and benchmarks).
    fn encode(&self, data: &[&[u8]], parity: &mut [Vec<u8>]) -> Result<(), CodecError> {
        let mut term = Vec::new();
        for p in parity.iter_mut() {
            p.iter_mut().for_each(|b| *b = 0);
        }
        for (index, piece) in data.iter().enumerate() {
            let coefficients = self.coefficients(index)?;
            if coefficients.len() != parity.len() {
                return Err(CodecError(format!(
                    "{} coefficients for {} parity shards",
                    coefficients.len(),
                    parity.len()
                )));
            }
            term.resize(piece.len(), 0);
            for (p, c) in parity.iter_mut().zip(coefficients) {
                if p.len() != piece.len() {
                    return Err(CodecError("shards of different lengths".into()));
                }
                scale(c, piece, &mut term);
                add(p, &term);
            }
        }
        Ok(())
    }
}

/// The code of manifests written before codes were named.
pub const FIRST_CODE: &str = "reed-solomon";

/// Writes `coefficient` times `input` into `out` (of the same length).
pub fn scale(coefficient: u8, input: &[u8], out: &mut [u8]) {
    if coefficient == 1 {
        out.copy_from_slice(input);
    } else {
        galois_8::mul_slice(coefficient, input, out);
    }
}

/// Adds `term` to `acc` (GF(2^8) addition: a byte-wise XOR, which the
/// compiler vectorises).
pub fn add(acc: &mut [u8], term: &[u8]) {
    for (a, t) in acc.iter_mut().zip(term) {
        *a ^= t;
    }
}

#[cfg(test)]
#[allow(clippy::needless_range_loop)] // positions and stripes index several tables
mod tests;
