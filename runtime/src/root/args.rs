//! Command-line options of a launch, shared by `frame run` and programs that
//! launch themselves.

use super::hosts::{self, Host};
use super::{Launch, Launcher, RecoveryMode, RunError};
use crate::handoff::Transport;
use crate::inject::Injection;
use bytesize::ByteSize;
use frame::comm::net::Limits;
use frame::config::Config;
use frame::env;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

/// Options of a launch, as `clap` arguments.
#[derive(Clone, Debug, clap::Args)]
pub struct LaunchArgs {
    /// Nodes that run ranks (at most 4096 nodes in all, spares included;
    /// default 2 virtual nodes, or every host but the spares).
    #[arg(long)]
    pub nodes: Option<usize>,
    /// Ranks per node (1 to 1024; at most 65536 ranks in all; default 2 on
    /// virtual nodes, the hosts' slots, or 1).
    #[arg(long)]
    pub ranks_per_node: Option<usize>,
    /// Spare nodes, started without ranks, that take the ranks of failed
    /// nodes (with hosts: the last ones listed).
    #[arg(long, default_value_t = 0)]
    pub spare_nodes: usize,
    /// Run on these hosts, one node each: `a:4,b:4,c` (`:N` gives a
    /// host's slots). Starts daemons with --launcher (default ssh).
    #[arg(long, value_name = "HOSTS", conflicts_with = "hostfile")]
    pub hosts: Option<String>,
    /// Run on the hosts of this file, one per line as mpirun reads them
    /// (`node17 slots=4`; `#` comments).
    #[arg(long, value_name = "FILE")]
    pub hostfile: Option<PathBuf>,
    /// What starts the node daemons: local (virtual nodes on this
    /// machine), ssh (each host by ssh in batch mode), slurm (srun inside
    /// the allocation, whose nodes are the hosts when none are given).
    #[arg(long, value_enum)]
    pub launcher: Option<Launcher>,
    /// The launcher's program and options, split like a shell would
    /// (default `ssh` or `srun`), e.g. "ssh -F ~/.ssh/cluster".
    #[arg(long, value_name = "COMMAND")]
    pub launcher_command: Option<String>,
    /// frame configuration file: its storage.local_dir holds the node
    /// directories, and the ranks load it (FRAME_CONFIG).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Fault to inject (repeatable): rank:R@2s, node:N@500ms, node:1,2@3s,
    /// rank:R@iter=I, node:N@iter=I, rank:R@reinit=K.
    #[arg(long = "inject", value_name = "SPEC")]
    pub inject: Vec<Injection>,
    /// online (or global): survivors roll back in place and only failed
    /// ranks restart; logged: only a failed rank's replacement goes back
    /// to its checkpoint, fed the others' message logs, and what it cannot
    /// handle falls back to online; cone: every rank re-enters, only the
    /// failed ranks restore, and the program recovers in the failure's
    /// dependency cone, the other ranks keeping their live data;
    /// redeploy: kill and relaunch the whole job, as a job script would.
    /// Default: the configuration's recovery.mode.
    #[arg(long, value_enum)]
    pub recovery: Option<RecoveryMode>,
    /// In logged mode, the bytes of messages each rank keeps per checkpoint
    /// interval (4 KiB to 1 TiB; default: the configuration's
    /// recovery.log_limit).
    #[arg(long, value_name = "SIZE")]
    pub log_limit: Option<ByteSize>,
    /// In logged mode, the processes that recompute a failed rank's lost
    /// interval together: its replacement and K - 1 helpers, among which
    /// the program splits the work (1 to 64; default: the configuration's
    /// recovery.spares).
    #[arg(long, value_name = "K")]
    pub spares: Option<u32>,
    /// In logged mode, the cpufreq governor (powersave, say) a node whose
    /// ranks all wait for another's recovery sets on its CPUs meanwhile,
    /// where the node is a host of its own and the machine lets it
    /// (default: the configuration's recovery.idle_governor; none).
    #[arg(long, value_name = "NAME")]
    pub idle_governor: Option<String>,
    /// Restart from this checkpoint (`frame ls DIR` lists them), an older
    /// one included, until the job commits a newer one; newer ones stay
    /// on disk and new ones are numbered past them (default: the
    /// configuration's recovery.restart_from; the newest).
    #[arg(long, value_name = "ID", value_parser = clap::value_parser!(u64).range(1..))]
    pub restart_from: Option<u64>,
    /// How ranks reach each other (default unix on virtual nodes, tcp
    /// across hosts).
    #[arg(long, value_enum)]
    pub transport: Option<Transport>,
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
    /// A node silent for this long is declared dead (at least; a node
    /// whose heartbeats arrive slowly, on a loaded machine, gets up to
    /// three times as long). Its daemon's lease is three quarters of it: a
    /// daemon that cannot reach the root stops its ranks by itself before
    /// the root may replace them. 1 s to 1 h.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    pub heartbeat_timeout: Duration,
    /// How long the daemons have to start and join (a slow ssh or
    /// Slurm start is not a failure); a node not joined by then is named
    /// in the start-up error. 1 s to 24 h.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    pub start_timeout: Duration,
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
    pub fn launch(&self, program: PathBuf, args: Vec<OsString>) -> Result<Launch, RunError> {
        let invalid = RunError::Invalid;
        let cfg = Config::load(self.config.as_deref()).map_err(|e| invalid(e.to_string()))?;
        let (hosts, launcher) = self.hosts().map_err(invalid)?;
        let (nodes, ranks_per_node) = if hosts.is_empty() {
            (self.nodes.unwrap_or(2), self.ranks_per_node.unwrap_or(2))
        } else {
            let nodes = hosts.len().checked_sub(self.spare_nodes).filter(|n| *n > 0);
            let Some(nodes) = nodes else {
                return Err(invalid(format!(
                    "--spare-nodes {}: only {} host(s), and at least one must run ranks",
                    self.spare_nodes,
                    hosts.len()
                )));
            };
            if self.nodes.is_some_and(|n| n != nodes) {
                return Err(invalid(format!(
                    "--nodes {}: {} host(s) with {} spare(s) make {nodes} node(s)",
                    self.nodes.unwrap_or(0),
                    hosts.len(),
                    self.spare_nodes
                )));
            }
            let per = hosts::ranks_per_node(&hosts, self.ranks_per_node).map_err(invalid)?;
            (nodes, per)
        };
        let within = |flag: &str, d: Duration, lo: u64, hi: u64| {
            if d < Duration::from_secs(lo) || d > Duration::from_secs(hi) {
                return Err(invalid(format!(
                    "--{flag} {}: must be from {} to {}",
                    humantime::format_duration(d),
                    humantime::format_duration(Duration::from_secs(lo)),
                    humantime::format_duration(Duration::from_secs(hi))
                )));
            }
            Ok(())
        };
        within("heartbeat-timeout", self.heartbeat_timeout, 1, 3600)?;
        within("start-timeout", self.start_timeout, 1, 24 * 3600)?;
        let mut l = Launch::new(nodes, ranks_per_node, program);
        l.args = args;
        l.spare_nodes = self.spare_nodes;
        l.injections = self.inject.clone();
        l.recovery = self.recovery.unwrap_or(match cfg.recovery.mode {
            frame::config::RecoveryMode::Global => RecoveryMode::Online,
            frame::config::RecoveryMode::Logged => RecoveryMode::Logged,
            frame::config::RecoveryMode::Cone => RecoveryMode::Cone,
        });
        l.log_limit = match self.log_limit {
            Some(limit) => {
                let mut checked = cfg.clone();
                checked.recovery.log_limit = limit;
                checked
                    .validate()
                    .map_err(|e| invalid(format!("--log-limit {limit}: {e}")))?;
                limit.as_u64()
            }
            None => cfg.recovery.log_limit.as_u64(),
        };
        let (spares, named) = match self.spares {
            Some(k) => {
                let mut checked = cfg.clone();
                checked.recovery.spares = k;
                checked
                    .validate()
                    .map_err(|e| invalid(format!("--spares {k}: {e}")))?;
                (k, format!("--spares {k}"))
            }
            None => (cfg.recovery.spares, cfg.describe("recovery.spares")),
        };
        if spares > 1 && l.recovery != RecoveryMode::Logged {
            return Err(invalid(format!(
                "{named}: helpers share only a logged recovery (--recovery logged, or recovery.mode = \"logged\")"
            )));
        }
        l.spares = spares;
        l.idle_governor = match &self.idle_governor {
            Some(name) => {
                let mut checked = cfg.clone();
                checked.recovery.idle_governor = name.clone();
                checked
                    .validate()
                    .map_err(|e| invalid(format!("--idle-governor {name:?}: {e}")))?;
                name.clone()
            }
            None => cfg.recovery.idle_governor.clone(),
        };
        l.restart_from = self.restart_from.unwrap_or(0);
        l.transport = self.transport.unwrap_or(if hosts.is_empty() {
            Transport::Unix
        } else {
            Transport::Tcp
        });
        l.hosts = hosts.into_iter().map(|h| h.name).collect();
        l.launcher = launcher;
        if let Some(c) = &self.launcher_command {
            l.launcher_command = shlex::split(c)
                .filter(|w| !w.is_empty())
                .ok_or_else(|| invalid(format!("--launcher-command `{c}`: cannot split it")))?;
        }
        l.bind = self.bind;
        l.local_dir = cfg.storage.local_dir;
        l.run_dir = self.run_dir.clone();
        l.metrics = self.metrics.clone();
        l.heartbeat_timeout = self.heartbeat_timeout;
        l.start_timeout = self.start_timeout;
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

    /// The hosts and the launcher: from `--hosts` or `--hostfile` (started
    /// by ssh unless told otherwise), from Slurm's allocation under
    /// `--launcher slurm` or inside one with no hosts given, else none
    /// (virtual nodes, started here).
    fn hosts(&self) -> Result<(Vec<Host>, Launcher), String> {
        let given = match (&self.hosts, &self.hostfile) {
            (Some(list), _) => Some(hosts::parse_list(list)?),
            (None, Some(file)) => Some(hosts::read_file(file)?),
            (None, None) => None,
        };
        let slurm = env::var(env::SLURM_NODELIST);
        match (given, self.launcher) {
            (Some(h), None) => Ok((h, Launcher::Ssh)),
            (Some(h), Some(Launcher::Local)) => Err(format!(
                "--launcher local runs virtual nodes on this machine; {} host(s) were given (use ssh or slurm)",
                h.len()
            )),
            (Some(h), Some(l)) => Ok((h, l)),
            (None, Some(Launcher::Local)) => Ok((Vec::new(), Launcher::Local)),
            (None, Some(Launcher::Ssh)) => {
                Err("--launcher ssh needs --hosts or --hostfile".into())
            }
            (None, launcher) => match slurm {
                Some(list) => {
                    let tasks = env::var(env::SLURM_TASKS_PER_NODE);
                    Ok((hosts::from_slurm(&list, tasks.as_deref())?, Launcher::Slurm))
                }
                None if launcher == Some(Launcher::Slurm) => Err(format!(
                    "--launcher slurm runs inside a Slurm allocation ({} is not set)",
                    env::SLURM_NODELIST
                )),
                None => Ok((Vec::new(), Launcher::Local)),
            },
        }
    }
}
