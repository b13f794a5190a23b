//! The ranks' CPU group: a control group of the CPU controller that holds
//! a crowded machine's ranks and managers, beside the root and the
//! daemons.
//!
//! The kernel shares the CPU between a group and its siblings by weight
//! before it shares the group's part between its processes. With the
//! ranks in a group of their own (the default weight, like the
//! launcher's session), the root and the daemons, outside it, get half
//! the machine the moment they wake, however many ranks are runnable, and
//! the ranks together keep as much of the machine as whatever else the
//! user's session runs beside the job.
//!
//! Best effort: the group exists only where this process may create one
//! (a writable CPU hierarchy: cgroup v1, or v2 when the launcher sits in
//! the hierarchy's root with the CPU controller enabled for its
//! children). Elsewhere the ranks only run at a lower priority.
//!
//! A group is named after the process that made it (`frame-<pid>`); a
//! group whose maker is gone is removed when the next job makes its own,
//! once empty.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A CPU group this process made for a job's ranks.
#[derive(Debug)]
pub(crate) struct RankGroup {
    dir: PathBuf,
}

/// How a process (between fork and exec) joins a group: the path of its
/// `cgroup.procs`, ready for the system call.
#[derive(Clone, Debug)]
pub(crate) struct GroupEntry {
    procs: CString,
}

impl RankGroup {
    /// Makes a group for this job's ranks inside the calling process's own
    /// CPU group (where it weighs as one against the processes there), or
    /// says why it cannot.
    pub(crate) fn create() -> io::Result<Self> {
        let parent = own_cpu_group()?;
        sweep(&parent);
        let dir = parent.join(format!("frame-{}", std::process::id()));
        // `mkdir` never follows a symbolic link in place of the group, and
        // fails on one that exists: the group is this process's own.
        rustix::fs::mkdir(&dir, rustix::fs::Mode::from_raw_mode(0o700))?;
        Ok(Self { dir })
    }

    /// The group's directory (what a daemon is handed).
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Removes the group once the processes in it (the job's, which the
    /// daemons killed) have exited, waiting for them at most
    /// [`EMPTYING`]; a group left behind goes when the next job sweeps.
    pub(crate) fn remove(self) {
        let deadline = Instant::now() + EMPTYING;
        loop {
            match std::fs::remove_dir(&self.dir) {
                Ok(()) => return,
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) && Instant::now() < deadline => {
                    self.wait_for_members(deadline)
                }
                Err(e) => {
                    tracing::debug!(group = %self.dir.display(), "cannot remove the ranks' CPU group: {e}");
                    return;
                }
            }
        }
    }

    /// Waits, until `deadline` at the latest, for the processes in the
    /// group to exit.
    fn wait_for_members(&self, deadline: Instant) {
        use rustix::event::{poll, PollFd, PollFlags, Timespec};
        let members = std::fs::read_to_string(self.dir.join("cgroup.procs")).unwrap_or_default();
        for pid in members.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
            let Some(pid) = rustix::process::Pid::from_raw(pid) else {
                continue;
            };
            // A process descriptor becomes readable when the process exits.
            let Ok(fd) = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty())
            else {
                continue;
            };
            let left = deadline.saturating_duration_since(Instant::now());
            let wait = Timespec::try_from(left).unwrap_or_default();
            let mut fds = [PollFd::new(&fd, PollFlags::IN)];
            let _ = poll(&mut fds, Some(&wait));
        }
        // Exited processes not reaped yet, or on their way out and no
        // longer listed: a moment more.
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// How long removing a group waits for the processes in it to exit.
const EMPTYING: Duration = Duration::from_secs(5);

impl GroupEntry {
    /// How to join the group at `dir`.
    pub(crate) fn new(dir: &Path) -> io::Result<Self> {
        let procs = CString::new(dir.join("cgroup.procs").as_os_str().as_bytes())
            .map_err(|_| io::Error::other("a CPU group's path holds a NUL byte"))?;
        Ok(Self { procs })
    }

    /// Moves the calling process into the group. Only system calls (an
    /// `open`, a `write`, a `close`): safe between `fork` and `exec`.
    pub(crate) fn join_self(&self) -> io::Result<()> {
        // "0" names the writer itself.
        self.write(b"0")
    }

    /// Moves process `pid` (every thread of it) into the group.
    pub(crate) fn move_in(&self, pid: u32) -> io::Result<()> {
        self.write(pid.to_string().as_bytes())
    }

    fn write(&self, what: &[u8]) -> io::Result<()> {
        use rustix::fs::{Mode, OFlags};
        let fd = rustix::fs::open(
            self.procs.as_c_str(),
            OFlags::WRONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW,
            Mode::empty(),
        )?;
        rustix::io::write(&fd, what)?;
        Ok(())
    }
}

/// The directory of this process's CPU group, when its hierarchy lets this
/// process make groups beside it.
fn own_cpu_group() -> io::Result<PathBuf> {
    let memberships = std::fs::read_to_string("/proc/self/cgroup")?;
    let mounts = std::fs::read_to_string("/proc/self/mountinfo")?;
    let none = || {
        io::Error::new(
            io::ErrorKind::NotFound,
            "no CPU controller to group ranks in",
        )
    };
    // cgroup v1: a hierarchy of its own with the cpu controller.
    let v1 = memberships.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (_, controllers, path) = (f.next()?, f.next()?, f.next()?);
        controllers.split(',').any(|c| c == "cpu").then_some(path)
    });
    if let Some(path) = v1 {
        let mount = mount_of(&mounts, |fstype, opts| {
            fstype == "cgroup" && opts.split(',').any(|o| o == "cpu")
        })
        .ok_or_else(none)?;
        return within(&mount, path).ok_or_else(none);
    }
    // cgroup v2: only its root may hold processes beside child groups.
    let path = (memberships.lines())
        .find_map(|l| l.strip_prefix("0::"))
        .ok_or_else(none)?;
    let mount = mount_of(&mounts, |fstype, _| fstype == "cgroup2").ok_or_else(none)?;
    let dir = within(&mount, path).ok_or_else(none)?;
    let enabled = std::fs::read_to_string(dir.join("cgroup.subtree_control"))?;
    if path != "/" || !enabled.split_whitespace().any(|c| c == "cpu") {
        return Err(none());
    }
    Ok(dir)
}

/// A mount of the hierarchy `matches` picks (by file system type and
/// super options): the path within the hierarchy it shows, and where.
fn mount_of(mounts: &str, matches: impl Fn(&str, &str) -> bool) -> Option<(PathBuf, PathBuf)> {
    mounts.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        let mut r = right.split(' ');
        let (fstype, _source, opts) = (r.next()?, r.next()?, r.next()?);
        if !matches(fstype, opts) {
            return None;
        }
        let mut f = left.split(' ');
        let root = f.nth(3)?;
        let point = f.next()?;
        Some((PathBuf::from(root), PathBuf::from(point)))
    })
}

/// Where group `path` of a hierarchy is, through `mount`.
fn within((root, point): &(PathBuf, PathBuf), path: &str) -> Option<PathBuf> {
    let rest = Path::new(path).strip_prefix(root).ok()?;
    let dir = point.join(rest);
    dir.is_dir().then_some(dir)
}

/// Removes the empty groups of jobs whose root is gone.
fn sweep(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = (name.to_str())
            .and_then(|n| n.strip_prefix("frame-"))
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        let gone = rustix::process::Pid::from_raw(pid)
            .is_none_or(|p| rustix::process::test_kill_process(p) == Err(rustix::io::Errno::SRCH));
        if gone {
            // Fails, harmlessly, while processes are left in it.
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}

#[cfg(test)]
mod tests;
