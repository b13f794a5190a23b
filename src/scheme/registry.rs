//! The registry: every scheme this build knows, one line each, and the
//! mapping of each level's configuration and of older markers onto them.

use super::reed_solomon::Groups;
use super::{global, partner, reed_solomon, xor, Protection, Scheme, SchemeError};
use crate::config::{Config, L3Scheme};
use crate::level::erasure::{CodecError, ErasureCode};
use crate::level::Level;
use crate::topology::{Layout, Rule, Topology};

/// Every scheme, by the name its rules record.
const SCHEMES: &[Scheme] = &[
    partner::SCHEME,
    reed_solomon::SCHEME,
    xor::SCHEME,
    global::SCHEME,
];

/// The scheme named `name`.
fn named(name: &str) -> Result<&'static Scheme, SchemeError> {
    (SCHEMES.iter())
        .find(|s| s.name == name)
        .ok_or_else(|| SchemeError::Unknown(name.to_string()))
}

/// The protection of `topology` under `rule`, by the scheme the rule
/// names.
pub(crate) fn protection(
    topology: &Topology,
    rule: &Rule,
) -> Result<Box<dyn Protection>, SchemeError> {
    (named(&rule.scheme)?.protect)(topology, rule)
}

/// The erasure code named `name` (a group manifest's, a level-3 scheme's:
/// `"reed-solomon"`, `"xor"`), for stripes of `k` data and `p` parity
/// shards.
pub fn erasure_code(name: &str, k: usize, p: usize) -> Result<Box<dyn ErasureCode>, CodecError> {
    let parity = (named(name).ok())
        .and_then(|s| s.parity.as_ref())
        .ok_or_else(|| CodecError(format!("no erasure code is named {name:?}")))?;
    (parity.code)(k, p)
}

/// The groups of `topology` under `rule`, a rule of a scheme that keeps
/// parity.
pub(crate) fn parity_groups(topology: &Topology, rule: &Rule) -> Result<Groups, SchemeError> {
    let parity = (named(&rule.scheme)?.parity.as_ref())
        .ok_or_else(|| SchemeError::NoParity(rule.scheme.clone()))?;
    (parity.groups)(topology, rule)
}

/// The rule `level` protects new checkpoints with under `cfg` (`None` for
/// level 1, which keeps each node's own files only).
pub(crate) fn configured(cfg: &Config, level: Level) -> Option<Rule> {
    match level {
        Level::L1 => None,
        Level::L2 => Some(partner::rule(cfg.l2.copies)),
        Level::L3 => Some(match cfg.l3.scheme {
            L3Scheme::ReedSolomon => reed_solomon::rule(cfg.l3.group_size, cfg.l3.parity),
            L3Scheme::Xor => xor::rule(cfg.l3.group_size),
        }),
        Level::L4 => Some(global::rule()),
    }
}

/// The rule a commit of `level` was written under: the one its layout
/// records, or for markers that predate recorded rules, the rule each
/// level followed then (one partner; groups of the recorded settings;
/// the global directory). `None` when neither says.
pub(crate) fn recorded(layout: &Layout, level: Level) -> Option<Rule> {
    if let Some(rule) = &layout.rule {
        return Some(rule.clone());
    }
    match level {
        Level::L1 => None,
        Level::L2 => Some(partner::rule(1)),
        Level::L3 => Some(reed_solomon::rule(layout.group_size?, layout.parity?)),
        Level::L4 => Some(global::rule()),
    }
}
