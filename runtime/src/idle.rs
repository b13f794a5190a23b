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

pub use frame::metrics::process_cpu_time;

#[cfg(test)]
mod tests;
