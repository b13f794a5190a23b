//! The global directory (level 4): every node writes its ranks' files to
//! a file system all nodes share, so no loss of nodes loses them.

use crate::scheme::{Params, Protection, Scheme, SchemeError};
use crate::topology::{Rule, Topology};
use std::collections::BTreeSet;

/// The scheme's name in recorded rules.
const NAME: &str = "global";

/// The global directory in the registry.
pub(crate) const SCHEME: Scheme = Scheme {
    name: NAME,
    protect,
    parity: None,
};

/// The rule of the global directory (it takes no parameters).
pub(crate) fn rule() -> Rule {
    Rule::new(NAME, [])
}

fn protect(_: &Topology, rule: &Rule) -> Result<Box<dyn Protection>, SchemeError> {
    Params::of(NAME, rule).done()?;
    Ok(Box::new(Global))
}

/// Checkpoints in the global directory: held by no node.
#[derive(Debug)]
struct Global;

impl Protection for Global {
    fn rule(&self) -> Rule {
        rule()
    }

    fn survives(&self, _: &BTreeSet<u32>) -> bool {
        true
    }
}
