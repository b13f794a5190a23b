//! What the runtime's processes hand each other when one starts the next:
//! the root starts daemons and daemons start ranks and managers, passing
//! what each needs in environment variables (named in [`frame::env`]). A
//! daemon on another host gets its [`Handoff`] on its standard input
//! instead, so that the job's secret is on no command line and in no
//! environment there.

use super::inject::Injection;
use super::{RuntimeError, State};
use frame::comm::net::{Limits, Security};
use frame::env::{self, DAEMON, EPOCH, RANK, ROLE, ROOT, SPEC, STATE};
use frame::internals::auth::Secret;
use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;

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
    match env::var(ROLE).as_deref() {
        Some("daemon") => Role::Daemon,
        Some("rank") => Role::Rank,
        Some("manager") => Role::Manager,
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
    /// The ranks each node runs (0: not said).
    #[serde(default)]
    pub ranks_per_node: u32,
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
    /// Heartbeat period of the daemon toward the root, milliseconds.
    pub heartbeat_ms: u64,
    /// Heartbeat period of ranks toward their daemon, and how often the
    /// daemon passes its lease on to them, milliseconds (0: `heartbeat_ms`).
    #[serde(default)]
    pub rank_heartbeat_ms: u64,
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
    /// In a logged recovery mode, the bytes of messages each rank logs per
    /// checkpoint interval; `None` when ranks keep no log.
    #[serde(default)]
    pub log_limit: Option<u64>,
    /// In a logged recovery mode, the cpufreq governor the node sets while
    /// all its ranks wait for another's recovery (empty: none).
    #[serde(default)]
    pub idle_governor: String,
    /// The recovery mode the ranks' configuration takes
    /// (`recovery.mode`: `global`, `logged` or `cone`), whatever their
    /// configuration file says; empty: the file's.
    #[serde(default)]
    pub recovery_mode: String,
    /// The checkpoint the ranks' configuration restarts from
    /// (`recovery.restart_from`), whatever their file says; 0: the file's.
    #[serde(default)]
    pub restart_from: u64,
    /// Process id of the launcher (the root).
    pub launcher_pid: u32,
    /// The host this node is, when the job's nodes are hosts (`None`:
    /// a virtual node of the root's machine).
    pub host: Option<String>,
    /// Variables the daemon sets for its ranks and manager (on another
    /// host: the launching user's `FRAME_*` settings, which no launcher
    /// carries over).
    pub env: Vec<(String, String)>,
    /// Names this start of the node's daemon; its hello repeats it.
    pub ticket: u64,
    /// The daemon's lease from its hello until the root first renews it,
    /// milliseconds (see `daemon::lease`).
    #[serde(default)]
    pub lease_ms: u64,
    /// When the run was launched (the root's clock, nanoseconds since the
    /// Unix epoch): with the epoch, what fences the job's shared storage.
    #[serde(default)]
    pub launched_ns: u64,
    /// How long a rank's peer on another host may leave its connection
    /// unanswered before the rank reports it lost, milliseconds (twice
    /// the heartbeat timeout; 0: the library's default).
    #[serde(default)]
    pub lost_after_ms: u64,
    /// The CPU group the root made for the ranks of a crowded machine
    /// (see `crowding::group`); `None`: the ranks stay in the daemon's.
    #[serde(default)]
    pub cpu_group: Option<PathBuf>,
}

impl NodeSpec {
    /// How often ranks say they are alive to their daemon, and the daemon
    /// passes its lease on to them.
    pub(crate) fn rank_heartbeat(&self) -> std::time::Duration {
        let ms = match self.rank_heartbeat_ms {
            0 => self.heartbeat_ms,
            ms => ms,
        };
        std::time::Duration::from_millis(ms.max(10))
    }

    /// How long a rank's handshake with its daemon, and the daemon's with
    /// the root, may take: as long as the first lease they serve (a live
    /// peer may be slow to answer on an overloaded machine), and never
    /// less than the library's handshake timeout.
    pub(crate) fn control_patience(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.lease_ms.max(1))
            .max(frame::internals::auth::HANDSHAKE_TIMEOUT)
    }
}

/// What a daemon on another host reads on its standard input.
#[derive(Serialize, Deserialize)]
pub(crate) struct Handoff {
    pub spec: NodeSpec,
    pub root: SocketAddr,
    /// The job's secret, hexadecimal.
    pub secret: String,
}

/// Longest handoff line a daemon reads.
const MAX_HANDOFF: u64 = 16 << 20;

impl Handoff {
    /// Reads the handoff line from standard input.
    pub(crate) fn read() -> Result<(NodeSpec, SocketAddr, Secret), RuntimeError> {
        use std::io::{BufRead, Read};
        let mut line = String::new();
        std::io::stdin()
            .lock()
            .take(MAX_HANDOFF)
            .read_line(&mut line)
            .map_err(|e| RuntimeError::Environment(format!("reading the handoff: {e}")))?;
        let h: Handoff = serde_json::from_str(&line).map_err(|e| {
            RuntimeError::Environment(format!("the handoff on standard input: {e}"))
        })?;
        let secret = Secret::from_hex(&h.secret)
            .ok_or_else(|| RuntimeError::Environment("the handoff's secret is not valid".into()))?;
        Ok((h.spec, h.root, secret))
    }

    /// Whether this daemon was told to read its handoff from standard input.
    pub(crate) fn on_stdin() -> bool {
        env::var(env::HANDOFF).as_deref() == Some("stdin")
    }
}

fn var(name: &'static str) -> Result<String, RuntimeError> {
    env::var(name).ok_or_else(|| RuntimeError::Environment(format!("{name} is not set")))
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
    /// The node's manager socket, when the daemon runs one.
    pub manager: Option<PathBuf>,
    /// Where managers of other hosts reach that manager.
    pub manager_peer: Option<SocketAddr>,
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
            manager: env::var_os(env::MANAGER).map(PathBuf::from),
            manager_peer: env::var(env::MANAGER_PEER).and_then(|a| a.parse().ok()),
            security: spec_security(&spec)?,
            spec,
        })
    }
}

/// The secret and limits of the job, from the environment and the spec.
pub(crate) fn spec_security(spec: &NodeSpec) -> Result<std::sync::Arc<Security>, RuntimeError> {
    let secret = job_secret().ok_or_else(|| {
        RuntimeError::Environment(format!("{} is not set or not valid", env::SECRET))
    })?;
    Ok(std::sync::Arc::new(Security {
        secret,
        limits: Limits {
            max_message: spec.max_message,
            max_queued: spec.max_queued,
        },
        lost_after: match spec.lost_after_ms {
            0 => frame::comm::net::LOST_AFTER,
            ms => std::time::Duration::from_millis(ms),
        },
    }))
}

/// The root's address, for a daemon.
pub(crate) fn root_addr() -> Result<SocketAddr, RuntimeError> {
    parse(ROOT)
}

/// The job's secret, as its daemon or root handed it on.
pub(crate) fn job_secret() -> Option<Secret> {
    env::var(env::SECRET).and_then(|v| Secret::from_hex(&v))
}
