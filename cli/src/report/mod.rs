//! `frame report`: the metrics lines of one or more runs turned into the
//! five recovery metrics per failure, a table, and an SVG plot.
//!
//! A metrics file holds the JSON lines of [`frame::metrics`]: rank 0's
//! checkpoint overheads and application recoveries, the managers'
//! transformations, and the runtime's recoveries. A failure's runtime
//! record and its application-recovery record are matched by the epoch
//! the job recovered into; full recovery is their sum. A logged recovery
//! (only the failed rank's replacement went back) has no recovery record
//! from rank 0: its runtime record is matched with the replacement's
//! rejoin record by rank and epoch, and with its helpers', the waiting
//! ranks' and the replaying ranks' records by failure number. Lines of other kinds, and lines that
//! do not parse, are counted and skipped.

mod cone;
mod phases;
mod plot;

pub use cone::ConeRecovery;

pub use plot::svg;

use frame::metrics::{
    ConeRecord, HelpRecord, IdleRecord, Record, RecoveryRecord, RejoinRecord, ReplayRecord,
    RuntimeRecoveryRecord,
};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Why a report could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A file could not be read.
    #[error("cannot read {path}: {error}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        error: std::io::Error,
    },
    /// A line is longer than any record frame writes.
    #[error("{path}: line {line} is longer than {MAX_LINE} bytes; no metrics record is that long")]
    LineTooLong {
        /// The file.
        path: PathBuf,
        /// The line's number (from 1).
        line: usize,
    },
    /// The plot could not be drawn.
    #[error("cannot draw the plot: {0}")]
    Plot(String),
}

/// The longest line read: records are a few hundred bytes.
pub const MAX_LINE: usize = 1 << 20;

/// One recovered failure: the library's recovery record, and the
/// runtime's part when its record was found.
#[derive(Clone, Debug, PartialEq)]
pub struct Recovered {
    /// The file the lines came from.
    pub file: PathBuf,
    /// `online`, `redeploy`, or `none` (no runtime record).
    pub mode: String,
    /// Failure detected to world barrier released (the runtime's record).
    pub runtime_ms: Option<f64>,
    /// The runtime's record, when found.
    pub runtime: Option<RuntimeRecoveryRecord>,
    /// What rank 0 recorded: level, strategy, rounds, identify, fetch and
    /// load, application recovery.
    pub record: RecoveryRecord,
}

impl Recovered {
    /// Runtime plus application recovery (application alone without a
    /// runtime record).
    pub fn full_ms(&self) -> f64 {
        self.runtime_ms.unwrap_or(0.0) + self.record.application_recovery_ms
    }
}

/// Everything a report shows.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Report {
    /// Recovered failures, in file and line order.
    pub failures: Vec<Recovered>,
    /// Checkpoint overhead: the slowest rank's blocked time per checkpoint,
    /// milliseconds.
    pub checkpoint_ms: Vec<f64>,
    /// Checkpoint transformation per level (2 to 4): each node's promotion
    /// time, milliseconds.
    pub transform_ms: [Vec<f64>; 3],
    /// Logged recoveries, in file and line order.
    pub logged: Vec<LoggedRecovery>,
    /// Global restarts a logged job made instead, with the reason.
    pub fallbacks: Vec<(usize, String)>,
    /// Cone recoveries, in file and epoch order.
    pub cones: Vec<ConeRecovery>,
    /// Global restarts a cone job made instead: epoch, reason.
    pub cone_fallbacks: Vec<(u64, String)>,
    /// The runtime's start-ups (launch to the first release), milliseconds.
    pub startup_ms: Vec<f64>,
    /// Lines skipped (unknown kinds or unreadable).
    pub skipped: usize,
}

/// One logged recovery: the runtime's record and, when found, what the
/// replacement measured.
#[derive(Clone, Debug, PartialEq)]
pub struct LoggedRecovery {
    /// The runtime's record (mode `logged`).
    pub runtime: RuntimeRecoveryRecord,
    /// The replacements' records (one per failed rank; a node's ranks
    /// are replaced together).
    pub rejoins: Vec<RejoinRecord>,
    /// The ranks that waited, each with its wait.
    pub idle: Vec<IdleRecord>,
    /// The helpers that recomputed with the replacement.
    pub helped: Vec<HelpRecord>,
    /// The ranks that sent the replacement what it had lost.
    pub replays: Vec<ReplayRecord>,
}

impl LoggedRecovery {
    /// The waits summed: wall and CPU time, milliseconds.
    pub fn idle_ms(&self) -> (f64, f64) {
        self.idle
            .iter()
            .fold((0.0, 0.0), |(w, c), i| (w + i.wall_ms, c + i.cpu_ms))
    }

    /// Processes that recomputed (the replacements and their helpers),
    /// and the most CPU time one of them used, milliseconds (`None`
    /// without the replacements' records).
    pub fn team_cpu_ms(&self) -> (usize, Option<f64>) {
        let own = (self.rejoins.iter())
            .map(|j| j.recompute_cpu_ms)
            .reduce(f64::max);
        let most = self
            .helped
            .iter()
            .map(|h| h.cpu_ms)
            .fold(own, |m, c| m.map(|m| m.max(c)));
        let replacements = self.rejoins.len().max(self.runtime.failed_ranks.len());
        (replacements + self.helped.len(), most)
    }

    /// The survivors that sent the replacements what they had lost (the
    /// replacements answer each other's requests too, not counted).
    pub fn senders(&self) -> Vec<&ReplayRecord> {
        (self.replays.iter())
            .filter(|r| !self.runtime.failed_ranks.contains(&r.rank))
            .collect()
    }
}

/// The records of one file awaiting their match.
#[derive(Default)]
struct Lines {
    runtime: Vec<RuntimeRecoveryRecord>,
    recovered: Vec<RecoveryRecord>,
    rejoined: Vec<RejoinRecord>,
    idle: Vec<IdleRecord>,
    helped: Vec<HelpRecord>,
    replays: Vec<ReplayRecord>,
    cones: Vec<ConeRecord>,
}

impl Report {
    /// Reads the metrics files `paths`, line by line (a line longer than
    /// [`MAX_LINE`] is an error naming it).
    pub fn read(paths: &[PathBuf]) -> Result<Self, ReportError> {
        use std::io::{BufRead, Read};
        let mut report = Self::default();
        for path in paths {
            let read_error = |error| ReportError::Read {
                path: path.clone(),
                error,
            };
            let file = std::fs::File::open(path).map_err(read_error)?;
            let mut reader = std::io::BufReader::new(file);
            let mut lines = Lines::default();
            let mut buf = Vec::new();
            for number in 1.. {
                buf.clear();
                let n = reader
                    .by_ref()
                    .take(MAX_LINE as u64 + 1)
                    .read_until(b'\n', &mut buf)
                    .map_err(read_error)?;
                if n == 0 {
                    break;
                }
                if buf.len() > MAX_LINE && buf.last() != Some(&b'\n') {
                    return Err(ReportError::LineTooLong {
                        path: path.clone(),
                        line: number,
                    });
                }
                match std::str::from_utf8(&buf) {
                    Ok(line) => report.add_line(&mut lines, line),
                    Err(_) => report.skipped += 1,
                }
                // Whatever the reader grew to for a long line goes.
                if buf.capacity() > 64 << 10 {
                    buf = Vec::new();
                }
            }
            report.finish(path, lines);
        }
        Ok(report)
    }

    /// Adds the lines of one file.
    pub fn add(&mut self, path: &Path, text: &str) {
        let mut lines = Lines::default();
        for line in text.lines() {
            self.add_line(&mut lines, line);
        }
        self.finish(path, lines);
    }

    /// Takes one line of a file.
    fn add_line(&mut self, lines: &mut Lines, line: &str) {
        if line.trim().is_empty() {
            return;
        }
        match Record::parse(line) {
            Some(Record::Recovery(r)) => lines.recovered.push(r),
            Some(Record::RuntimeRecovery(r)) => lines.runtime.push(r),
            Some(Record::Rejoin(r)) => lines.rejoined.push(r),
            Some(Record::Idle(r)) => lines.idle.push(r),
            Some(Record::Help(r)) => lines.helped.push(r),
            Some(Record::Replay(r)) => lines.replays.push(r),
            Some(Record::Cone(r)) => lines.cones.push(r),
            Some(Record::RuntimeStart(r)) => self.startup_ms.push(r.startup_ms),
            Some(Record::Checkpoint(c)) => {
                self.checkpoint_ms.push(c.blocked_us_max as f64 / 1000.0)
            }
            Some(Record::Promotion(p)) => {
                // A failed promotion is known but takes no time.
                if p.ok && (2..=4).contains(&p.level) {
                    self.transform_ms[p.level as usize - 2].push(p.micros as f64 / 1000.0);
                }
            }
            None => self.skipped += 1,
        }
    }

    /// Matches a file's recovery records with the runtime's.
    fn finish(&mut self, path: &Path, mut lines: Lines) {
        let (cones, fallbacks) = cone::group(std::mem::take(&mut lines.cones));
        self.cones.extend(cones);
        self.cone_fallbacks.extend(fallbacks);
        for run in &lines.runtime {
            if let Some(why) = &run.fallback {
                self.fallbacks.push((run.failure, why.clone()));
            }
            if run.mode == "logged" {
                // Each failed rank's first record of the epoch not taken
                // by an earlier recovery.
                let mut rejoins = Vec::new();
                for rank in &run.failed_ranks {
                    let at = (lines.rejoined.iter())
                        .position(|j| j.epoch == run.epoch && j.rank == *rank);
                    if let Some(at) = at {
                        rejoins.push(lines.rejoined.remove(at));
                    }
                }
                let idle = lines
                    .idle
                    .iter()
                    .filter(|i| i.failure == run.failure)
                    .cloned()
                    .collect();
                let helped = lines
                    .helped
                    .iter()
                    .filter(|h| h.failure == run.failure)
                    .cloned()
                    .collect();
                let replays = lines
                    .replays
                    .iter()
                    .filter(|r| r.failure == run.failure)
                    .cloned()
                    .collect();
                self.logged.push(LoggedRecovery {
                    runtime: run.clone(),
                    rejoins,
                    idle,
                    helped,
                    replays,
                });
            }
        }
        for r in lines.recovered {
            let run = lines
                .runtime
                .iter()
                .find(|x| x.epoch == r.epoch && r.epoch > 0);
            self.failures.push(Recovered {
                file: path.to_path_buf(),
                mode: run.map_or("none".into(), |x| x.mode.clone()),
                runtime_ms: run.map(|x| x.runtime_recovery_ms),
                runtime: run.cloned(),
                record: r,
            });
        }
    }

    /// The table: one row per failure, then the checkpoint overhead and
    /// transformation medians.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{:>5} {:>9} {:>8} {:>5} {:>6} {:>6} {:>9} {:>9} {:>9} {:>12} {:>10} {:>9}",
            "level",
            "strategy",
            "mode",
            "ckpt",
            "rounds",
            "epoch",
            "identify",
            "fetch",
            "load",
            "application",
            "runtime",
            "full"
        );
        for f in &self.failures {
            let r = &f.record;
            let _ = writeln!(
                out,
                "{:>5} {:>9} {:>8} {:>5} {:>6} {:>6} {:>9.2} {:>9.2} {:>9.2} {:>12.2} {:>10} {:>9.2}",
                format!("L{}", r.level),
                r.strategy,
                f.mode,
                r.checkpoint,
                r.rounds,
                r.epoch,
                r.identify_ms,
                r.fetch_ms,
                r.load_ms,
                r.application_recovery_ms,
                f.runtime_ms.map_or("-".into(), |r| format!("{r:.2}")),
                f.full_ms()
            );
        }
        let _ = writeln!(
            out,
            "(milliseconds; identify, fetch and load of the slowest rank)"
        );
        let _ = writeln!(
            out,
            "checkpoint overhead: median {} over {} checkpoint(s)",
            median_text(&self.checkpoint_ms),
            self.checkpoint_ms.len()
        );
        if !self.startup_ms.is_empty() {
            let _ = writeln!(
                out,
                "runtime start-up (launch to first release): median {} over {} run(s)",
                median_text(&self.startup_ms),
                self.startup_ms.len()
            );
        }
        for (i, t) in self.transform_ms.iter().enumerate() {
            if !t.is_empty() {
                let _ = writeln!(
                    out,
                    "checkpoint transformation to L{}: median {} per node over {} promotion(s)",
                    i + 2,
                    median_text(t),
                    t.len()
                );
            }
        }
        phases::table(&self.failures, &mut out);
        self.logged_table(&mut out);
        cone::table(&self.cones, &self.cone_fallbacks, &mut out);
        if self.skipped > 0 {
            let _ = writeln!(out, "{} line(s) of other kinds skipped", self.skipped);
        }
        out
    }

    /// The logged recoveries and the global restarts made instead.
    fn logged_table(&self, out: &mut String) {
        if !self.logged.is_empty() {
            let _ = writeln!(
                out,
                "logged recoveries (only the failed ranks' replacements went back):"
            );
            let _ = writeln!(
                out,
                "{:>7} {:>7} {:>6} {:>10} {:>5} {:>10} {:>12} {:>5} {:>12} {:>9} {:>8} {:>6} {:>11} {:>9}",
                "failure",
                "ranks",
                "epoch",
                "runtime",
                "ckpt",
                "restore",
                "recompute",
                "parts",
                "CPU per part",
                "sent logs",
                "log KiB",
                "waited",
                "idle rank-s",
                "idle CPU"
            );
            for l in &self.logged {
                let r = &l.runtime;
                let ranks: Vec<String> = r.failed_ranks.iter().map(u32::to_string).collect();
                let ranks = if ranks.is_empty() {
                    "-".into()
                } else {
                    ranks.join(",")
                };
                // The slowest replacement's restore and recomputation.
                let slowest = |f: fn(&RejoinRecord) -> f64| {
                    (l.rejoins.iter().map(f).reduce(f64::max))
                        .map_or("-".into(), |ms| format!("{ms:.2}"))
                };
                let ckpt = l
                    .rejoins
                    .first()
                    .map_or("-".into(), |j| j.checkpoint.to_string());
                let restore = slowest(|j| j.restore_ms);
                let recompute = slowest(|j| j.recompute_ms);
                let (wall, cpu) = l.idle_ms();
                let (parts, most) = l.team_cpu_ms();
                let senders = l.senders();
                let log = senders.iter().map(|r| r.log_bytes).max();
                let _ = writeln!(
                    out,
                    "{:>7} {:>7} {:>6} {:>10.2} {:>5} {:>10} {:>12} {:>5} {:>12} {:>9} {:>8} {:>6} {:>11.3} {:>9.2}",
                    r.failure,
                    ranks,
                    r.epoch,
                    r.runtime_recovery_ms,
                    ckpt,
                    restore,
                    recompute,
                    parts,
                    most.map_or("-".into(), |m| format!("{m:.2}")),
                    senders.len(),
                    log.map_or("-".into(), |b| format!("{:.1}", b as f64 / 1024.0)),
                    l.idle.len(),
                    wall / 1e3,
                    cpu
                );
            }
            let _ = writeln!(
                out,
                "(milliseconds but idle rank-seconds; restore and recompute: the slowest replacement's, recompute from the restore to the next checkpoint's commit; parts: the replacements and their helpers, CPU per part the most one of them used; sent logs: the ranks that replayed to the replacements, log KiB the largest log one held; waited: the ranks that idled meanwhile, with the CPU their processes used)"
            );
        }
        for (failure, why) in &self.fallbacks {
            let _ = writeln!(out, "failure {failure} restarted globally: {why}");
        }
    }
}

/// The median of `values` (`None` when empty).
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    Some(if v.len() % 2 == 0 {
        (v[m - 1] + v[m]) / 2.0
    } else {
        v[m]
    })
}

fn median_text(values: &[f64]) -> String {
    median(values).map_or("-".into(), |m| format!("{m:.2} ms"))
}

#[cfg(test)]
mod tests;
