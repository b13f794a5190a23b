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
//! - A level-2 checkpoint costs C_1 + C_2 = 7 s: it is also one of the
//!   pattern's level-1 checkpoints, as `opt_par` counts the pattern's cost.
//!   With 6 s the coordinated means come out 1 to 4 % below the paper's;
//!   with 7 s they are within 1.3 %, and their spreads within 8 %.
//!
//! Asynchronous recovery is simulated under each [`Reading`] of the paper,
//! every one printed beside the paper's cells with its distance in points:
//! - [`Reading::Literal`], the text as written: level-1 failures are
//!   recovered asynchronously, level-2 failures roll every process back
//!   (as its parallel program does). Its reductions come out 8 to 19
//!   points below the paper's, and its spreads (sd 125 to 170 s) far above
//!   the paper's (30 to 116 s): the simulated rows did not roll back
//!   level-2 failures.
//! - [`Reading::Table2`]: every level asynchronously, as the functions of
//!   the paper's Table 2 write it. 2 to 6 points above the paper's, with
//!   spreads too small as failures get frequent (k = 5 at 180/900: sd 42 s
//!   against 65), which points at close failures interacting.
//! - [`Reading::OneWindow`]: Table 2, plus a rule the paper does not state:
//!   one asynchronous recovery per logging window (between two scheduled
//!   level-1 checkpoints), a second failure in the window rolling back
//!   globally, as frame's `logged` recovery does. The spreads now match the
//!   paper's (k = 2: 73 to 108 s against 72 to 116; k = 5: 37 to 68
//!   against 30 to 65) and the reductions are within 2.3 points.
//! - [`Reading::OneWindowCheckpoint`]: that rule, plus a second one the
//!   paper does not state: each asynchronous recovery ends with a level-1
//!   checkpoint (C_1 = 1 s, the new restore point), the window's logs
//!   being dropped only at the next scheduled checkpoint. Every cell is
//!   within 1.5 points; this is the reading the plot and the JSON rows
//!   report as the asynchronous figures.

use super::{simulate, Model, Strategy, Summary, Window};
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

/// A reading of the paper's asynchronous recovery (see the module's doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reading {
    /// Level 1 asynchronously, level 2 rolled back: the text as written.
    Literal,
    /// Every level asynchronously: the paper's Table 2.
    Table2,
    /// Table 2, one asynchronous recovery per logging window.
    OneWindow,
    /// Table 2, one per window, each ending with a level-1 checkpoint.
    OneWindowCheckpoint,
}

impl Reading {
    /// Every reading, the text as written first.
    pub const ALL: [Reading; 4] = [
        Reading::Literal,
        Reading::Table2,
        Reading::OneWindow,
        Reading::OneWindowCheckpoint,
    ];

    /// The reading the plot and the JSON rows report.
    pub const CHOSEN: Reading = Reading::OneWindowCheckpoint;

    /// The strategy of this reading with `k` spare processes.
    pub fn strategy(self, k: f64) -> Strategy {
        let (levels, window) = match self {
            Reading::Literal => (1, Window::Unlimited),
            Reading::Table2 => (2, Window::Unlimited),
            Reading::OneWindow => (2, Window::Once),
            Reading::OneWindowCheckpoint => (2, Window::OnceThenCheckpoint),
        };
        Strategy::Async { k, levels, window }
    }

    /// A short description for the table.
    pub fn describe(self) -> &'static str {
        match self {
            Reading::Literal => "as written: level 1 asynchronous, level 2 rolled back",
            Reading::Table2 => "Table 2: every level asynchronous",
            Reading::OneWindow => {
                "Table 2, one asynchronous recovery per window (a second failure rolls back)"
            }
            Reading::OneWindowCheckpoint => {
                "Table 2, one per window, each recovery ending with a level-1 checkpoint"
            }
        }
    }
}

/// Asynchronous recovery under one reading, at one MTBF pair.
#[derive(Clone, Debug, Serialize)]
pub struct Cells {
    /// The reading.
    pub reading: Reading,
    /// Mean overhead with 2 spares, seconds.
    pub k2_s: f64,
    /// Mean overhead with 5 spares, seconds.
    pub k5_s: f64,
    /// Reductions against coordinated, percent (k = 2, k = 5).
    pub reductions: [f64; 2],
    /// Their distances from the paper's reductions, points (signed: above
    /// the paper's is positive).
    pub off_points: [f64; 2],
    /// Standard deviations of the overhead, seconds (k = 2, k = 5).
    pub sd_s: [f64; 2],
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
    /// Mean overhead, asynchronous recovery with 2 spares, seconds, under
    /// [`Reading::CHOSEN`].
    pub async_k2_s: f64,
    /// The same with 5 spares.
    pub async_k5_s: f64,
    /// Every reading's cells, in the order of [`Reading::ALL`].
    pub readings: Vec<Cells>,
    /// Coordinated, then the chosen reading with 2 and 5 spares.
    #[serde(skip)]
    pub summaries: [Summary; 3],
}

/// The reduction against coordinated recovery, percent, from two means.
fn reduction(coordinated: f64, asynchronous: f64) -> f64 {
    100.0 * (coordinated - asynchronous) / coordinated
}

/// Simulates every row with `runs` runs per point under `readings`
/// ([`Reading::CHOSEN`] is always simulated, for the row's figures).
pub fn reproduce_readings(runs: u64, seed: u64, readings: &[Reading]) -> Vec<Row> {
    MTBF.iter()
        .zip(PAPER)
        .map(|(&m, p)| {
            let run = |s| simulate(&model(m, s), runs, seed);
            let coordinated = run(Strategy::Coordinated);
            let mut chosen = None;
            let mut cells = Vec::new();
            for &r in Reading::ALL
                .iter()
                .filter(|r| readings.contains(r) || **r == Reading::CHOSEN)
            {
                let (k2, k5) = (run(r.strategy(2.0)), run(r.strategy(5.0)));
                let reductions = [
                    reduction(coordinated.mean, k2.mean),
                    reduction(coordinated.mean, k5.mean),
                ];
                let theirs = [reduction(p.0, p.1), reduction(p.0, p.2)];
                if readings.contains(&r) {
                    cells.push(Cells {
                        reading: r,
                        k2_s: k2.mean,
                        k5_s: k5.mean,
                        reductions,
                        off_points: [reductions[0] - theirs[0], reductions[1] - theirs[1]],
                        sd_s: [k2.sd, k5.sd],
                    });
                }
                if r == Reading::CHOSEN {
                    chosen = Some((k2, k5));
                }
            }
            let (k2, k5) = chosen.unwrap_or_else(|| (coordinated.clone(), coordinated.clone()));
            Row {
                mtbf1: m.0,
                mtbf2: m.1,
                coordinated_s: coordinated.mean,
                async_k2_s: k2.mean,
                async_k5_s: k5.mean,
                readings: cells,
                summaries: [coordinated, k2, k5],
            }
        })
        .collect()
}

/// Simulates every row under every reading with `runs` runs per point.
pub fn reproduce(runs: u64, seed: u64) -> Vec<Row> {
    reproduce_readings(runs, seed, &Reading::ALL)
}

/// The largest distance, in points, of `reading`'s reductions from the
/// paper's over `rows` (`None` if the rows lack the reading).
pub fn worst_distance(rows: &[Row], reading: Reading) -> Option<f64> {
    rows.iter()
        .map(|r| {
            r.readings
                .iter()
                .find(|c| c.reading == reading)
                .map(|c| c.off_points[0].abs().max(c.off_points[1].abs()))
        })
        .try_fold(0.0f64, |worst, d| d.map(|d| worst.max(d)))
}

/// The reproduction beside the paper's figures, as a table: coordinated
/// recovery, then each reading's reductions with their distance from the
/// paper's.
pub fn table(rows: &[Row]) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:>13} | {:>20} {:>9} | {:>14} {:>6} | {:>14} {:>6}",
        "MTBF (s)", "coordinated", "paper", "chosen k=2", "paper", "chosen k=5", "paper"
    );
    for (r, p) in rows.iter().zip(PAPER) {
        let s = &r.summaries;
        let _ = writeln!(
            out,
            "{:>13} | {:>7.0} ± {:>3.0} sd {:>3.0} {:>9.0} | {:>7.0} sd {:>3.0} {:>6.0} | {:>7.0} sd {:>3.0} {:>6.0}",
            format!("{}/{}", r.mtbf1, r.mtbf2),
            s[0].mean,
            s[0].ci95,
            s[0].sd,
            p.0,
            s[1].mean,
            s[1].sd,
            p.1,
            s[2].mean,
            s[2].sd,
            p.2,
        );
    }
    let readings: Vec<Reading> = rows
        .first()
        .map(|r| r.readings.iter().map(|c| c.reading).collect())
        .unwrap_or_default();
    for reading in readings {
        let worst = worst_distance(rows, reading).unwrap_or(f64::NAN);
        let _ = writeln!(
            out,
            "\nreductions against coordinated, {}: at most {worst:.1} points from the paper's",
            reading.describe()
        );
        let _ = writeln!(
            out,
            "{:>13} | {:>26} | {:>26}",
            "MTBF (s)", "k=2 (paper, distance)", "k=5 (paper, distance)"
        );
        for (r, p) in rows.iter().zip(PAPER) {
            let Some(c) = r.readings.iter().find(|c| c.reading == reading) else {
                continue;
            };
            let theirs = [reduction(p.0, p.1), reduction(p.0, p.2)];
            let cell = |i: usize| {
                format!(
                    "{:>5.1} % ({:>4.1} %, {:>+5.1}) sd {:>3.0}",
                    c.reductions[i], theirs[i], c.off_points[i], c.sd_s[i]
                )
            };
            let _ = writeln!(
                out,
                "{:>13} | {} | {}",
                format!("{}/{}", r.mtbf1, r.mtbf2),
                cell(0),
                cell(1)
            );
        }
    }
    out
}
