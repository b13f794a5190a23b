//! Command-line options of a launch, shared by `frame run` and programs that
//! launch themselves.

use super::{Launch, RecoveryMode};
use crate::handoff::Transport;
use crate::inject::Injection;
use bytesize::ByteSize;
use frame::comm::net::Limits;
use frame::config::{Config, ConfigError};
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

/// Options of a launch, as `clap` arguments.
#[derive(Clone, Debug, clap::Args)]
pub struct LaunchArgs {
    /// Nodes that run ranks (at most 4096 nodes in all, spares included).
    #[arg(long, default_value_t = 2)]
    pub nodes: usize,
    /// Ranks per node (1 to 1024; at most 65536 ranks in all).
    #[arg(long, default_value_t = 2)]
    pub ranks_per_node: usize,
    /// Spare nodes, started without ranks, that take the ranks of failed
    /// nodes.
    #[arg(long, default_value_t = 0)]
    pub spare_nodes: usize,
    /// frame configuration file: its storage.local_dir holds the node
    /// directories, and the ranks load it (FRAME_CONFIG).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Fault to inject (repeatable): rank:R@2s, node:N@500ms, node:1,2@3s,
    /// rank:R@iter=I, node:N@iter=I, rank:R@reinit=K.
    #[arg(long = "inject", value_name = "SPEC")]
    pub inject: Vec<Injection>,
    /// online: survivors roll back in place and only failed ranks restart;
    /// redeploy: kill and relaunch the whole job, as a job script would.
    #[arg(long, value_enum, default_value_t = RecoveryMode::Online)]
    pub recovery: RecoveryMode,
    /// How ranks reach each other.
    #[arg(long, value_enum, default_value_t = Transport::Unix)]
    pub transport: Transport,
    /// The address to bind the control port and the ranks' TCP listeners
    /// (the interface other hosts reach this one on).
    #[arg(long, default_value = "127.0.0.1", value_name = "IP")]
    pub bind: std::net::IpAddr,
    /// Append one JSON line of timings per recovery to this file.
    #[arg(long, value_name = "FILE")]
    pub metrics: Option<PathBuf>,
    /// Directory in which the job makes its socket directory (default: a
    /// private directory of this user in the system's temporary directory).
    #[arg(long, value_name = "DIR")]
    pub run_dir: Option<PathBuf>,
    /// A node silent for this long is declared dead.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    pub heartbeat_timeout: Duration,
    /// A rank silent for this long (stopped, wedged), or that takes longer
    /// than this to join after its start or to roll back after a failure,
    /// is killed and replaced.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub rank_timeout: Duration,
    /// Largest message between ranks (a peer cannot make a rank allocate
    /// more for one message).
    #[arg(long, default_value = "1 GiB", value_name = "SIZE")]
    pub max_message: ByteSize,
    /// Give up after this many failures (at most 1000000).
    #[arg(long, default_value_t = 32)]
    pub max_failures: usize,
    /// Standby processes per node, started ahead of time to replace failed
    /// ranks without a process launch (spare nodes keep one per slot; 0
    /// disables them; at most 64).
    #[arg(long, default_value_t = 1)]
    pub standby: usize,
    /// Print the job's progress (the slowest rank's iteration, as passed to
    /// fault_point) this often; 0 disables it.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub progress: Duration,
}

impl LaunchArgs {
    /// The launch of `program` with `args`, node directories under the
    /// configured `storage.local_dir`.
    pub fn launch(&self, program: PathBuf, args: Vec<OsString>) -> Result<Launch, ConfigError> {
        let cfg = Config::load(self.config.as_deref())?;
        let mut l = Launch::new(self.nodes, self.ranks_per_node, program);
        l.args = args;
        l.spare_nodes = self.spare_nodes;
        l.injections = self.inject.clone();
        l.recovery = self.recovery;
        l.transport = self.transport;
        l.bind = self.bind;
        l.local_dir = cfg.storage.local_dir;
        l.run_dir = self.run_dir.clone();
        l.metrics = self.metrics.clone();
        l.heartbeat_timeout = self.heartbeat_timeout;
        l.rank_timeout = self.rank_timeout;
        l.max_failures = self.max_failures;
        l.standby = self.standby;
        l.progress_every = self.progress;
        let max_message = self.max_message.as_u64();
        l.limits = Limits {
            max_message,
            max_queued: (2 * max_message).max(Limits::default().max_queued),
        };
        // Ranks read the same file, whatever their working directory.
        l.config = self
            .config
            .as_ref()
            .map(|p| std::path::absolute(p).unwrap_or_else(|_| p.clone()));
        Ok(l)
    }
}
