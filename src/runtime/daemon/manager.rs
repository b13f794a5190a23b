//! The node's checkpoint manager, as a child process of the daemon: started
//! with the node, restarted if it dies (promotions in flight are then lost
//! and reported failed to the ranks; the levels keep their previous
//! checkpoints), and killed with the node. The daemon only starts and
//! watches it; what it does is the [`manager`](crate::manager) module's.

use super::Event;
use crate::runtime::env::{self, NodeSpec};
use std::path::{Path, PathBuf};
use tokio::sync::mpsc::UnboundedSender;

/// Restarts allowed over a job (a manager that cannot start is not retried forever).
pub(super) const MAX_RESTARTS: u32 = 100;

/// Test hook: the crash point at which the first manager process kills
/// itself (`<who>:<n>`, as `FRAME_CRASH_AT`; acted on only by builds with
/// the `fault-injection` feature).
pub(crate) const CRASH_AT: &str = "FRAME_TEST_MANAGER_CRASH_AT";

/// The socket of the node's manager.
pub(super) fn socket(spec: &NodeSpec) -> PathBuf {
    spec.run_dir.join(format!("manager-{}.sock", spec.node))
}

/// Starts the manager process; its exit comes back as [`Event::ManagerExit`].
pub(super) fn start(
    spec: &NodeSpec,
    socket: &Path,
    first: bool,
    events: &UnboundedSender<Event>,
) -> std::io::Result<u32> {
    let exe = std::env::current_exe()?;
    let mut cmd = tokio::process::Command::new(exe);
    cmd.env(env::ROLE, "manager")
        .env(env::NODE, spec.node.to_string())
        .env(env::NODE_DIR, &spec.node_dir)
        .env(crate::manager::host::SOCKET, socket)
        .env_remove(env::ROOT)
        .env_remove("FRAME_CRASH_AT")
        .stdin(std::process::Stdio::null());
    if let (true, Some(at)) = (first, std::env::var_os(CRASH_AT)) {
        cmd.env("FRAME_CRASH_AT", at);
    }
    // SAFETY: only an async-signal-safe prctl between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
                .map_err(std::io::Error::from)
        });
    }
    let mut child = cmd.spawn()?;
    let pid = child.id().unwrap_or(0);
    let ev = events.clone();
    tokio::spawn(async move {
        let status = child.wait().await;
        let _ = ev.send(Event::ManagerExit { pid, status });
    });
    Ok(pid)
}
