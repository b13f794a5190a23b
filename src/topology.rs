//! Where the ranks are: the placement (rank → node) of a checkpoint, the
//! nodes it spans, the [`Layout`] recorded with each commit, which names
//! the redundancy scheme and its parameters as a [`Rule`], and the
//! [`FailureTopology`]: which ranks and nodes a failure took, from the
//! runtime's messages to the recovery planner.
//!
//! Who protects whom under a rule (partners, groups) is each scheme's
//! business (`scheme/`); this module only records and carries it, so a
//! checkpoint is always read with the rule it was written under.
//!
//! ```
//! use frame::internals::topology::Topology;
//!
//! // Ranks 0-1 on node 0, 2-3 on node 1, 4 on node 5, 5 on node 7.
//! let t = Topology::new(vec![0, 0, 1, 1, 5, 7]).unwrap();
//! assert_eq!(t.nodes(), &[0, 1, 5, 7]);
//! assert_eq!(t.ranks_on(1), vec![2, 3]);
//! ```

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Largest configurable group of nodes that protect each other with
/// parity. A stripe of a group of g nodes has g shards and the erasure
/// code takes at most 256; merged short groups stay below twice this.
pub(crate) const MAX_GROUP: u32 = 64;

/// Most partner nodes that may each keep a whole copy of a node's files.
pub(crate) const MAX_COPIES: u32 = 8;

/// Why a topology cannot be formed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TopologyError {
    /// No rank at all.
    #[error("the job has no ranks")]
    Empty,
}

/// A redundancy scheme and its parameters, as recorded with a commit:
/// `{"scheme": "partner", "params": {"copies": 1}}`. Read by the scheme
/// it names; a scheme this build does not know, or a parameter it does
/// not take, makes the commit unusable rather than guessed at.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// The scheme's name.
    pub scheme: String,
    /// Its parameters, by name.
    #[serde(default)]
    pub params: BTreeMap<String, u64>,
}

impl Rule {
    /// A rule of `scheme` with `params`.
    pub fn new<'a>(scheme: &str, params: impl IntoIterator<Item = (&'a str, u64)>) -> Self {
        Self {
            scheme: scheme.to_string(),
            params: params
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
        }
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.scheme)?;
        for (i, (k, v)) in self.params.iter().enumerate() {
            let sep = if i == 0 { " " } else { ", " };
            write!(f, "{sep}{k}={v}")?;
        }
        Ok(())
    }
}

/// How a checkpoint was protected, as recorded with each commit of it:
/// where its ranks were and the rule of the level's scheme.
///
/// Markers written before rules were recorded hold the group settings
/// instead (`group_size`, `parity`) and no rule; the schemes map those
/// onto the rules of the time.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Layout {
    /// Rank → node when the checkpoint was written.
    pub placement: Vec<u32>,
    /// The scheme and its parameters (absent in older markers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<Rule>,
    /// Group size, in markers that predate rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_size: Option<u32>,
    /// Parity per group, in markers that predate rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parity: Option<u32>,
}

impl Layout {
    /// The layout of `topology` protected by `rule`.
    pub fn new(topology: &Topology, rule: Rule) -> Self {
        Self {
            placement: topology.placement.clone(),
            rule: Some(rule),
            group_size: None,
            parity: None,
        }
    }

    /// The placement as a topology (an error for an empty one, as a
    /// damaged or foreign record may hold).
    pub fn topology(&self) -> Result<Topology, TopologyError> {
        Topology::new(self.placement.clone())
    }
}

/// The placement of a checkpoint: where each rank was.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Topology {
    placement: Vec<u32>,
    nodes: Vec<u32>,
}

impl Topology {
    /// The topology of `placement` (`placement[r]` is rank r's node).
    pub fn new(placement: Vec<u32>) -> Result<Self, TopologyError> {
        if placement.is_empty() {
            return Err(TopologyError::Empty);
        }
        let mut nodes = placement.clone();
        nodes.sort_unstable();
        nodes.dedup();
        Ok(Self { placement, nodes })
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
}

/// Which ranks and nodes a failure took: the nodes whose storage is gone
/// (with every rank on them), and the ranks whose processes died on nodes
/// that may have survived. The runtime reports one with each recovery
/// ([`crate::comm::RecoveryContext::failed`]); the recovery planner adds
/// what the ranks find (nodes whose storage is empty) and plans from it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailureTopology {
    /// Failed nodes.
    pub nodes: BTreeSet<u32>,
    /// Failed ranks.
    pub ranks: BTreeSet<u32>,
}

impl FailureTopology {
    /// The loss of `nodes` (no rank failed alone).
    pub fn of_nodes(nodes: impl IntoIterator<Item = u32>) -> Self {
        Self {
            nodes: nodes.into_iter().collect(),
            ranks: BTreeSet::new(),
        }
    }

    /// Whether nothing failed.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty() && self.ranks.is_empty()
    }

    /// The failed nodes among `layout`'s.
    pub fn lost_in(&self, layout: &Topology) -> Vec<u32> {
        layout
            .nodes()
            .iter()
            .copied()
            .filter(|n| self.nodes.contains(n))
            .collect()
    }
}

#[cfg(test)]
mod tests;
