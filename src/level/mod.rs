//! Checkpoint levels: where a checkpoint's copies live and how a copy is
//! committed, listed and removed.
//!
//! | level | where | survives |
//! |---|---|---|
//! | L1 | node-local RAM-disk or SSD | the death of ranks (the node survives) |
//! | L2 | L1 plus a copy on a partner node | a node, unless its partner fails too |
//! | L3 | L1 plus Reed-Solomon parity over a node group | up to m nodes per group |
//! | L4 | the global (parallel) file system | anything short of losing it |
//!
//! This module owns the directory layout and the commit protocol of each
//! level. It knows nothing of the runtime: it is handed a rank's identity and
//! the bytes to store.

pub(crate) mod commit;
pub(crate) mod copies;
pub mod erasure;
mod fsio;
pub(crate) mod global;
mod inventory;
pub mod l1;
pub(crate) mod names;
mod slot;
pub(crate) mod staging;
pub(crate) mod stream;

pub use copies::CopyStore;
pub(crate) use copies::IncomingCopy;
pub use fsio::StorageError;
pub use global::{Fence, GlobalStore, L4Write};
pub(crate) use inventory::{Held, Inventory};
pub(crate) use l1::open_rank_file as open_rank_file_in;
pub(crate) use l1::L1Store;
pub use stream::Pieces;

use serde::{Deserialize, Serialize};
use std::fmt;

/// A checkpoint level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Level {
    /// Node-local storage.
    L1 = 1,
    /// Partner copy.
    L2 = 2,
    /// Reed-Solomon encoded group.
    L3 = 3,
    /// Global file system.
    L4 = 4,
}

impl Level {
    /// The level number, 1 to 4.
    pub fn number(self) -> u8 {
        self as u8
    }

    /// The level numbered `n` (1 to 4).
    pub fn from_number(n: u8) -> Option<Self> {
        [Self::L1, Self::L2, Self::L3, Self::L4]
            .into_iter()
            .find(|l| l.number() == n)
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "L{}", self.number())
    }
}

/// Who is storing: a rank's identity as recorded in its files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    /// Job id.
    pub job_id: String,
    /// Rank.
    pub rank: u32,
    /// Ranks in the job.
    pub world_size: u32,
    /// Node the rank runs on.
    pub node: u32,
}
