//! The phases of each runtime recovery, from the runtime's and rank 0's
//! records of one failure: when each step ended, counted from the
//! failure's detection, and the CPU time the root and the ranks spent.
//!
//! The steps: the root decides and orders the roll-back (`decide`); the
//! replacements start, until the last rank the release waits for says it
//! is ready (`unwind`: the ranks that start again, and the survivors that
//! rolled back sooner); the root releases the world barrier (`release`);
//! the release reaches the last rank, a survivor reading it once it has
//! rolled back (`deliver`); the slowest
//! rank gets back to the checkpointer, its communicator making its first
//! exchanges (`reentry`); the slowest rank's search for the checkpoint,
//! its fetch from a higher level and its load. `total` runs from the
//! detection to the end of the last rank's load. Rows need both records
//! and their timelines (runtimes and libraries from before they were
//! recorded leave a failure out).

use super::Recovered;
use std::fmt::Write as _;

/// Milliseconds from `from` to `to` (nanosecond stamps).
fn ms(from: u64, to: u64) -> f64 {
    to.saturating_sub(from) as f64 / 1e6
}

/// Appends the phases table of `failures` to `out` (nothing if no
/// failure has both timelines).
pub(super) fn table(failures: &[Recovered], out: &mut String) {
    let rows: Vec<_> = failures
        .iter()
        .filter_map(|f| {
            let run = f.runtime.as_ref()?;
            let rec = &f.record;
            (rec.released_ns > 0 && rec.resumed_ns > 0 && run.last_ready_ns > 0)
                .then_some((run, rec))
        })
        .collect();
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "recovery phases (milliseconds; the slowest rank's reentry, identify, fetch and load):"
    );
    let _ = writeln!(
        out,
        "{:>7} {:>6} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9} | {:>9} {:>10} {:>9}",
        "failure",
        "epoch",
        "decide",
        "unwind",
        "release",
        "deliver",
        "reentry",
        "identify",
        "fetch",
        "load",
        "total",
        "root CPU",
        "ranks CPU",
        "root msgs"
    );
    for (run, rec) in rows {
        let _ = writeln!(
            out,
            "{:>7} {:>6} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>9.2} | {:>9.2} {:>10.2} {:>9}",
            run.failure,
            run.epoch,
            ms(run.detected_ns, run.reinit_sent_ns),
            ms(run.reinit_sent_ns, run.last_ready_ns),
            ms(run.last_ready_ns, run.barrier_ns),
            ms(run.barrier_ns, rec.released_ns),
            rec.reentry_ms,
            rec.identify_ms,
            rec.fetch_ms,
            rec.load_ms,
            ms(run.detected_ns, rec.resumed_ns),
            run.root_cpu_ms,
            rec.ranks_cpu_ms,
            run.root_messages
        );
    }
}
