//! Inline managers: a node's manager run as threads of its lowest rank, for
//! programs that run without frame's runtime.
//!
//! They belong to the process, not to a checkpointer: a rank that rolls
//! back and makes a new checkpointer finds its manager still promoting.
//! One manager runs per (job, node, directory) in a process.

use super::{Manager, Options};
use crate::auth::Secret;
use crate::comm::net::{Bind, Endpoint};
use crate::config::WhenFull;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

type Key = (String, u32, PathBuf);
static RUNNING: Mutex<Vec<(Key, Arc<Manager>)>> = Mutex::new(Vec::new());

/// Where an inline manager listens.
#[derive(Clone, Debug)]
pub enum Listen {
    /// A Unix socket in the node's local directory (nodes on one machine).
    Local,
    /// TCP on this address (nodes on several machines).
    Tcp(std::net::IpAddr),
}

/// Returns the inline manager of `job_id` on `node` for `local_dir`,
/// starting it if needed (or restarting it if it holds another secret).
pub fn ensure(
    job_id: &str,
    node: u32,
    local_dir: &Path,
    listen: &Listen,
    secret: &Secret,
    queue: usize,
    when_full: WhenFull,
) -> std::io::Result<Arc<Manager>> {
    let key: Key = (job_id.to_string(), node, local_dir.to_path_buf());
    let mut running = RUNNING.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(i) = running.iter().position(|(k, _)| *k == key) {
        let reachable = match running[i].1.endpoint() {
            Endpoint::Unix(path) => path.exists(),
            Endpoint::Tcp(_) => true,
        };
        if running[i].1.has_secret(secret) && reachable {
            return Ok(Arc::clone(&running[i].1));
        }
        running.swap_remove(i);
    }
    let bind = match listen {
        Listen::Local => Bind::Unix(super::socket_in(local_dir, job_id, node)),
        Listen::Tcp(ip) => Bind::Tcp(*ip),
    };
    let manager = Arc::new(Manager::start(Options {
        node,
        local_dir: local_dir.to_path_buf(),
        queue,
        when_full,
        bind,
        secret: secret.clone(),
        peer_listener: None,
    })?);
    running.push((key, Arc::clone(&manager)));
    Ok(manager)
}

/// The endpoint of the running inline manager of `job_id` on `node`, if any.
pub fn endpoint(job_id: &str, node: u32, local_dir: &Path) -> Option<Endpoint> {
    let running = RUNNING.lock().unwrap_or_else(|p| p.into_inner());
    running
        .iter()
        .find(|((j, n, d), _)| j == job_id && *n == node && d == local_dir)
        .map(|(_, m)| m.endpoint().clone())
}

/// Stops the inline managers of `job_id` in this process (after their
/// current transformation), as a node failure would.
pub fn stop(job_id: &str) {
    let taken: Vec<_> = {
        let mut running = RUNNING.lock().unwrap_or_else(|p| p.into_inner());
        let (gone, kept) = std::mem::take(&mut *running)
            .into_iter()
            .partition(|((j, ..), _)| j == job_id);
        *running = kept;
        gone
    };
    drop(taken);
}

/// Stops every inline manager of this process (after their current
/// transformation).
pub fn stop_all() {
    let taken: Vec<_> = std::mem::take(&mut *RUNNING.lock().unwrap_or_else(|p| p.into_inner()));
    drop(taken);
}
