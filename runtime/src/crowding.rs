//! How the job's processes share a machine that runs more ranks than it
//! has cores (virtual nodes, or a host given more ranks than cores).
//!
//! On such a machine every rank is runnable most of the time, and a
//! process that wakes waits for the ranks ahead of it. Two rules keep the
//! runtime's own work prompt there:
//! - the daemon starts ranks, standbys and its manager at a lower
//!   priority, [`CROWDED_NICE`], so the root and the daemons get a
//!   core as soon as they wake: a failure's detection and the root's
//!   decision do not wait behind a thousand ranks;
//! - a rank's receive does not poll before it sleeps (see
//!   `Hub::poll_before_sleeping`): polling only takes the time the sender
//!   needs.
//!
//! A machine with a core per rank is left as it is.

use crate::handoff::NodeSpec;

/// The nice value ranks start with on a crowded machine (a process that
/// already runs at a lower priority keeps its own).
pub(crate) const CROWDED_NICE: i32 = 10;

/// The cores of this machine.
fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Whether more ranks than this machine has cores run on it: every rank
/// of the job when its nodes are virtual (they share the launcher's
/// machine), else the ranks a node runs. Every process of a node decides
/// alike, whenever it starts.
pub(crate) fn crowded(spec: &NodeSpec) -> bool {
    let here = match spec.host {
        None => spec.size,
        Some(_) => spec.ranks_per_node,
    };
    here as usize > cores()
}

/// Lowers the calling process to [`CROWDED_NICE`] unless it runs lower
/// already. Best effort (a system that refuses leaves the priority as it
/// is); only system calls: safe between `fork` and `exec`.
pub(crate) fn lower_priority() {
    if let Ok(now) = rustix::process::getpriority_process(None) {
        if now < CROWDED_NICE {
            let _ = rustix::process::setpriority_process(None, CROWDED_NICE);
        }
    }
}
