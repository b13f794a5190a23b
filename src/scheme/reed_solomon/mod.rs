//! Reed-Solomon groups (level 3): nodes form groups, and each group keeps
//! parity from which the data of any `parity` lost members is rebuilt.
//!
//! Rule `reed-solomon` with `group_size` and `parity`:
//! - only nodes that hold ranks take part, in ascending node id;
//! - they form groups of at most `group_size` consecutive nodes; when the
//!   count does not divide, the groups are made as even as possible, and
//!   no group is smaller than `parity + 1` (a group needs at least one
//!   data node beside its parity);
//! - a job on fewer nodes than that gets one group of all its nodes, its
//!   parity lowered to fit (none on a single node: nothing protected);
//! - nothing has to be a multiple of anything.
//!
//! A checkpoint survives when no group lost more members than its parity.
//! The groups are also the XOR scheme's (`scheme/xor/`, parity one).

use crate::scheme::{Params, Parity, Protection, Scheme, SchemeError};
use crate::topology::{Rule, Topology, MAX_GROUP};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

mod code;

/// The scheme's name in recorded rules and group manifests (the first
/// level-3 code: manifests that name none are this one's).
const NAME: &str = crate::level::erasure::FIRST_CODE;

/// Reed-Solomon groups in the registry.
pub(crate) const SCHEME: Scheme = Scheme {
    name: NAME,
    protect,
    parity: Some(Parity {
        groups: Groups::from_rule,
        code: |k, p| Ok(Box::new(code::Code::new(k, p)?)),
    }),
};

/// The rule of groups of at most `group_size` nodes with `parity` each.
pub(crate) fn rule(group_size: u32, parity: u32) -> Rule {
    Rule::new(
        NAME,
        [
            ("group_size", u64::from(group_size)),
            ("parity", u64::from(parity)),
        ],
    )
}

fn protect(topology: &Topology, rule: &Rule) -> Result<Box<dyn Protection>, SchemeError> {
    Ok(Box::new(Groups::from_rule(topology, rule)?))
}

/// An erasure group: nodes that protect each other's data with parity.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Group {
    /// Index of the group in the placement.
    pub index: u32,
    /// Member nodes, ascending.
    pub nodes: Vec<u32>,
    /// Nodes of the group that may fail together without losing data.
    pub parity: u32,
}

impl Group {
    /// Position of `node` in the group.
    pub(crate) fn position(&self, node: u32) -> Option<usize> {
        self.nodes.iter().position(|n| *n == node)
    }
}

/// The groups of one placement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Groups {
    groups: Vec<Group>,
    group_size: u32,
    parity: u32,
}

impl Groups {
    /// The groups of `topology`'s nodes, at most `group_size` each with
    /// `parity`. Settings out of range (`1 <= parity < group_size <=`
    /// [`MAX_GROUP`]) are the configuration's to refuse; here they are
    /// brought into range.
    pub(crate) fn new(topology: &Topology, group_size: u32, parity: u32) -> Self {
        let group_size = group_size.clamp(2, MAX_GROUP);
        let parity = parity.clamp(1, group_size - 1);
        Self {
            groups: make(topology.nodes(), group_size as usize, parity as usize),
            group_size,
            parity,
        }
    }

    /// The groups of `topology`'s nodes under `rule`.
    pub(crate) fn from_rule(topology: &Topology, rule: &Rule) -> Result<Self, SchemeError> {
        if rule.scheme != NAME {
            return Err(SchemeError::Unknown(rule.scheme.clone()));
        }
        let mut params = Params::of(NAME, rule);
        let group_size = params.take("group_size", 2..=u64::from(MAX_GROUP))? as u32;
        let parity = params.take("parity", 1..=u64::from(group_size) - 1)? as u32;
        params.done()?;
        Ok(Self::new(topology, group_size, parity))
    }

    /// The largest group asked for.
    pub(crate) fn group_size(&self) -> u32 {
        self.group_size
    }

    /// Every group.
    #[cfg(test)]
    pub(crate) fn all(&self) -> &[Group] {
        &self.groups
    }

    /// The group `node` belongs to.
    pub(crate) fn of(&self, node: u32) -> Option<&Group> {
        self.groups.iter().find(|g| g.nodes.contains(&node))
    }
}

impl Protection for Groups {
    fn rule(&self) -> Rule {
        rule(self.group_size, self.parity)
    }

    fn survives(&self, lost: &BTreeSet<u32>) -> bool {
        self.groups.iter().all(|g| {
            let gone = g.nodes.iter().filter(|n| lost.contains(n)).count();
            gone <= g.parity as usize
        })
    }
}

/// Splits `nodes` into consecutive groups of at most `size`, as even as
/// possible, each with more than `parity` members when there are enough
/// nodes; lowers the parity of a job too small for one full group.
fn make(nodes: &[u32], size: usize, parity: usize) -> Vec<Group> {
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
