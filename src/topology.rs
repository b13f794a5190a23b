//! Who protects whom: partners (level 2) and erasure groups (level 3),
//! computed from where the ranks are.
//!
//! A pure function of the placement (rank → node) and the group settings,
//! so it follows the ranks: after a node's ranks move to a spare, the spare
//! takes the dead node's place in the next checkpoint's topology, and the
//! dead node drops out.
//!
//! Rules:
//! - only nodes that hold ranks take part, in ascending node id;
//! - a node's partner is the next node in that order (the last wraps to the
//!   first), so a partner is always another node;
//! - nodes form groups of at most `group_size` consecutive nodes; when the
//!   count does not divide, the groups are made as even as possible, and no
//!   group is smaller than `parity + 1` (a group needs at least one data
//!   node beside its parity);
//! - nothing has to be a multiple of anything.
//!
//! ```
//! use frame::internals::topology::Topology;
//!
//! // Ranks 0-1 on node 0, 2-3 on node 1, 4 on node 5, 5 on node 7.
//! let t = Topology::new(vec![0, 0, 1, 1, 5, 7], 4, 1).unwrap();
//! assert_eq!(t.nodes(), &[0, 1, 5, 7]);
//! assert_eq!(t.partner(7), Some(0));
//! assert_eq!(t.group_of(5).unwrap().nodes, vec![0, 1, 5, 7]);
//! assert_eq!(t.ranks_on(1), vec![2, 3]);
//! ```

use serde::{Deserialize, Serialize};

/// Largest configurable group. A stripe of a group of g nodes has g shards
/// and the erasure code takes at most 256; merged short groups stay below
/// twice this.
pub(crate) const MAX_GROUP: u32 = 64;

/// Why a topology cannot be formed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TopologyError {
    /// No rank at all.
    #[error("the job has no ranks")]
    Empty,
    /// Group settings out of range.
    #[error("group_size {group_size} with parity {parity}: need 1 <= parity < group_size <= {MAX_GROUP}")]
    Settings {
        /// Configured group size.
        group_size: u32,
        /// Configured parity count.
        parity: u32,
    },
}

/// An erasure group: nodes that protect each other's data with parity.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Group {
    /// Index of the group in the topology.
    pub index: u32,
    /// Member nodes, ascending.
    pub nodes: Vec<u32>,
    /// Nodes of the group that may fail together without losing data.
    pub parity: u32,
}

impl Group {
    /// Position of `node` in the group.
    pub fn position(&self, node: u32) -> Option<usize> {
        self.nodes.iter().position(|n| *n == node)
    }

    /// Data shards per stripe (members minus parity).
    pub fn data_shards(&self) -> usize {
        self.nodes.len() - self.parity as usize
    }
}

/// What a topology is made from, as recorded with each commit of a
/// checkpoint so that recovery knows where its copies and shards live.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Layout {
    /// Rank → node when the checkpoint was written.
    pub placement: Vec<u32>,
    /// Configured group size.
    pub group_size: u32,
    /// Configured parity per group.
    pub parity: u32,
}

impl Layout {
    /// The topology this layout describes (an error for settings out of
    /// range, as a damaged or foreign record may hold).
    pub fn topology(&self) -> Result<Topology, TopologyError> {
        Topology::new(self.placement.clone(), self.group_size, self.parity)
    }
}

/// The placement of a checkpoint and the protection relations it implies.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Topology {
    placement: Vec<u32>,
    nodes: Vec<u32>,
    groups: Vec<Group>,
    group_size: u32,
    parity: u32,
}

impl Topology {
    /// Builds the topology of `placement` (`placement[r]` is rank r's node)
    /// with groups of at most `group_size` nodes tolerating `parity` failed
    /// nodes each. A job on fewer nodes than a group needs gets one group of
    /// all its nodes, with the parity lowered to fit (zero parity on a
    /// single node: level 3 then protects nothing, which
    /// [`Topology::protects_nodes`] reports).
    pub fn new(placement: Vec<u32>, group_size: u32, parity: u32) -> Result<Self, TopologyError> {
        if placement.is_empty() {
            return Err(TopologyError::Empty);
        }
        if parity == 0 || parity >= group_size || group_size > MAX_GROUP {
            return Err(TopologyError::Settings { group_size, parity });
        }
        let mut nodes = placement.clone();
        nodes.sort_unstable();
        nodes.dedup();
        let groups = make_groups(&nodes, group_size as usize, parity as usize);
        Ok(Self {
            placement,
            nodes,
            groups,
            group_size,
            parity,
        })
    }

    /// What this topology is made from.
    pub fn layout(&self) -> Layout {
        Layout {
            placement: self.placement.clone(),
            group_size: self.group_size,
            parity: self.parity,
        }
    }

    /// Rank → node.
    pub fn placement(&self) -> &[u32] {
        &self.placement
    }

    /// Nodes holding ranks, ascending.
    pub fn nodes(&self) -> &[u32] {
        &self.nodes
    }

    /// The node of `rank`.
    pub fn node_of(&self, rank: u32) -> Option<u32> {
        self.placement.get(rank as usize).copied()
    }

    /// Ranks on `node`, ascending.
    pub fn ranks_on(&self, node: u32) -> Vec<u32> {
        (0..self.placement.len() as u32)
            .filter(|r| self.placement[*r as usize] == node)
            .collect()
    }

    /// The node that keeps `node`'s level-2 copies (`None` for a job on a
    /// single node, or a node without ranks).
    pub fn partner(&self, node: u32) -> Option<u32> {
        let i = self.nodes.iter().position(|n| *n == node)?;
        let p = self.nodes[(i + 1) % self.nodes.len()];
        (p != node).then_some(p)
    }

    /// The node whose level-2 copies `node` keeps (inverse of [`partner`](Self::partner)).
    pub fn partner_of(&self, node: u32) -> Option<u32> {
        let i = self.nodes.iter().position(|n| *n == node)?;
        let p = self.nodes[(i + self.nodes.len() - 1) % self.nodes.len()];
        (p != node).then_some(p)
    }

    /// The erasure groups.
    pub fn groups(&self) -> &[Group] {
        &self.groups
    }

    /// The group `node` belongs to.
    pub fn group_of(&self, node: u32) -> Option<&Group> {
        self.groups.iter().find(|g| g.nodes.contains(&node))
    }

    /// Whether partners and groups can survive a lost node: false for a job
    /// on a single node, where levels 2 and 3 hold nothing a node failure
    /// would leave.
    pub fn protects_nodes(&self) -> bool {
        self.nodes.len() > 1
    }
}

/// Splits `nodes` into consecutive groups of at most `size`, as even as
/// possible, each with more than `parity` members when there are enough
/// nodes; lowers the parity of a job too small for one full group.
fn make_groups(nodes: &[u32], size: usize, parity: usize) -> Vec<Group> {
    let n = nodes.len();
    if n <= parity {
        return vec![Group {
            index: 0,
            nodes: nodes.to_vec(),
            parity: (n as u32).saturating_sub(1),
        }];
    }
    let count = n.div_ceil(size).min(n / (parity + 1)).max(1);
    let (base, extra) = (n / count, n % count);
    let mut groups = Vec::with_capacity(count);
    let mut at = 0;
    for index in 0..count {
        let len = base + usize::from(index < extra);
        groups.push(Group {
            index: index as u32,
            nodes: nodes[at..at + len].to_vec(),
            parity: parity as u32,
        });
        at += len;
    }
    groups
}

#[cfg(test)]
mod tests;
