//! Starting and stopping daemon processes, and the run directory.

use super::Launch;
use crate::runtime::env::{self, NodeSpec};
use std::io;
use std::path::{Path, PathBuf};
use tokio::process::{Child, Command};

/// The job's directory for sockets; removed when dropped.
pub(super) struct RunDir {
    pub path: PathBuf,
}

impl Drop for RunDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

fn pid_alive(pid: i32) -> bool {
    Path::new("/proc").join(pid.to_string()).exists()
}

/// Creates the job's run directory, a new one inside `given` or under
/// `$TMPDIR/frame-<uid>/`, after removing leftovers of launchers that died.
pub(super) fn run_dir(given: Option<&Path>) -> io::Result<RunDir> {
    let private = |p: &Path| {
        std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
            .create(p)
    };
    let base = match given {
        Some(p) => p.to_path_buf(),
        None => std::env::temp_dir().join(format!("frame-{}", rustix::process::getuid().as_raw())),
    };
    private(&base)?;
    if let Ok(entries) = std::fs::read_dir(&base) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let stale = name
                .strip_prefix("run-")
                .and_then(|r| r.split('-').next())
                .and_then(|p| p.parse::<i32>().ok())
                .is_some_and(|pid| !pid_alive(pid));
            if stale {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
    let path = tempfile::Builder::new()
        .prefix(&format!("run-{}-", std::process::id()))
        .tempdir_in(&base)?
        .keep();
    Ok(RunDir { path })
}

/// The node-local directory of node `node`.
pub(super) fn node_dir(launch: &Launch, node: u32) -> PathBuf {
    launch.local_dir.join(format!("node-{node}"))
}

/// Starts the daemon of `spec.node`, leading its own process group and set
/// to die with the root.
pub(super) fn start(
    launch: &Launch,
    spec: &NodeSpec,
    root: std::net::SocketAddr,
) -> io::Result<Child> {
    let exe = match &launch.daemon_exe {
        Some(e) => e.clone(),
        None => std::env::current_exe()?,
    };
    let mut cmd = Command::new(exe);
    for var in env::ALL {
        cmd.env_remove(var);
    }
    cmd.env(env::ROLE, "daemon")
        .env(env::ROOT, root.to_string())
        .env(env::SPEC, spec.to_env())
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
    if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}
