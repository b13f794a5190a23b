//! Table 3 (simulation rows) of *Coordinated checkpointing with logging of transmitted data and asynchronous recovery*:
//! a 3600 s job in steps of 0.5 s,
//! checkpoints of 1 s and 6 s, recoveries of 0.5 s and 4 s, periods from
//! [`opt_par`](super::opt_par), five pairs of MTBF, and the mean overhead of
//! coordinated recovery and of asynchronous recovery with 2 and 5 spares.
//!
//! Choices where the paper is open or inconsistent:
//! - Its fourth pair is labelled [240 1800] in Table 3, but its text gives
//!   [T/15 T/3] = [240 1200], and the table's own failure counts (3.7
//!   level-2 failures in 4412 s) need an MTBF of about 1200 s; with 1800 the
//!   coordinated mean comes out 15 % below the paper's, with 1200 within
//!   4 %. The reproduction uses 1200.
//! - Its text has level-2 failures rolled back globally in the parallel
//!   program, while its simulation table (Table 2) recovers failures of
//!   every level asynchronously, losing the work since the last checkpoint
//!   of the failure's level. The reproduction follows Table 2, the model
//!   behind the simulated figures: the paper's small spreads for k = 5 (sd
//!   30 to 65 s) leave no room for level-2 rollbacks, which alone would
//!   spread the overhead by 120 s and more.
//! - A level-2 checkpoint costs C_1 + C_2 = 7 s: it is also one of the
//!   pattern's level-1 checkpoints, as `opt_par` counts the pattern's cost.
//!   With 6 s the coordinated means come out 1 to 4 % below the paper's;
//!   with 7 s they are within 1.3 %, and their spreads within 8 %.
//!
//! The asynchronous reductions still come out 2 to 6 points above the
//! paper's (26-27 % for k = 2, 41-43 % for k = 5, against 22-24 % and
//! 37-40 %). The gap and the spreads agree at the rarest failures and part
//! as failures get frequent (k = 5 at 180/900: sd 42 s against the
//! paper's 65), which points at an interaction between close failures
//! during asynchronous recovery that the paper's text does not describe.
//! Reading the lost work as wall-clock time since the checkpoint (so that
//! recoveries in the window count) diverges for k = 2; charging the failed
//! step only in part (as Table 2 writes R + (x dt + Y)/k) moves the other
//! way.

use super::{simulate, Model, Strategy, Summary};
use serde::Serialize;

/// The MTBF pairs (level 1, level 2), seconds.
pub const MTBF: [(f64, f64); 5] = [
    (1800.0, 36000.0),
    (720.0, 3600.0),
    (360.0, 1800.0),
    (240.0, 1200.0),
    (180.0, 900.0),
];

/// The paper's simulated mean overheads, seconds: coordinated, async k=2,
/// async k=5.
pub const PAPER: [(f64, f64, f64); 5] = [
    (187.0, 142.0, 113.0),
    (432.0, 331.0, 271.0),
    (638.0, 488.0, 400.0),
    (812.0, 626.0, 513.0),
    (955.0, 744.0, 604.0),
];

/// The job of the table with `strategy` at MTBF pair `mtbf`.
pub fn model(mtbf: (f64, f64), strategy: Strategy) -> Model {
    Model::with_optimal_periods(
        3600.0,
        0.5,
        &[mtbf.0, mtbf.1],
        &[1.0, 6.0],
        &[0.5, 4.0],
        strategy,
    )
}

/// One row of the reproduction.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// MTBF of level-1 failures, seconds.
    pub mtbf1: f64,
    /// MTBF of level-2 failures, seconds.
    pub mtbf2: f64,
    /// Mean overhead, coordinated recovery, seconds.
    pub coordinated_s: f64,
    /// Mean overhead, asynchronous recovery with 2 spares, seconds.
    pub async_k2_s: f64,
    /// Mean overhead, asynchronous recovery with 5 spares, seconds.
    pub async_k5_s: f64,
    /// The three summaries, in that order.
    #[serde(skip)]
    pub summaries: [Summary; 3],
}

/// Simulates every row with `runs` runs per point.
pub fn reproduce(runs: u64, seed: u64) -> Vec<Row> {
    MTBF.iter()
        .map(|&m| {
            let run = |s| simulate(&model(m, s), runs, seed);
            let summaries = [
                run(Strategy::Coordinated),
                run(Strategy::Async { k: 2.0, levels: 2 }),
                run(Strategy::Async { k: 5.0, levels: 2 }),
            ];
            Row {
                mtbf1: m.0,
                mtbf2: m.1,
                coordinated_s: summaries[0].mean,
                async_k2_s: summaries[1].mean,
                async_k5_s: summaries[2].mean,
                summaries,
            }
        })
        .collect()
}

/// The reproduction beside the paper's figures, as a table.
pub fn table(rows: &[Row]) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:>13} | {:>17} {:>9} | {:>17} {:>9} | {:>17} {:>9}",
        "MTBF (s)", "coordinated", "paper", "async k=2", "paper", "async k=5", "paper"
    );
    let pct = |a: f64, c: f64| 100.0 * (c - a) / c;
    for (r, p) in rows.iter().zip(PAPER) {
        let s = &r.summaries;
        let _ = writeln!(
            out,
            "{:>13} | {:>7.0} ± {:>3.0} sd {:>3.0} {:>9} | {:>7.0} ({:>3.0} %) {:>3} {:>3.0} ({:>2.0} %) | {:>7.0} ({:>3.0} %) {:>3} {:>3.0} ({:>2.0} %)",
            format!("{}/{}", r.mtbf1, r.mtbf2),
            s[0].mean,
            s[0].ci95,
            s[0].sd,
            format!("{:.0}", p.0),
            s[1].mean,
            pct(s[1].mean, s[0].mean),
            "",
            p.1,
            pct(p.1, p.0),
            s[2].mean,
            pct(s[2].mean, s[0].mean),
            "",
            p.2,
            pct(p.2, p.0),
        );
    }
    out
}
