//! Crash points: a numbered place before every call that changes the file
//! system, where a test can have the process killed.
//!
//! Only builds with the `fault-injection` feature (which frame's own tests
//! enable) act on them; elsewhere [`point`] compiles to nothing. Two
//! environment variables drive them:
//!
//! - `FRAME_CRASH_AT=<who>:<n>` sends SIGKILL to the whole process at the
//!   `n`-th crash point (1-based) passed on behalf of `who` (a rank);
//!   `FRAME_CRASH_AT=<who>:stop:<op>:<path end>` sends SIGSTOP to the
//!   process at the first point of `who` doing `op` on a path that ends
//!   so (the process stops before that thread goes on) and goes on once
//!   continued;
//! - `FRAME_CRASH_TRACE=<file>` appends one line per crash point passed:
//!   `<who> <n> <op> <path>`, so a test can count the points of a run and
//!   then kill at every one of them.

use std::path::Path;

/// The `who` of operations not done on behalf of a rank.
pub const ANYONE: u32 = u32::MAX;

/// The `who` of the operations of node `node`'s manager (apart from ranks',
/// so a test can kill a manager at each of its own points).
pub fn manager(node: u32) -> u32 {
    1_000_000 + node
}

/// Passes crash point `op` on `dir/name` for `who`.
#[cfg(feature = "fault-injection")]
pub fn point(who: u32, op: &str, dir: &Path, name: &str) {
    imp::point(who, op, dir, name);
}

/// Passes crash point `op` on `dir/name` for `who` (no-op in this build).
#[cfg(not(feature = "fault-injection"))]
#[inline(always)]
pub fn point(_who: u32, _op: &str, _dir: &Path, _name: &str) {}

#[cfg(feature = "fault-injection")]
mod imp {
    use std::collections::HashMap;
    use std::io::Write;
    use std::path::Path;
    use std::sync::{Mutex, OnceLock};

    struct Plan {
        kill_at: Option<(u32, u64)>,
        /// (who, op, path end): stop the process there, once.
        stop_at: Option<(u32, String, String)>,
        trace: Option<Mutex<std::fs::File>>,
    }

    fn plan() -> &'static Plan {
        static PLAN: OnceLock<Plan> = OnceLock::new();
        PLAN.get_or_init(|| {
            let spec = crate::env::var(crate::env::CRASH_AT);
            let kill_at = spec.as_deref().and_then(|v| {
                let (who, n) = v.split_once(':')?;
                Some((who.trim().parse().ok()?, n.trim().parse().ok()?))
            });
            let stop_at = spec.as_deref().and_then(|v| {
                let mut parts = v.splitn(4, ':');
                let who = parts.next()?.trim().parse().ok()?;
                (parts.next()? == "stop").then_some(())?;
                Some((who, parts.next()?.to_string(), parts.next()?.to_string()))
            });
            let trace = crate::env::var_os(crate::env::CRASH_TRACE).and_then(|p| {
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)
                    .ok()
                    .map(Mutex::new)
            });
            Plan {
                kill_at,
                stop_at,
                trace,
            }
        })
    }

    static COUNTS: Mutex<Option<HashMap<u32, u64>>> = Mutex::new(None);

    pub(super) fn point(who: u32, op: &str, dir: &Path, name: &str) {
        let plan = plan();
        if plan.kill_at.is_none() && plan.stop_at.is_none() && plan.trace.is_none() {
            return;
        }
        let n = {
            let mut counts = COUNTS.lock().unwrap_or_else(|e| e.into_inner());
            let c = counts
                .get_or_insert_with(HashMap::new)
                .entry(who)
                .or_insert(0);
            *c += 1;
            *c
        };
        if let Some(trace) = &plan.trace {
            let mut f = trace.lock().unwrap_or_else(|e| e.into_inner());
            // One write per line: the processes of a job share the file
            // (appends of a whole line do not interleave).
            let line = format!("{who} {n} {op} {}\n", dir.join(name).display());
            let _ = f.write_all(line.as_bytes());
        }
        if let Some((_, _, end)) = plan
            .stop_at
            .as_ref()
            .filter(|(w, o, _)| *w == who && o == op)
        {
            static STOPPED: std::sync::atomic::AtomicBool =
                std::sync::atomic::AtomicBool::new(false);
            let path = dir.join(name);
            if path.to_string_lossy().ends_with(end.as_str())
                && !STOPPED.swap(true, std::sync::atomic::Ordering::AcqRel)
            {
                // Sent to this thread, which stops the whole process before
                // it goes on: sent to the process, another thread takes it,
                // and this one runs on for a few calls first.
                // SAFETY: raise only sends a signal to the calling thread.
                unsafe {
                    libc::raise(libc::SIGSTOP);
                }
            }
        }
        if plan.kill_at == Some((who, n)) {
            let _ = rustix::process::kill_process(
                rustix::process::getpid(),
                rustix::process::Signal::KILL,
            );
            loop {
                std::thread::park();
            }
        }
    }
}
