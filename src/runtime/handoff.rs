//! The environment through which the runtime's processes learn their role.
//!
//! The root starts daemons and daemons start ranks; each passes what the next
//! needs in environment variables. `FRAME_RANK`, `FRAME_SIZE`, `FRAME_NODE`
//! and `FRAME_EPOCH` are meant to be read by programs too; `FRAME_RT_*`
//! variables are the runtime's own.

use super::inject::Injection;
use super::{RuntimeError, State};
use crate::auth::Secret;
use crate::comm::net::{Limits, Security};
use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Rank of this process.
pub const RANK: &str = "FRAME_RANK";
/// Number of ranks.
pub const SIZE: &str = "FRAME_SIZE";
/// Node of this process.
pub const NODE: &str = "FRAME_NODE";
/// Epoch in which this rank process was started.
pub const EPOCH: &str = "FRAME_EPOCH";
/// Role of this process: `daemon` or `rank` (unset: a launcher or a plain program).
pub(crate) const ROLE: &str = "FRAME_RT_ROLE";
/// `new`, `restarted` or `standby`.
pub(crate) const STATE: &str = "FRAME_RT_STATE";
/// The daemon's Unix socket (for ranks).
pub(crate) const DAEMON: &str = "FRAME_RT_DAEMON";
/// JSON [`NodeSpec`] (for daemons and ranks).
pub(crate) const SPEC: &str = "FRAME_RT_SPEC";
/// The root's address (for daemons).
pub(crate) const ROOT: &str = "FRAME_RT_ROOT";
/// The node-local directory; also handed to the checkpoint configuration.
pub const NODE_DIR: &str = "FRAME_NODE_DIR";
/// The configuration key the node-local directory overrides.
pub(crate) const LOCAL_DIR_KEY: &str = "FRAME_STORAGE_LOCAL_DIR";

/// Every variable the runtime sets (cleared before starting daemons, so an
/// outer job's settings never leak into an inner one).
pub(crate) const ALL: &[&str] = &[
    RANK,
    SIZE,
    NODE,
    EPOCH,
    ROLE,
    STATE,
    DAEMON,
    SPEC,
    ROOT,
    NODE_DIR,
    crate::manager::host::SOCKET,
    crate::auth::SECRET_ENV,
];

/// How ranks reach each other.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
pub enum Transport {
    /// Unix-domain sockets (all nodes on one machine).
    Unix,
    /// TCP on loopback (the transport that spans hosts).
    Tcp,
}

/// What a process plays in a job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Not started by a runtime: a launcher, or a program run on its own.
    Launcher,
    /// A node daemon.
    Daemon,
    /// A rank.
    Rank,
    /// A node's checkpoint manager, started by its daemon.
    Manager,
}

/// The role of the current process, from its environment.
pub fn role() -> Role {
    match std::env::var(ROLE).as_deref() {
        Ok("daemon") => Role::Daemon,
        Ok("rank") => Role::Rank,
        Ok("manager") => Role::Manager,
        _ => Role::Launcher,
    }
}

/// What every daemon of a job (and its ranks) needs to know.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct NodeSpec {
    /// Node id.
    pub node: u32,
    /// Ranks in the job.
    pub size: u32,
    /// Directory for sockets.
    pub run_dir: PathBuf,
    /// This node's local storage.
    pub node_dir: PathBuf,
    /// The program ranks run, and its arguments.
    pub program: OsString,
    pub args: Vec<OsString>,
    /// Rank-to-rank transport.
    pub transport: Transport,
    /// Injections ranks trigger themselves (iteration and recovery ones), by index.
    pub injections: Vec<(u32, Injection)>,
    /// Heartbeat period of daemons and ranks, milliseconds.
    pub heartbeat_ms: u64,
    /// A rank silent this long, or this late to join or to roll back, is
    /// killed and replaced (milliseconds).
    pub rank_timeout_ms: u64,
    /// The address TCP listeners bind.
    pub bind: std::net::IpAddr,
    /// Caps on rank-to-rank messages.
    pub max_message: u64,
    /// Bytes of messages that may wait per connection.
    pub max_queued: u64,
    /// Standby processes the daemon keeps ready to replace failed ranks.
    pub standby: usize,
    /// Process id of the launcher (the root).
    pub launcher_pid: u32,
}

fn var(name: &'static str) -> Result<String, RuntimeError> {
    std::env::var(name).map_err(|_| RuntimeError::Environment(format!("{name} is not set")))
}

fn parse<T: std::str::FromStr>(name: &'static str) -> Result<T, RuntimeError> {
    var(name)?
        .parse()
        .map_err(|_| RuntimeError::Environment(format!("{name} is not a valid value")))
}

impl NodeSpec {
    pub(crate) fn from_env() -> Result<Self, RuntimeError> {
        serde_json::from_str(&var(SPEC)?)
            .map_err(|e| RuntimeError::Environment(format!("{SPEC}: {e}")))
    }

    pub(crate) fn to_env(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// What a rank reads from its environment.
#[derive(Clone, Debug)]
pub(crate) struct RankEnv {
    /// `None` for a standby process, which learns its rank when assigned one.
    pub rank: Option<u32>,
    pub epoch: u64,
    pub state: State,
    pub daemon: PathBuf,
    pub spec: NodeSpec,
    pub security: std::sync::Arc<Security>,
}

impl RankEnv {
    pub(crate) fn from_env() -> Result<Self, RuntimeError> {
        let standby = var(STATE)? == "standby";
        let spec = NodeSpec::from_env()?;
        let state = match var(STATE)?.as_str() {
            "restarted" | "standby" => State::Restarted,
            _ => State::New,
        };
        Ok(Self {
            rank: if standby { None } else { Some(parse(RANK)?) },
            epoch: if standby { 0 } else { parse(EPOCH)? },
            state,
            daemon: PathBuf::from(var(DAEMON)?),
            security: spec_security(&spec)?,
            spec,
        })
    }
}

/// The secret and limits of the job, from the environment and the spec.
pub(crate) fn spec_security(spec: &NodeSpec) -> Result<std::sync::Arc<Security>, RuntimeError> {
    let secret = Secret::from_env().ok_or_else(|| {
        RuntimeError::Environment(format!(
            "{} is not set or not valid",
            crate::auth::SECRET_ENV
        ))
    })?;
    Ok(std::sync::Arc::new(Security {
        secret,
        limits: Limits {
            max_message: spec.max_message,
            max_queued: spec.max_queued,
        },
    }))
}

/// The root's address, for a daemon.
pub(crate) fn root_addr() -> Result<SocketAddr, RuntimeError> {
    parse(ROOT)
}
