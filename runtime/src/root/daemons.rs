//! Starting and stopping daemon processes, the run directory and the node
//! directories.
//!
//! The run directory holds the job's sockets. It is made (mode 0700) inside
//! a base directory that must be this user's (or root's, and sticky if
//! others may write to it), and it holds a lock file the launcher keeps
//! locked for the job's lifetime. Leftovers of launchers that died are
//! removed only when they are provably frame's: a directory of this user,
//! named `run-*`, whose lock file is there and no longer locked.

use super::{Launch, RunError};
use crate::handoff::NodeSpec;
use frame::env;
use frame::internals::auth::Secret;
use frame::internals::safefs::{self, Dir, Lock};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use tokio::process::{Child, Command};

/// The lock file inside a run directory.
const RUN_LOCK: &str = ".frame-run.lock";

/// The job's directory for sockets; removed when dropped.
pub(super) struct RunDir {
    pub path: PathBuf,
    _lock: Lock,
}

impl Drop for RunDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

fn startup(e: impl std::fmt::Display) -> RunError {
    RunError::Startup(e.to_string())
}

/// Creates the job's run directory, a new one inside `given` or in this
/// user's private directory `$TMPDIR/frame-<uid>/`, after removing
/// leftovers of launchers that died.
pub(super) fn run_dir(given: Option<&Path>) -> Result<RunDir, RunError> {
    let base = match given {
        Some(p) => {
            if !p.exists() {
                Dir::open_or_create(p).map_err(startup)?;
            }
            safefs::check_base(p).map_err(startup)?;
            p.to_path_buf()
        }
        None => {
            let p = std::env::temp_dir().join(format!("frame-{}", safefs::my_uid()));
            Dir::open_or_create(&p).map_err(startup)?;
            p
        }
    };
    remove_stale(&base);
    let path = tempfile::Builder::new()
        .prefix(&format!("run-{}-", std::process::id()))
        .tempdir_in(&base)
        .map_err(|e| {
            startup(format!(
                "cannot make a run directory in {}: {e}",
                base.display()
            ))
        })?
        .keep();
    let dir = Dir::open(&path).map_err(startup)?;
    let lock = dir
        .lock(RUN_LOCK, "the run directory of a running job")
        .map_err(startup)?;
    Ok(RunDir { path, _lock: lock })
}

/// Removes run directories in `base` whose launcher is gone.
fn remove_stale(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        if !name.to_string_lossy().starts_with("run-") {
            continue;
        }
        let path = e.path();
        let ours = std::fs::symlink_metadata(&path)
            .is_ok_and(|m| m.is_dir() && m.uid() == safefs::my_uid());
        if !ours {
            continue;
        }
        let Ok(dir) = Dir::open(&path) else {
            continue;
        };
        if dir.kind(RUN_LOCK) != Some(safefs::Kind::File) {
            continue;
        }
        // Taking the lock proves that no launcher holds it any more.
        if let Ok(lock) = dir.lock(RUN_LOCK, "a run directory") {
            drop(lock);
            let _ = std::fs::remove_dir_all(&path);
        }
    }
}

/// The node-local directory of node `node`.
pub(super) fn node_dir(launch: &Launch, node: u32) -> PathBuf {
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

/// Starts the daemon of `spec.node`, leading its own process group and set
/// to die with the root.
pub(super) fn start(
    launch: &Launch,
    spec: &NodeSpec,
    root: std::net::SocketAddr,
    secret: &Secret,
) -> io::Result<Child> {
    let exe = match &launch.daemon_exe {
        Some(e) => e.clone(),
        None => std::env::current_exe()?,
    };
    let mut cmd = Command::new(exe);
    for var in env::RUNTIME {
        cmd.env_remove(var);
    }
    if let Some(config) = &launch.config {
        cmd.env(env::CONFIG, config);
    }
    cmd.env(env::ROLE, "daemon")
        .env(env::ROOT, root.to_string())
        .env(env::SPEC, spec.to_env())
        .env(env::SECRET, secret.to_hex())
        .stdin(std::process::Stdio::null())
        .process_group(0)
        .kill_on_drop(true);
    // SAFETY: only an async-signal-safe prctl between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
                .map_err(io::Error::from)
        });
    }
    cmd.spawn()
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
