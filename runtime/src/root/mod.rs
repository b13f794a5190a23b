//! The root of a job: `frame run` and the embedded launcher.
//!
//! The root starts one daemon per node (spare nodes start with no ranks),
//! tells the daemons which ranks to launch, and then runs the job's control
//! loop: it releases world barriers, learns of failures (a daemon reports a
//! dead rank; a daemon's connection breaks or its heartbeats stop for a dead
//! node), handles them one at a time in arrival order, fires time-triggered
//! fault injections, writes one JSON line of metrics per recovery, and stops
//! everything when the job ends. Nothing it started outlives it: daemons
//! lead their own process groups, which the root kills on the way out, and
//! die with the root if it is killed.

mod args;
mod control;
mod daemons;
mod hosts;
mod remote;

pub use args::LaunchArgs;
pub use remote::Launcher;

use super::handoff::Transport;
use super::inject::Injection;
use frame::comm::net::Limits;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

/// How the job recovers from a failure.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum RecoveryMode {
    /// Reinit: survivors roll back in place, failed ranks are respawned
    /// (also written `global`).
    #[value(alias = "global")]
    Online,
    /// Localised: a failed rank's replacement alone goes back to its
    /// checkpoint, fed what it lost from the others' message logs, while
    /// they go on; what it cannot handle falls back to `online`.
    Logged,
    /// Data-flow rollback: every rank re-enters as in `online`, but only
    /// the failed ranks' replacements restore their live data; the
    /// program recovers in the failure's cone (`Checkpointer::recover_cone`)
    /// and what that cannot handle restarts globally.
    Cone,
    /// Baseline: every rank (and daemon) is killed and the job relaunched,
    /// as a job script would.
    Redeploy,
}

impl RecoveryMode {
    /// The mode as `frame run --recovery` and the metrics file name it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Online => "online",
            Self::Logged => "logged",
            Self::Cone => "cone",
            Self::Redeploy => "redeploy",
        }
    }
}

/// Most nodes of a job, spare nodes included.
pub(crate) const MAX_NODES: usize = 4096;
/// Most ranks on one node.
pub(crate) const MAX_RANKS_PER_NODE: usize = 1024;
/// Most ranks of a job.
pub(crate) const MAX_RANKS: usize = 65_536;
/// Most standby processes per node.
pub(crate) const MAX_STANDBY: usize = 64;
/// Most failures a job may recover from before it gives up.
pub(crate) const MAX_FAILURES: usize = 1_000_000;

/// A job to launch: nodes, ranks, program, injections.
#[derive(Clone, Debug)]
pub struct Launch {
    /// Nodes that run ranks.
    pub nodes: usize,
    /// Ranks per node (also the rank slots of every node, spares included).
    pub ranks_per_node: usize,
    /// Spare nodes, started empty.
    pub spare_nodes: usize,
    /// The program each rank runs, and its arguments.
    pub program: PathBuf,
    /// Arguments of `program`.
    pub args: Vec<OsString>,
    /// Faults to inject.
    pub injections: Vec<Injection>,
    /// Online (Reinit), logged or redeploy recovery.
    pub recovery: RecoveryMode,
    /// In logged mode, the bytes of messages each rank logs per checkpoint
    /// interval.
    pub log_limit: u64,
    /// In logged mode, the processes that recompute a failed rank's lost
    /// interval: its replacement and `spares - 1` helpers (see
    /// `recovery.spares`).
    pub spares: u32,
    /// In logged mode, the cpufreq governor an idle node sets (see
    /// `recovery.idle_governor`); empty: none.
    pub idle_governor: String,
    /// The checkpoint the ranks restart from (`recovery.restart_from`,
    /// whatever their configuration says), until the job commits a newer
    /// one; 0: their configuration's.
    pub restart_from: u64,
    /// How ranks reach each other.
    pub transport: Transport,
    /// Base of the node-local directories (`<local_dir>/node-<n>`).
    pub local_dir: PathBuf,
    /// Where the job's socket directory is made (default: the system's
    /// temporary directory); the socket directory is removed at exit.
    pub run_dir: Option<PathBuf>,
    /// Append one JSON line per recovery to this file.
    pub metrics: Option<PathBuf>,
    /// Heartbeat period of daemons and ranks.
    pub heartbeat: Duration,
    /// A node whose heartbeats stop for this long is declared dead (at
    /// least: see `control::liveness`).
    pub heartbeat_timeout: Duration,
    /// How long daemons have to join after they are started.
    pub start_timeout: Duration,
    /// A rank whose heartbeats stop for this long, that takes longer than
    /// this to join after its start, or to roll back after a recovery began,
    /// is killed and replaced.
    pub rank_timeout: Duration,
    /// The address the root's control port and the ranks' TCP listeners
    /// bind (loopback by default).
    pub bind: std::net::IpAddr,
    /// Caps on rank-to-rank messages.
    pub limits: Limits,
    /// A configuration file the ranks load (`FRAME_CONFIG` in their
    /// environment), so that `Config::load(None)` in the program reads it.
    pub config: Option<PathBuf>,
    /// Print a progress line this often (from the iterations ranks pass to
    /// `fault_point`); zero disables it.
    pub progress_every: Duration,
    /// The job stops after this many failures.
    pub max_failures: usize,
    /// Standby processes per node, started ahead of time so a failed rank is
    /// replaced without launching a process (spare nodes keep one per slot;
    /// 0 disables them; redeploy mode never uses them).
    pub standby: usize,
    /// The executable that serves as daemon (default: this executable; on
    /// other hosts, the same path).
    pub daemon_exe: Option<PathBuf>,
    /// The hosts, one per node (spares last), when the job's nodes are
    /// machines; empty for virtual nodes on this one.
    pub hosts: Vec<String>,
    /// What starts the daemons: `Local` for virtual nodes, `Ssh` or `Slurm`
    /// for hosts.
    pub launcher: Launcher,
    /// The launcher's program and first arguments (empty: `ssh` or `srun`).
    pub launcher_command: Vec<String>,
}

impl Launch {
    /// A job of `nodes` x `ranks_per_node` ranks of `program`, with defaults
    /// for everything else.
    pub fn new(nodes: usize, ranks_per_node: usize, program: impl Into<PathBuf>) -> Self {
        Self {
            nodes,
            ranks_per_node,
            spare_nodes: 0,
            program: program.into(),
            args: Vec::new(),
            injections: Vec::new(),
            recovery: RecoveryMode::Online,
            log_limit: frame::config::RecoveryConfig::default().log_limit.as_u64(),
            idle_governor: String::new(),
            restart_from: 0,
            spares: 1,
            transport: Transport::Unix,
            local_dir: frame::config::Config::default().storage.local_dir,
            run_dir: None,
            metrics: None,
            heartbeat: Duration::from_millis(200),
            heartbeat_timeout: Duration::from_secs(5),
            start_timeout: Duration::from_secs(30),
            rank_timeout: Duration::from_secs(10),
            bind: std::net::Ipv4Addr::LOCALHOST.into(),
            limits: Limits::default(),
            config: None,
            progress_every: Duration::from_secs(10),
            max_failures: 32,
            standby: 1,
            daemon_exe: None,
            hosts: Vec::new(),
            launcher: Launcher::Local,
            launcher_command: Vec::new(),
        }
    }

    /// The launcher's command, its default when none was given.
    fn launcher_command(&self) -> Vec<String> {
        if self.launcher_command.is_empty() {
            vec![self.launcher.default_command().to_string()]
        } else {
            self.launcher_command.clone()
        }
    }

    /// Checks that hosts, launcher and transport go together.
    fn check_hosts(&self) -> Result<(), RunError> {
        let invalid = |why: String| Err(RunError::Invalid(why));
        if self.hosts.is_empty() {
            if self.launcher != Launcher::Local {
                return invalid(format!(
                    "--launcher {} needs hosts: --hosts, --hostfile, or a Slurm allocation",
                    self.launcher.name()
                ));
            }
            return Ok(());
        }
        if self.launcher == Launcher::Local {
            return invalid(
                "hosts are started by --launcher ssh or --launcher slurm, not local".into(),
            );
        }
        let all = self.nodes + self.spare_nodes;
        if self.hosts.len() != all {
            return invalid(format!(
                "{} host(s) for {} node(s) and {} spare(s): one host per node",
                self.hosts.len(),
                self.nodes,
                self.spare_nodes
            ));
        }
        if self.transport != Transport::Tcp {
            return invalid(
                "ranks on different hosts reach each other over TCP: --transport tcp".into(),
            );
        }
        Ok(())
    }

    /// Checks the job's counts against [`MAX_NODES`], [`MAX_RANKS_PER_NODE`],
    /// [`MAX_RANKS`], [`MAX_STANDBY`] and [`MAX_FAILURES`]; the error names
    /// the `frame run` option.
    fn check_counts(&self) -> Result<(), RunError> {
        let bad = |flag: &str, value: usize, why: String| {
            Err(RunError::Invalid(format!("--{flag} {value}: {why}")))
        };
        if !(1..=MAX_NODES).contains(&self.nodes) {
            return bad(
                "nodes",
                self.nodes,
                format!("must be between 1 and {MAX_NODES}"),
            );
        }
        if self.spare_nodes > MAX_NODES - self.nodes {
            return bad(
                "spare-nodes",
                self.spare_nodes,
                format!("at most {MAX_NODES} nodes in all, spares included"),
            );
        }
        if !(1..=MAX_RANKS_PER_NODE).contains(&self.ranks_per_node) {
            return bad(
                "ranks-per-node",
                self.ranks_per_node,
                format!("must be between 1 and {MAX_RANKS_PER_NODE}"),
            );
        }
        if self.nodes * self.ranks_per_node > MAX_RANKS {
            return bad(
                "ranks-per-node",
                self.ranks_per_node,
                format!(
                    "{} nodes of {} ranks make more than the {MAX_RANKS} ranks a job may have",
                    self.nodes, self.ranks_per_node
                ),
            );
        }
        if self.standby > MAX_STANDBY {
            return bad(
                "standby",
                self.standby,
                format!("must be at most {MAX_STANDBY}"),
            );
        }
        if self.max_failures > MAX_FAILURES {
            return bad(
                "max-failures",
                self.max_failures,
                format!("must be at most {MAX_FAILURES}"),
            );
        }
        Ok(())
    }

    /// Runs the job to its end (blocking) and reports what happened.
    pub fn run(&self) -> Result<Outcome, RunError> {
        self.check_counts()?;
        self.check_hosts()?;
        let size = self.nodes * self.ranks_per_node;
        let all_nodes = self.nodes + self.spare_nodes;
        for inj in &self.injections {
            let bad = match &inj.target {
                super::inject::Target::Ranks(r) => r
                    .iter()
                    .find(|&&r| r as usize >= size)
                    .map(|r| format!("there is no rank {r} in this job (ranks 0..{size})")),
                super::inject::Target::Nodes(n) => n
                    .iter()
                    .find(|&&n| n as usize >= all_nodes)
                    .map(|n| format!("there is no node {n} in this job (nodes 0..{all_nodes}, spares included)")),
            };
            if let Some(why) = bad {
                return Err(RunError::Invalid(format!("injection `{inj}`: {why}")));
            }
        }
        if self.limits.max_message > self.limits.max_queued {
            return Err(RunError::Invalid(format!(
                "the largest message ({} bytes) must fit in the per-connection queue ({} bytes)",
                self.limits.max_message, self.limits.max_queued
            )));
        }
        let launch = self.crowded();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| RunError::Startup(e.to_string()))?;
        rt.block_on(control::drive(&launch))
    }

    /// This launch, with the heartbeat and rank timeouts raised for a
    /// machine its virtual nodes crowd (see
    /// `control::liveness::crowded_floor`), and a line saying each.
    fn crowded(&self) -> Launch {
        let mut launch = self.clone();
        if !self.hosts.is_empty() {
            return launch;
        }
        let per_node = self.ranks_per_node + self.standby + 2;
        let spare = self.ranks_per_node.max(self.standby) + 2;
        let processes = self.nodes * per_node + self.spare_nodes * spare;
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        launch.heartbeat_timeout = control::crowded_floor(self.heartbeat_timeout, processes, cores);
        // A rank there waits as long for its turn as a daemon does: to
        // join, to say it is alive, to roll back.
        launch.rank_timeout = control::crowded_floor(self.rank_timeout, processes, cores);
        for (what, was, now) in [
            (
                "heartbeat",
                self.heartbeat_timeout,
                launch.heartbeat_timeout,
            ),
            ("rank", self.rank_timeout, launch.rank_timeout),
        ] {
            if now > was {
                eprintln!(
                    "frame: {processes} processes of the job share {cores} core(s): {what} timeout raised to {} (from {})",
                    humantime::format_duration(now),
                    humantime::format_duration(was)
                );
            }
        }
        launch
    }
}

/// What happened in a job that ran to its end.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// One record per failure recovered from.
    pub recoveries: Vec<frame::metrics::RuntimeRecoveryRecord>,
}

/// Why a job did not complete.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// The launch options are unusable.
    #[error("invalid launch: {0}")]
    Invalid(String),
    /// The job could not be started.
    #[error("cannot start the job: {0}")]
    Startup(String),
    /// A node failed and no node has room for its ranks.
    #[error("node {node} failed and no spare node is left for its ranks {ranks:?}")]
    NoSpare {
        /// The failed node.
        node: u32,
        /// Its ranks.
        ranks: Vec<u32>,
    },
    /// The program does not join the runtime (it never calls
    /// `frame_runtime::run`), so no rank can ever start.
    #[error("the program {} ended without joining the runtime ({how}); frame run needs a program that runs its work through frame_runtime::run (or frame_run in C)", program.display())]
    NeverJoined {
        /// The program.
        program: PathBuf,
        /// How its process ended.
        how: String,
    },
    /// A rank stopped with an application error.
    #[error("rank {rank} stopped with an error: {reason}")]
    Aborted {
        /// The rank.
        rank: u32,
        /// Its error.
        reason: String,
    },
    /// More failures than `max_failures`.
    #[error("giving up after {0} failures")]
    TooManyFailures(usize),
    /// The launcher was asked to stop.
    #[error("stopped by {0}")]
    Signal(&'static str),
    /// An I/O error of the root.
    #[error("runtime I/O error: {0}")]
    Io(#[from] std::io::Error),
}
