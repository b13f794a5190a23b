//! FRAME against iterative retrieval as simulated strategies: a job that
//! fails over time (one exponential failure process per level), whose
//! recovery from a level-i failure costs what the projection of frame's
//! measured costs gives at a node count (see [`super::projection`]: rounds
//! grow with log2 of the nodes, the baseline's level-4 validation and a
//! redeploy with the node count). Every strategy rolls back globally; they
//! differ only in what a recovery costs.
//!
//! ```
//! use frame_cli::sim::projection::Measured;
//! use frame_cli::sim::retrieval::{compare, Job};
//!
//! let job = Job { planned: 3600.0, step: 0.5, mtbf: vec![1800.0, 36000.0], checkpoint: vec![1.0, 6.0] };
//! let rows = compare(&Measured::test_machine(), 1024.0, &job, 200, 1);
//! assert_eq!(rows.len(), 3);
//! // Redeploying 1024 nodes with the baseline costs more than recovering online with frame.
//! assert!(rows[2].recovery_s[1] > rows[0].recovery_s[1]);
//! ```

use super::projection::{project, Measured};
use super::{simulate, Model, Strategy, Summary};
use serde::Serialize;

/// The job: planned computation and step (s), MTBF and checkpoint cost
/// of each level (s), lowest first (at most 4 levels).
#[derive(Clone, Debug, PartialEq)]
pub struct Job {
    /// Seconds of computation the job needs without failures.
    pub planned: f64,
    /// Length of one simulation step, seconds.
    pub step: f64,
    /// Mean time between failures of each level, seconds.
    pub mtbf: Vec<f64>,
    /// Checkpoint cost of each level, seconds.
    pub checkpoint: Vec<f64>,
}

/// One strategy at one node count.
#[derive(Clone, Debug, Serialize)]
pub struct Compared {
    /// Nodes.
    pub nodes: f64,
    /// The strategy and runtime recovery.
    pub strategy: &'static str,
    /// Recovery cost of each level, seconds.
    pub recovery_s: Vec<f64>,
    /// Mean overhead, seconds.
    pub mean_s: f64,
    /// Half-width of its 95 % confidence interval, seconds.
    pub ci95_s: f64,
    /// The whole summary.
    #[serde(skip)]
    pub summary: Summary,
}

/// Simulates `job` at `nodes` nodes with three recoveries: online with
/// `frame`, online with the iterative baseline, and redeployed with the
/// baseline; `runs` seeded runs each.
pub fn compare(m: &Measured, nodes: f64, job: &Job, runs: u64, seed: u64) -> Vec<Compared> {
    let p = project(m, nodes);
    let levels = job.mtbf.len().min(job.checkpoint.len()).min(4);
    let costs =
        |f: &dyn Fn(usize) -> f64| -> Vec<f64> { (0..levels).map(|i| f(i) / 1e3).collect() };
    let strategies: [(&'static str, Vec<f64>); 3] = [
        ("online, frame", costs(&|i| p[i].online_frame_ms)),
        (
            "online, iterative",
            costs(&|i| p[i].online_frame_ms - p[i].frame_ms + p[i].iterative_ms),
        ),
        (
            "redeploy, iterative",
            costs(&|i| p[i].redeploy_iterative_ms),
        ),
    ];
    strategies
        .into_iter()
        .map(|(strategy, recovery_s)| {
            let model = Model::with_optimal_periods(
                job.planned,
                job.step,
                &job.mtbf[..levels],
                &job.checkpoint[..levels],
                &recovery_s,
                Strategy::Coordinated,
            );
            let summary = simulate(&model, runs, seed);
            Compared {
                nodes,
                strategy,
                recovery_s,
                mean_s: summary.mean,
                ci95_s: summary.ci95,
                summary,
            }
        })
        .collect()
}

/// The comparison for 16 to 1024 nodes, as a table.
pub fn table(m: &Measured, job: &Job, runs: u64, seed: u64) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:>6} | {:>20} | {:>26} | {:>16}",
        "nodes", "recovery", "recovery per level (s)", "mean overhead (s)"
    );
    let mut nodes = 16.0;
    while nodes <= 1024.0 {
        for c in compare(m, nodes, job, runs, seed) {
            let per: Vec<String> = c.recovery_s.iter().map(|s| format!("{s:.3}")).collect();
            let _ = writeln!(
                out,
                "{:>6} | {:>20} | {:>26} | {:>9.1} ± {:>4.1}",
                nodes,
                c.strategy,
                per.join(" "),
                c.mean_s,
                c.ci95_s
            );
        }
        nodes *= 4.0;
    }
    out
}

#[cfg(test)]
mod tests;
