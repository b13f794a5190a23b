//! Starting and stopping daemon processes on this machine, the job's run
//! directory (see [`crate::rundir`]) and the node directories.

use super::{Launch, RunError};
use crate::handoff::NodeSpec;
pub(super) use crate::rundir::RunDir;
use frame::env;
use frame::internals::auth::Secret;
use frame::internals::safefs::{self, Dir};
use std::io;
use std::path::{Path, PathBuf};
use tokio::process::{Child, Command};

/// Creates the job's run directory (see [`crate::rundir::make`]).
pub(super) fn run_dir(given: Option<&Path>) -> Result<RunDir, RunError> {
    crate::rundir::make(given).map_err(RunError::Startup)
}

fn startup(e: impl std::fmt::Display) -> RunError {
    RunError::Startup(e.to_string())
}

/// The node-local directory of every node, `total` of them: on hosts of
/// their own, each host's configured directory (the daemon makes it
/// private there); on this machine, `node-<n>` below the configured base
/// (this user's private directory in it when it is a shared RAM disk),
/// each checked and created here.
pub(super) fn node_dirs(launch: &Launch, total: usize) -> Result<Vec<PathBuf>, RunError> {
    if !launch.hosts.is_empty() {
        return Ok(vec![launch.local_dir.clone(); total]);
    }
    let key = |e: safefs::FsError| startup(format!("storage.local_dir: {e}"));
    let root = safefs::private_root(&launch.local_dir).map_err(key)?;
    let base = Dir::open_or_create(&root).map_err(key)?;
    (0..total as u32)
        .map(|n| {
            base.sub(&frame::internals::node::dir_name(n), true)
                .map_err(startup)?;
            Ok(frame::internals::node::dir_of(&root, n))
        })
        .collect()
}

/// The executable daemons run: the launch's, or this one.
pub(super) fn daemon_exe(launch: &Launch) -> io::Result<PathBuf> {
    match &launch.daemon_exe {
        Some(e) => Ok(e.clone()),
        None => std::env::current_exe(),
    }
}

/// Starts the daemon of `spec.node`, leading its own process group and set
/// to die with the root.
pub(super) fn start(
    launch: &Launch,
    spec: &NodeSpec,
    root: std::net::SocketAddr,
    secret: &Secret,
) -> io::Result<Child> {
    let mut cmd = Command::new(daemon_exe(launch)?);
    leading_its_group(&mut cmd);
    if let Some(config) = &launch.config {
        cmd.env(env::CONFIG, config);
    }
    cmd.env(env::ROLE, "daemon")
        .env(env::ROOT, root.to_string())
        .env(env::SPEC, spec.to_env())
        .env(env::SECRET, secret.to_hex())
        .stdin(std::process::Stdio::null());
    cmd.spawn()
}

/// Makes `cmd` (a daemon, or the launcher of one on another host) start
/// with none of the runtime's variables of an outer job, leading its own
/// process group, killed when dropped and when the root dies.
pub(super) fn leading_its_group(cmd: &mut Command) {
    for var in env::RUNTIME {
        cmd.env_remove(var);
    }
    cmd.process_group(0).kill_on_drop(true);
    // SAFETY: only an async-signal-safe prctl between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
                .map_err(io::Error::from)
        });
    }
}

/// SIGKILLs the process group led by `pid` (a daemon and its ranks).
pub(super) fn kill_group(pid: u32) {
    signal_group(pid, rustix::process::Signal::KILL);
}

/// Sends `sig` to the process group led by `pid`.
pub(super) fn signal_group(pid: u32, sig: rustix::process::Signal) {
    if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
        let _ = rustix::process::kill_process_group(pid, sig);
    }
}

/// Opens the metrics file for appending: created mode 0600, never through a
/// symbolic link.
pub(super) fn metrics_file(path: &Path) -> Result<std::fs::File, RunError> {
    frame::internals::safefs::open_append(path)
        .map_err(|e| RunError::Startup(format!("metrics file {}: {e}", path.display())))
}
