//! Redundancy schemes: how a level above the first protects a checkpoint
//! against the loss of nodes. Each scheme lives in its own directory
//! (`partner/`, `reed_solomon/`, `xor/`, `global/`) and is known to the
//! rest of the library through one line of `registry.rs`.
//!
//! A scheme turns a [`Rule`] (its name and parameters, recorded with
//! every commit) and a placement into a [`Protection`]: which losses
//! every rank's data survives (schemes that keep parity also give their
//! groups and erasure code, [`Parity`]). The
//! recovery planner asks that of each committed checkpoint under the rule
//! it was written with, so changing a scheme's configuration or adding a
//! scheme never re-plans old checkpoints under a new rule.
//!
//! A rule's name and parameters must go on meaning what they meant: a
//! scheme that changes where it places data (another partner, another
//! grouping) does so under a new parameter or a new name, and keeps
//! reading the old ones as before, since markers written under them stay
//! on nodes and in the global directory across versions.

pub(crate) mod global;
pub(crate) mod partner;
pub(crate) mod reed_solomon;
mod registry;
pub(crate) mod xor;

pub use registry::erasure_code;
pub(crate) use registry::{configured, parity_groups, protection, recorded};

use crate::level::erasure::{CodecError, ErasureCode};
use crate::topology::{Rule, Topology};
use std::collections::BTreeSet;
use std::ops::RangeInclusive;

/// What a scheme makes of a placement: the losses it survives. Pure: no
/// I/O.
pub(crate) trait Protection: std::fmt::Debug + Send + Sync {
    /// The rule it was built from, as recorded.
    fn rule(&self) -> Rule;
    /// Whether every rank's data can still be restored once the nodes in
    /// `lost` are gone (nodes outside the placement do not matter).
    fn survives(&self, lost: &BTreeSet<u32>) -> bool;
}

/// How a scheme builds the protection of a placement under one of its
/// rules.
pub(crate) type Protect = fn(&Topology, &Rule) -> Result<Box<dyn Protection>, SchemeError>;

/// What a scheme that keeps parity in groups of nodes (level 3) adds.
pub(crate) struct Parity {
    /// The groups of a placement under a rule of the scheme.
    pub groups: fn(&Topology, &Rule) -> Result<reed_solomon::Groups, SchemeError>,
    /// The erasure code of a stripe of `k` data and `p` parity shards.
    pub code: fn(usize, usize) -> Result<Box<dyn ErasureCode>, CodecError>,
}

/// A scheme as the registry knows it: its recorded name, how a rule of it
/// becomes a [`Protection`], and for schemes that keep parity, their
/// groups and code.
pub(crate) struct Scheme {
    /// The name rules and group manifests record.
    pub name: &'static str,
    /// Builds the protection of a placement under a rule of this scheme.
    pub protect: Protect,
    /// Groups and erasure code (level-3 schemes).
    pub parity: Option<Parity>,
}

/// Why a rule cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SchemeError {
    /// No scheme of this name in this build.
    #[error("unknown redundancy scheme {0:?}")]
    Unknown(String),
    /// A scheme that keeps no parity where one that does is needed.
    #[error("redundancy scheme {0:?} keeps no parity in groups")]
    NoParity(String),
    /// A parameter missing, out of range or not taken by the scheme.
    #[error("scheme {scheme}: parameter {name} {why}")]
    Param {
        /// The scheme.
        scheme: &'static str,
        /// The parameter.
        name: String,
        /// What is wrong with it.
        why: String,
    },
}

/// A rule's parameters, taken one by one: a scheme takes each it knows
/// with its range, then [`done`](Params::done) refuses the rest.
pub(crate) struct Params<'a> {
    scheme: &'static str,
    rule: &'a Rule,
    taken: BTreeSet<&'static str>,
}

impl<'a> Params<'a> {
    /// The parameters of `rule`, read by `scheme`.
    pub(crate) fn of(scheme: &'static str, rule: &'a Rule) -> Self {
        Self {
            scheme,
            rule,
            taken: BTreeSet::new(),
        }
    }

    /// Parameter `name`, which must be present and within `range`.
    pub(crate) fn take(
        &mut self,
        name: &'static str,
        range: RangeInclusive<u64>,
    ) -> Result<u64, SchemeError> {
        self.taken.insert(name);
        let error = |why: String| SchemeError::Param {
            scheme: self.scheme,
            name: name.to_string(),
            why,
        };
        let value = *self
            .rule
            .params
            .get(name)
            .ok_or_else(|| error("is missing".into()))?;
        if !range.contains(&value) {
            return Err(error(format!(
                "is {value}, outside {}..={}",
                range.start(),
                range.end()
            )));
        }
        Ok(value)
    }

    /// Refuses any parameter not taken.
    pub(crate) fn done(self) -> Result<(), SchemeError> {
        match (self.rule.params.keys()).find(|k| !self.taken.contains(k.as_str())) {
            Some(name) => Err(SchemeError::Param {
                scheme: self.scheme,
                name: name.clone(),
                why: "is not one the scheme takes".into(),
            }),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests;
