//! Starting and stopping daemon processes on this machine, the job's run
//! directory (see [`crate::rundir`]) and the node directories.

use super::{Launch, RunError};
use crate::handoff::NodeSpec;
pub(super) use crate::rundir::RunDir;
use frame::env;
use frame::internals::auth::Secret;
use frame::internals::safefs::Dir;
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

/// The node-local directory of node `node` (on its own host, when the
/// job's nodes are hosts).
pub(super) fn node_dir(launch: &Launch, node: u32) -> PathBuf {
    if !launch.hosts.is_empty() {
        // Each host is a node: its own local directory is the node's.
        return launch.local_dir.clone();
    }
    frame::internals::node::dir_of(&launch.local_dir, node)
}

/// Checks (creating them if needed) the node-local base directory and the
/// directory of every node.
pub(super) fn check_node_dirs(launch: &Launch, nodes: usize) -> Result<(), RunError> {
    let base = Dir::open_or_create(&launch.local_dir).map_err(startup)?;
    for n in 0..nodes {
        base.sub(&frame::internals::node::dir_name(n as u32), true)
            .map_err(startup)?;
    }
    Ok(())
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
