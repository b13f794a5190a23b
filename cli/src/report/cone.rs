//! The cone recoveries of a report: per epoch, who restored, recomputed,
//! supplied or idled, how long the recomputation took, and the global
//! restarts made instead.

use frame::metrics::ConeRecord;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// One cone recovery: the records of its ranks (one epoch of one file).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ConeRecovery {
    /// The ranks' records.
    pub ranks: Vec<ConeRecord>,
}

impl ConeRecovery {
    /// Ranks with `role`.
    pub fn count(&self, role: &str) -> usize {
        self.ranks.iter().filter(|r| r.role == role).count()
    }

    /// Rank-iterations recomputed.
    pub fn recomputed(&self) -> u64 {
        self.ranks.iter().map(|r| u64::from(r.steps)).sum()
    }

    /// The longest part of a rank that recomputed (wall, CPU), ms.
    pub fn recompute_ms(&self) -> Option<(f64, f64)> {
        (self.ranks.iter())
            .filter(|r| r.steps > 0)
            .map(|r| (r.wall_ms, r.cpu_ms))
            .reduce(|a, b| (a.0.max(b.0), a.1.max(b.1)))
    }

    /// The ranks that computed nothing (supply and idle): wall, CPU, ms.
    pub fn idle_ms(&self) -> (f64, f64) {
        (self.ranks.iter())
            .filter(|r| r.steps == 0 && r.role != "restored")
            .fold((0.0, 0.0), |(w, c), r| (w + r.wall_ms, c + r.cpu_ms))
    }
}

/// Groups the records of one file into recoveries (by epoch) and the
/// global restarts made instead (epoch, reason).
pub(super) fn group(records: Vec<ConeRecord>) -> (Vec<ConeRecovery>, Vec<(u64, String)>) {
    let mut by_epoch: BTreeMap<u64, ConeRecovery> = BTreeMap::new();
    let mut fallbacks = Vec::new();
    for r in records {
        match &r.fallback {
            Some(why) => fallbacks.push((r.epoch, why.clone())),
            None => by_epoch.entry(r.epoch).or_default().ranks.push(r),
        }
    }
    (by_epoch.into_values().collect(), fallbacks)
}

/// The table of `cones`, then the global restarts made instead.
pub(super) fn table(cones: &[ConeRecovery], fallbacks: &[(u64, String)], out: &mut String) {
    if !cones.is_empty() {
        let _ = writeln!(
            out,
            "cone recoveries (only the failure's cone recomputed; the other ranks kept their live data):"
        );
        let _ = writeln!(
            out,
            "{:>6} {:>7} {:>5} {:>11} {:>8} {:>9} {:>6} {:>4} {:>12} {:>12} {:>11} {:>9}",
            "epoch",
            "failed",
            "ckpt",
            "iterations",
            "restored",
            "recompute",
            "supply",
            "idle",
            "rank-iters",
            "recompute",
            "idle rank-s",
            "idle CPU"
        );
        for c in cones {
            let Some(first) = c.ranks.first() else {
                continue;
            };
            let failed: Vec<String> = first.failed.iter().map(u32::to_string).collect();
            let (wall, cpu) = c.idle_ms();
            let _ =
                writeln!(
                out,
                "{:>6} {:>7} {:>5} {:>11} {:>8} {:>9} {:>6} {:>4} {:>12} {:>12} {:>11.3} {:>9.2}",
                first.epoch,
                if failed.is_empty() { "-".into() } else { failed.join(",") },
                first.checkpoint,
                format!("{}-{}", first.from, first.target),
                c.count("restored"),
                c.count("recompute"),
                c.count("supply"),
                c.count("idle"),
                c.recomputed(),
                c.recompute_ms()
                    .map_or("-".into(), |(w, _)| format!("{w:.2}")),
                wall / 1e3,
                cpu
            );
        }
        let _ = writeln!(
            out,
            "(iterations: the checkpoint's to the one every rank resumed from; rank-iters: iterations recomputed over all ranks; recompute: the longest part of a rank that recomputed, ms; idle: the ranks that computed nothing, with the CPU their processes used, ms)"
        );
    }
    for (epoch, why) in fallbacks {
        let _ = writeln!(
            out,
            "cone recovery in epoch {epoch} restarted globally: {why}"
        );
    }
}
