//! The cpufreq governor of a node whose ranks all wait for another node's
//! logged recovery (`recovery.idle_governor`). *Data-flow based localised
//! rollback* lowers idle CPUs to 1.2 GHz during a recovery and saves 10 to
//! 12 % of the energy; here the daemon of a node that is a host of its
//! own sets the configured governor on the CPUs it may run on when the
//! root says such a recovery began and none of the node's ranks is being
//! replaced, and puts back what each CPU had when it ends (or when the
//! daemon goes). A virtual node shares the machine's CPUs with the job's
//! other nodes, the replacements among them: it leaves them alone, and
//! says so once. Where the kernel has no cpufreq interface, or refuses
//! the write, the daemon says why and changes nothing.

use std::path::{Path, PathBuf};

/// The kernel's CPU directory.
pub(super) const CPUS: &str = "/sys/devices/system/cpu";

/// CPUs whose governor was set, each with the governor it had; put back
/// when dropped.
#[derive(Debug)]
pub(super) struct Lowered {
    saved: Vec<(PathBuf, String)>,
}

impl Lowered {
    /// The CPUs' files changed.
    pub(super) fn files(&self) -> usize {
        self.saved.len()
    }
}

impl Drop for Lowered {
    fn drop(&mut self) {
        for (path, had) in self.saved.drain(..).rev() {
            if let Err(e) = std::fs::write(&path, &had) {
                say(&format!(
                    "frame daemon: cannot put governor {had} back in {}: {e}",
                    path.display()
                ));
            }
        }
    }
}

impl super::Daemon {
    /// A logged recovery of `ranks` began (`on`) or ended: a node none of
    /// whose ranks is being replaced sets `recovery.idle_governor` on its
    /// CPUs meanwhile, where it can, and says why where it cannot.
    pub(super) fn idle_governor(&mut self, on: bool, ranks: &[u32]) {
        let node = self.spec.node;
        let governor = self.spec.idle_governor.clone();
        if governor.is_empty() {
            return;
        }
        if !on {
            if let Some(lowered) = self.lowered.take() {
                let n = lowered.files();
                drop(lowered);
                say(&format!(
                    "frame daemon: node {node}: {n} CPU(s) back to their governors"
                ));
            }
            return;
        }
        let replacing = self
            .procs
            .values()
            .any(|p| p.rank.is_some_and(|r| ranks.contains(&r)) || p.helps.is_some());
        let runs_ranks = self.procs.values().any(|p| p.rank.is_some());
        if replacing || !runs_ranks || self.lowered.is_some() {
            return;
        }
        if self.spec.host.is_none() {
            if !self.governor_said {
                self.governor_said = true;
                say(&format!(
                    "frame daemon: node {node}: recovery.idle_governor left alone: a virtual node shares this machine's CPUs with the job's other nodes, the replacements' among them"
                ));
            }
            return;
        }
        match allowed_cpus().and_then(|cpus| lower(Path::new(CPUS), &cpus, &governor)) {
            Ok(lowered) => {
                say(&format!(
                    "frame daemon: node {node}: {} CPU(s) set to governor {governor} while its ranks wait",
                    lowered.files()
                ));
                self.lowered = Some(lowered);
            }
            Err(why) => say(&format!(
                "frame daemon: node {node}: cannot set governor {governor} while its ranks wait: {why}"
            )),
        }
    }
}

/// Writes `line` to standard error in one write: on another host the
/// daemon shares it with the ranks, whose lines must not cut into its own.
fn say(line: &str) {
    use std::io::Write;
    let _ = std::io::stderr()
        .lock()
        .write_all(format!("{line}\n").as_bytes());
}

/// Sets `governor` on `cpus` under `root` (the kernel's CPU directory):
/// what each had, or why it could not (nothing is left changed then).
pub(super) fn lower(root: &Path, cpus: &[usize], governor: &str) -> Result<Lowered, String> {
    let mut lowered = Lowered { saved: Vec::new() };
    for cpu in cpus {
        let path = root.join(format!("cpu{cpu}/cpufreq/scaling_governor"));
        let had = match std::fs::read_to_string(&path) {
            Ok(had) => had.trim().to_string(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(format!(
                    "no cpufreq interface ({} is missing)",
                    path.display()
                ))
            }
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        };
        // `lowered` puts back what was set so far if this one fails.
        std::fs::write(&path, governor)
            .map_err(|e| format!("cannot set {} to {governor}: {e}", path.display()))?;
        lowered.saved.push((path, had));
    }
    Ok(lowered)
}

/// The CPUs this process may run on (`Cpus_allowed_list` of its status),
/// e.g. `0-3,8`.
pub(super) fn allowed_cpus() -> Result<Vec<usize>, String> {
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|e| format!("cannot read /proc/self/status: {e}"))?;
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .ok_or("no Cpus_allowed_list in /proc/self/status")?;
    parse_list(list.trim()).ok_or_else(|| format!("cannot parse the CPU list {list:?}"))
}

/// The CPUs of a kernel CPU list (`0-3,8`); at most 65 536 of them.
pub(super) fn parse_list(list: &str) -> Option<Vec<usize>> {
    const MOST: usize = 1 << 16;
    let mut cpus = Vec::new();
    for part in list.split(',').filter(|p| !p.is_empty()) {
        let (a, b): (usize, usize) = match part.split_once('-') {
            Some((a, b)) => (a.parse().ok()?, b.parse().ok()?),
            None => {
                let a = part.parse().ok()?;
                (a, a)
            }
        };
        if a > b || b >= MOST || cpus.len() + (b - a) >= MOST {
            return None;
        }
        cpus.extend(a..=b);
    }
    Some(cpus)
}

#[cfg(test)]
mod tests;
