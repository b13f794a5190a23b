//! How the job's processes share a machine that runs more ranks than it
//! has cores (virtual nodes, or a host given more ranks than cores).
//!
//! On such a machine every rank is runnable most of the time, and a
//! process that wakes waits for the ranks ahead of it. These rules keep
//! the runtime's own work prompt there:
//! - where this machine lets the root make one, the ranks and managers
//!   run in a CPU group of their own ([`group`]), which the kernel
//!   weighs as one against the root and the daemons outside it: a
//!   failure's detection and the root's decision do not wait behind a
//!   thousand ranks;
//! - the daemon starts ranks and its manager at a lower priority,
//!   [`CROWDED_NICE`], so that in any group the runtime's processes get a
//!   core as soon as they wake;
//! - a standby waits outside the ranks' group at the daemon's priority,
//!   as batch work ([`wait_as_standby`]): once it takes a rank it starts
//!   as promptly as the daemon that woke it, without taking the core from
//!   that daemon; the release after it took a rank makes it a rank like
//!   the others ([`demote`]);
//! - a rank's receive does not poll before it sleeps (see
//!   `Hub::poll_before_sleeping`): polling only takes the time the sender
//!   needs.
//!
//! A machine with a core per rank is left as it is.

pub(crate) mod group;

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
    crowds(here as usize)
}

/// Whether `ranks` ranks crowd this machine.
pub(crate) fn crowds(ranks: usize) -> bool {
    ranks > cores()
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

/// Makes the calling process (a standby) batch work: when it wakes it
/// waits for the running process's turn to end instead of preempting it,
/// and then runs at its own priority. Best effort; one system call: safe
/// between `fork` and `exec`.
pub(crate) fn wait_as_standby() {
    set_policy(0, libc::SCHED_BATCH);
}

/// Moves process `pid` into the ranks' group, if there is one, and makes
/// every thread of it ordinary work at [`CROWDED_NICE`] (one its program
/// raised too): a standby that took a rank becomes a rank like the others
/// once it is released. Best effort.
pub(crate) fn demote(pid: u32, group: Option<&group::GroupEntry>) {
    if let Some(g) = group {
        if let Err(e) = g.move_in(pid) {
            tracing::debug!(pid, "cannot move a rank into the ranks' CPU group: {e}");
        }
    }
    // Each thread has its own policy and priority.
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return;
    };
    for task in tasks.flatten() {
        let tid = (task.file_name().to_str())
            .and_then(|t| t.parse::<i32>().ok())
            .and_then(rustix::process::Pid::from_raw);
        if let Some(tid) = tid {
            set_policy(tid.as_raw_nonzero().get(), libc::SCHED_OTHER);
            if rustix::process::getpriority_process(Some(tid)).is_ok_and(|n| n < CROWDED_NICE) {
                let _ = rustix::process::setpriority_process(Some(tid), CROWDED_NICE);
            }
        }
    }
}

/// Sets thread `tid`'s (0: the caller's) scheduling policy, one of the
/// ordinary ones (no real-time priority); the nice value stays. A refusal
/// is ignored.
fn set_policy(tid: i32, policy: libc::c_int) {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid `sched_param` for the call's duration;
    // the call only reads it.
    unsafe { libc::sched_setscheduler(tid, policy, &param) };
}
