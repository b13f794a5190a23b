//! Fault injection: which failure to cause, and when.
//!
//! Specs, as given to `frame run --inject`:
//!
//! | spec | effect |
//! |---|---|
//! | `rank:3@2s` | SIGKILL rank 3, 2 s after the job started |
//! | `node:1@500ms` | SIGKILL node 1's whole process group and remove its local directory |
//! | `node:1,2@3s` | both nodes in one event |
//! | `rank:3@iter=50` | rank 3 kills itself when it calls `fault_point(50)` |
//! | `node:1@iter=50` | the first rank on node 1 to call `fault_point(50)` kills its node |
//! | `rank:2@reinit=1` | rank 2 dies during the 1st recovery, before the world barrier |
//! | `node:3@reinit=1` | node 3 dies during the 1st recovery (its first rank takes it down) |
//! | `rank:3@2s:stop` | SIGSTOP instead of SIGKILL: rank 3 hangs (any spec can end in `:stop`) |
//!
//! Time-based injections wait until no recovery is in progress, so a second
//! one lands after the previous recovery completed. Every injection fires at
//! most once, even though ranks roll back past the iteration it names.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// What an injection kills.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Target {
    /// These ranks (SIGKILL to each process).
    Ranks(Vec<u32>),
    /// These nodes (SIGKILL to each node's process group; local storage removed).
    Nodes(Vec<u32>),
}

/// When an injection fires.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Trigger {
    /// This long after the job started (delayed while a recovery runs).
    After(Duration),
    /// When a targeted rank calls `fault_point` with this iteration.
    Iteration(u64),
    /// During the n-th recovery (1-based), before the world barrier.
    Reinit(u64),
}

/// What an injection does to its target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Action {
    /// SIGKILL: the processes die.
    Kill,
    /// SIGSTOP: the processes hang (until the runtime notices and kills them).
    Stop,
}

impl Action {
    /// The signal that carries out the action.
    pub fn signal(self) -> rustix::process::Signal {
        match self {
            Action::Kill => rustix::process::Signal::KILL,
            Action::Stop => rustix::process::Signal::STOP,
        }
    }
}

/// One fault to inject.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Injection {
    /// What is hit.
    pub target: Target,
    /// When.
    pub trigger: Trigger,
    /// Killed or stopped.
    pub action: Action,
}

impl FromStr for Injection {
    type Err = String;

    fn from_str(spec: &str) -> Result<Self, String> {
        let bad = |why: &str| {
            format!("bad injection `{spec}`: {why} (expected e.g. rank:3@2s, node:1@iter=50)")
        };
        let (what, when) = spec.split_once('@').ok_or_else(|| bad("missing `@`"))?;
        let (when, action) = match when.strip_suffix(":stop") {
            Some(w) => (w, Action::Stop),
            None => (when, Action::Kill),
        };
        let (kind, list) = what
            .split_once(':')
            .ok_or_else(|| bad("missing `rank:` or `node:`"))?;
        let ids = list
            .split(',')
            .map(|x| x.trim().parse::<u32>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| bad("ids must be numbers"))?;
        if ids.is_empty() {
            return Err(bad("no ids"));
        }
        let target = match kind.trim() {
            "rank" => Target::Ranks(ids),
            "node" => Target::Nodes(ids),
            _ => return Err(bad("the target must be `rank` or `node`")),
        };
        let when = when.trim();
        let trigger = if let Some(i) = when.strip_prefix("iter=") {
            Trigger::Iteration(i.parse().map_err(|_| bad("iteration must be a number"))?)
        } else if let Some(n) = when.strip_prefix("reinit=") {
            let n: u64 = n
                .parse()
                .map_err(|_| bad("recovery number must be a number"))?;
            if n == 0 {
                return Err(bad("recoveries are numbered from 1"));
            }
            Trigger::Reinit(n)
        } else {
            Trigger::After(humantime::parse_duration(when).map_err(|e| bad(&e.to_string()))?)
        };
        Ok(Injection {
            target,
            trigger,
            action,
        })
    }
}

impl fmt::Display for Injection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (kind, ids) = match &self.target {
            Target::Ranks(r) => ("rank", r),
            Target::Nodes(n) => ("node", n),
        };
        let ids: Vec<String> = ids.iter().map(u32::to_string).collect();
        write!(f, "{kind}:{}@", ids.join(","))?;
        match &self.trigger {
            Trigger::After(d) => write!(f, "{}", humantime::format_duration(*d))?,
            Trigger::Iteration(i) => write!(f, "iter={i}")?,
            Trigger::Reinit(n) => write!(f, "reinit={n}")?,
        }
        if self.action == Action::Stop {
            f.write_str(":stop")?;
        }
        Ok(())
    }
}

impl Injection {
    /// Whether rank `rank` on node `node` should fire this at iteration `iter`.
    pub fn fires_at(&self, rank: u32, node: u32, iter: u64) -> bool {
        self.trigger == Trigger::Iteration(iter) && self.targets(rank, node)
    }

    /// Whether this injection concerns rank `rank` on node `node`.
    pub fn targets(&self, rank: u32, node: u32) -> bool {
        match &self.target {
            Target::Ranks(r) => r.contains(&rank),
            Target::Nodes(n) => n.contains(&node),
        }
    }
}

#[cfg(test)]
mod tests;
