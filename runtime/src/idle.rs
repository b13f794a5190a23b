//! Idle ranks during a logged recovery. While a failed rank's replacement
//! recomputes, the other ranks only wait for it: the root tells them when
//! such a recovery starts and when it ends (the next checkpoint
//! committed), and each rank's agent then calls the program's hook (see
//! [`set_idle_hook`]), measures the period (wall and CPU time of the
//! process) and reports it, so that the metrics hold each rank's idle time.
//!
//! frame does not change CPU frequencies itself: a program (or a site's
//! wrapper) that may lower them, as *Data-flow based localised rollback*
//! does on idle nodes, does so in its hook. Where the hook is not set,
//! the idle time is measured all the same.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// What the program runs when its rank starts (`true`) and stops
/// (`false`) idling during another rank's logged recovery.
type Hook = Arc<dyn Fn(bool) + Send + Sync>;

fn hook() -> &'static Mutex<Option<Hook>> {
    static HOOK: OnceLock<Mutex<Option<Hook>>> = OnceLock::new();
    HOOK.get_or_init(|| Mutex::new(None))
}

/// Sets the function frame calls when this rank starts (`true`) and stops
/// (`false`) waiting for another rank's logged recovery, for instance to
/// lower the CPU frequency meanwhile. It runs on frame's own thread while
/// the program's thread is blocked in a call: keep it short, and do not
/// call into frame from it. Setting it again replaces it.
pub fn set_idle_hook(f: impl Fn(bool) + Send + Sync + 'static) {
    if let Ok(mut h) = hook().lock() {
        *h = Some(Arc::new(f));
    }
}

fn call_hook(idle: bool) {
    let h = hook().lock().ok().and_then(|h| h.clone());
    if let Some(h) = h {
        h(idle);
    }
}

/// One idle period of this rank.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Period {
    pub(crate) wall: Duration,
    pub(crate) cpu: Duration,
}

/// The agent's record of whether its rank idles.
#[derive(Default)]
pub(crate) struct Idle {
    since: Option<(Instant, Duration)>,
}

impl Idle {
    /// The root says another rank's recovery started (`true`) or ended:
    /// calls the hook on a change, and returns the period that ended.
    pub(crate) fn set(&mut self, on: bool) -> Option<Period> {
        match (on, self.since) {
            (true, None) => {
                self.since = Some((Instant::now(), process_cpu_time()));
                call_hook(true);
                None
            }
            (false, Some((at, cpu))) => {
                self.since = None;
                call_hook(false);
                Some(Period {
                    wall: at.elapsed(),
                    cpu: process_cpu_time().saturating_sub(cpu),
                })
            }
            _ => None,
        }
    }
}

/// CPU time this process used so far (user and system, all its
/// threads), from /proc/self/stat in the kernel's clock ticks; zero where
/// it cannot be read. The idle records measure with it; programs may too.
pub fn process_cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The name in parentheses may hold anything: fields follow the last ')'.
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let per_second = rustix::param::clock_ticks_per_second().max(1);
    Duration::from_secs_f64((ticks(11) + ticks(12)) as f64 / per_second as f64)
}

#[cfg(test)]
mod tests;
