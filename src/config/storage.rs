//! The node-local storage a configuration needs: the one place the
//! formula of `docs/STORAGE.md` is computed.
//!
//! Counted in checkpoints of a node's own data `D` (its ranks' files of
//! one checkpoint), with `K1`..`K3` the levels' `keep_last` and `Q` the
//! manager's queue. A snapshot waits while its node's queue is full, so
//! no node is more than `Q + 1` checkpoints behind the newest, and a
//! level commits a checkpoint at the first snapshot after every node
//! promoted it: at most `Q + 2` checkpoints of a level are in flight.
//!
//! - own files (level 1, staged, and kept at levels 2 and 3 as second
//!   names of one file): `(max(K1, Q + 2) + 1 + K2 + K3) D`: the newest
//!   `max(K1, Q + 2) + 1` checkpoints, and the committed ones levels 2
//!   and 3 keep;
//! - level 2, the copies of the nodes this node is a partner of (one
//!   node, or `l2.copies` of them): `(K2 + Q + 2) D_partner`, `D_partner`
//!   their data summed;
//! - level 3, parity: `(K3 + Q + 2) p P`, `P` the group's piece size
//!   ([`Stripes::piece`](crate::level::erasure::Stripes::piece) of the
//!   group's largest blob), `p` the parity.
//!
//! A level that is off counts nothing.

use super::Config;

/// A node's storage need, per part, in bytes (see the module's doc).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StorageNeed {
    /// The node's own files, whichever levels name them.
    pub own: u64,
    /// Level 2: other nodes' copies.
    pub partner: u64,
    /// Level 3: parity.
    pub parity: u64,
}

impl StorageNeed {
    /// The whole need.
    pub fn total(&self) -> u64 {
        self.own + self.partner + self.parity
    }
}

/// The sizes a node's need depends on, per checkpoint.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeData {
    /// The node's own ranks' files.
    pub own: u64,
    /// The files of the nodes whose level-2 copies this node keeps,
    /// summed (as many nodes as `l2.copies`, or every other node when
    /// fewer).
    pub partner: u64,
    /// The largest node blob of the node's level-3 group (its ranks' files
    /// and records).
    pub largest_blob: u64,
    /// Nodes in that group.
    pub group: u32,
}

impl Config {
    /// How many checkpoints of a node's own files levels 2 and 3 keep as
    /// second names of level-1 files: `K2 + K3` of the levels that are on,
    /// or the larger of the two when a commit at either retires the other's
    /// older ones (`retention.levels = "newest"`).
    pub(crate) fn linked_own_copies(&self) -> u32 {
        let kept = |on: bool, keep: u32| if on { keep } else { 0 };
        let k2 = kept(!self.l2.interval.is_zero(), self.l2.keep_last);
        let k3 = kept(!self.l3.interval.is_zero(), self.l3.keep_last);
        match self.retention.levels {
            super::LevelRetention::Newest => k2.max(k3),
            super::LevelRetention::Each | super::LevelRetention::Ordered => k2 + k3,
        }
    }

    /// The node-local storage a node with `data` needs under this
    /// configuration, at most (records and markers, a few KiB per file,
    /// come on top).
    pub fn storage_need(&self, data: NodeData) -> StorageNeed {
        let q = u64::from(self.manager.queue);
        let k1 = u64::from(self.retention.keep_last);
        let (l2, l3, l4) = (
            !self.l2.interval.is_zero(),
            !self.l3.interval.is_zero(),
            !self.l4.interval.is_zero(),
        );
        let k2 = if l2 { u64::from(self.l2.keep_last) } else { 0 };
        let k3 = if l3 { u64::from(self.l3.keep_last) } else { 0 };
        let newest = if l2 || l3 || l4 { k1.max(q + 2) } else { k1 };
        let mut need = StorageNeed {
            own: (newest + 1 + u64::from(self.linked_own_copies())) * data.own,
            ..StorageNeed::default()
        };
        if l2 {
            need.partner = (k2 + q + 2) * data.partner;
        }
        let p = u64::from(self.l3.parity);
        let g = u64::from(data.group);
        if l3 && g > p {
            let stripes = crate::level::erasure::Stripes {
                g: g as usize,
                p: p as usize,
            };
            need.parity = (k3 + q + 2) * p * stripes.piece(data.largest_blob);
        }
        need
    }
}

#[cfg(test)]
mod tests;
