//! `frame report`: the metrics lines of one or more runs turned into the
//! five recovery metrics per failure, a table, and an SVG plot.
//!
//! A metrics file holds JSON lines from three writers: rank 0
//! (`"event": "checkpoint"`, the checkpoint overhead, and
//! `"event": "recovery"`, the application recovery), the managers
//! (`"event": "promotion"`, the checkpoint transformation), and the
//! runtime's root (one record per failure, with `runtime_recovery_ms`).
//! A failure's runtime record and its application-recovery line are
//! matched by the epoch the job recovered into; full recovery is their sum.
//! Lines of other kinds, and lines that do not parse, are counted and
//! skipped.

mod plot;

pub use plot::svg;

use crate::checkpoint::RecoveryRecord;
use serde::Deserialize;
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
    /// The plot could not be drawn.
    #[error("cannot draw the plot: {0}")]
    Plot(String),
}

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
    /// Lines skipped (unknown kinds or unreadable).
    pub skipped: usize,
}

#[derive(Deserialize)]
struct RuntimeLine {
    epoch: u64,
    mode: String,
    runtime_recovery_ms: f64,
}

impl Report {
    /// Reads the metrics files `paths`.
    pub fn read(paths: &[PathBuf]) -> Result<Self, ReportError> {
        let mut report = Self::default();
        for path in paths {
            let text = std::fs::read_to_string(path).map_err(|error| ReportError::Read {
                path: path.clone(),
                error,
            })?;
            report.add(path, &text);
        }
        Ok(report)
    }

    /// Adds the lines of one file.
    pub fn add(&mut self, path: &Path, text: &str) {
        let mut runtime: Vec<RuntimeLine> = Vec::new();
        let mut recovered: Vec<RecoveryRecord> = Vec::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let Ok(value) = serde_json::from_str::<serde_json::Value>(line) else {
                self.skipped += 1;
                continue;
            };
            let known = match value.get("event").and_then(|e| e.as_str()) {
                Some("recovery") => serde_json::from_value(value)
                    .map(|r| recovered.push(r))
                    .is_ok(),
                Some("checkpoint") => value["blocked_us_max"]
                    .as_f64()
                    .map(|us| self.checkpoint_ms.push(us / 1000.0))
                    .is_some(),
                Some("promotion") => match (value["level"].as_u64(), value["micros"].as_f64()) {
                    (Some(level @ 2..=4), Some(us)) if value["ok"] == true => {
                        self.transform_ms[level as usize - 2].push(us / 1000.0);
                        true
                    }
                    _ => value["ok"] == false,
                },
                None if value.get("runtime_recovery_ms").is_some() => serde_json::from_value(value)
                    .map(|r| runtime.push(r))
                    .is_ok(),
                _ => false,
            };
            if !known {
                self.skipped += 1;
            }
        }
        for r in recovered {
            let run = runtime.iter().find(|x| x.epoch == r.epoch && r.epoch > 0);
            self.failures.push(Recovered {
                file: path.to_path_buf(),
                mode: run.map_or("none".into(), |x| x.mode.clone()),
                runtime_ms: run.map(|x| x.runtime_recovery_ms),
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
        if self.skipped > 0 {
            let _ = writeln!(out, "{} line(s) of other kinds skipped", self.skipped);
        }
        out
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
