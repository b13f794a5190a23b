//! XOR parity (level 3, as an alternative to Reed-Solomon): nodes form
//! the groups Reed-Solomon forms with one parity (`scheme/reed_solomon/`),
//! and each stripe's parity is the XOR of its data, so any one lost node
//! of a group is rebuilt. Cheaper to encode and to rebuild than
//! Reed-Solomon; it survives one lost node per group, never two.
//!
//! Rule `xor` with `group_size`. Configured as `[l3] scheme = "xor"`.

mod code;

use super::reed_solomon::Groups;
use crate::scheme::{Params, Parity, Protection, Scheme, SchemeError};
use crate::topology::{Rule, Topology, MAX_GROUP};
use std::collections::BTreeSet;

/// The scheme's name in recorded rules and group manifests.
const NAME: &str = "xor";

/// XOR parity in the registry.
pub(crate) const SCHEME: Scheme = Scheme {
    name: NAME,
    protect,
    parity: Some(Parity {
        groups,
        code: |k, p| Ok(Box::new(code::Code::new(k, p)?)),
    }),
};

/// The rule of groups of at most `group_size` nodes with XOR parity.
pub(crate) fn rule(group_size: u32) -> Rule {
    Rule::new(NAME, [("group_size", u64::from(group_size))])
}

/// The groups of `topology`'s nodes under `rule` (one parity each).
pub(crate) fn groups(topology: &Topology, rule: &Rule) -> Result<Groups, SchemeError> {
    if rule.scheme != NAME {
        return Err(SchemeError::Unknown(rule.scheme.clone()));
    }
    let mut params = Params::of(NAME, rule);
    let group_size = params.take("group_size", 2..=u64::from(MAX_GROUP))? as u32;
    params.done()?;
    Ok(Groups::new(topology, group_size, 1))
}

fn protect(topology: &Topology, rule: &Rule) -> Result<Box<dyn Protection>, SchemeError> {
    Ok(Box::new(Xor(groups(topology, rule)?)))
}

/// The groups of one placement, protected by XOR parity.
#[derive(Debug)]
struct Xor(Groups);

impl Protection for Xor {
    fn rule(&self) -> Rule {
        rule(self.0.group_size())
    }

    fn survives(&self, lost: &BTreeSet<u32>) -> bool {
        self.0.survives(lost)
    }
}

#[cfg(test)]
mod tests;
