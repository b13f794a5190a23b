//! Partner copies (level 2): each node's files are copied whole to the
//! next nodes holding ranks.
//!
//! Rule `partner` with `copies` = k: nodes holding ranks are taken in
//! ascending id, and node i's copies live on the k nodes after it (the
//! last wraps to the first), never on itself; a job on k nodes or fewer
//! has one copy on every other node. A node's ranks survive when the node
//! or one of its holders does. `[l2] copies` sets k.

use crate::scheme::{Params, Protection, Scheme, SchemeError};
use crate::topology::{Rule, Topology, MAX_COPIES};
use std::collections::BTreeSet;

/// The scheme's name in recorded rules.
const NAME: &str = "partner";

/// Partner copies in the registry.
pub(crate) const SCHEME: Scheme = Scheme {
    name: NAME,
    protect,
    parity: None,
};

/// The rule of `copies` partner copies per node.
pub(crate) fn rule(copies: u32) -> Rule {
    Rule::new(NAME, [("copies", u64::from(copies))])
}

fn protect(topology: &Topology, rule: &Rule) -> Result<Box<dyn Protection>, SchemeError> {
    Ok(Box::new(Partners::from_rule(topology, rule)?))
}

/// Which nodes keep whose copies under one placement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Partners {
    nodes: Vec<u32>,
    copies: u32,
}

impl Partners {
    /// The partners of `topology`'s nodes, `copies` per node.
    pub(crate) fn new(topology: &Topology, copies: u32) -> Self {
        Self {
            nodes: topology.nodes().to_vec(),
            copies,
        }
    }

    /// The partners of `topology`'s nodes under `rule`.
    pub(crate) fn from_rule(topology: &Topology, rule: &Rule) -> Result<Self, SchemeError> {
        if rule.scheme != NAME {
            return Err(SchemeError::Unknown(rule.scheme.clone()));
        }
        let mut params = Params::of(NAME, rule);
        let copies = params.take("copies", 1..=u64::from(MAX_COPIES))? as u32;
        params.done()?;
        Ok(Self::new(topology, copies))
    }

    /// The nodes that keep `node`'s copies, nearest first (none for a job
    /// on a single node, or a node without ranks).
    pub(crate) fn of(&self, node: u32) -> Vec<u32> {
        let Some(i) = self.nodes.iter().position(|n| *n == node) else {
            return Vec::new();
        };
        let n = self.nodes.len();
        let k = (self.copies as usize).min(n - 1);
        (1..=k).map(|d| self.nodes[(i + d) % n]).collect()
    }
}

impl Protection for Partners {
    fn rule(&self) -> Rule {
        rule(self.copies)
    }

    fn survives(&self, lost: &BTreeSet<u32>) -> bool {
        (self.nodes.iter().filter(|n| lost.contains(n)))
            .all(|n| self.of(*n).iter().any(|h| !lost.contains(h)))
    }
}

#[cfg(test)]
mod tests;
