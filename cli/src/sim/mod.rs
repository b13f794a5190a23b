//! `frame sim`: a discrete-time simulation of a job that fails, to compare
//! fault-tolerance strategies at scales no test reaches and to choose
//! checkpoint intervals.
//!
//! The method follows the time-stepped model of *Coordinated checkpointing with logging of transmitted data and asynchronous recovery*
//! (section 2.2):
//! the job advances its computed time by a step, pays for the checkpoints
//! due after that step, and fails when the wall-clock time passes the next
//! failure of some level (independent exponential inter-arrival times, one
//! rate per level). A checkpoint of level j writes every level up to j and
//! costs the sum of their costs: a level-2 checkpoint of the pattern is
//! also one of its N_1 level-1 checkpoints, as [`opt_par`] counts the
//! pattern's cost (and as frame writes level 1 before promoting). A
//! failure of level i is repaired by the checkpoints of level i or above:
//! - **coordinated**: every process rolls back to the last such checkpoint
//!   and recomputes (recovery cost R_i plus the lost work, at full cost);
//! - **asynchronous** (sender-based message logging, k spare processes
//!   recompute the lost work of the failed one): the computed time does not
//!   roll back, and the job waits R_i plus the lost work divided by k.
//!   [`Window`] says how many such recoveries one logging window allows
//!   (the paper does not say; frame's `logged` recovery allows one).
//!
//! [`opt_par`] gives the checkpoint pattern: how many checkpoints of each
//! level, and the pattern's length (figure 5 of the same paper). Everything here
//! is pure and seeded: a run depends only on the model, the seed and its
//! index, never on the number of threads.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

pub mod localised;
pub mod plot;
pub mod projection;
pub mod retrieval;
pub mod scale;
pub mod table3;

pub use frame::opt_par;

/// How failures are repaired.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Strategy {
    /// Global rollback to the last checkpoint of the failure's level.
    Coordinated,
    /// Failures of levels `1..=levels` are recomputed by `k` spare
    /// processes without a rollback; higher levels roll back globally.
    Async {
        /// Processes sharing the recomputation.
        k: f64,
        /// Highest level recovered asynchronously.
        levels: usize,
        /// How often a logging window can be recovered asynchronously.
        window: Window,
    },
}

/// How many asynchronous recoveries one logging window allows (the span
/// between two level-1 checkpoints of the schedule, whose messages the
/// senders keep).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Window {
    /// Any number: every failure of a level up to `levels` is recomputed.
    Unlimited,
    /// One: a second failure before the next scheduled level-1 checkpoint
    /// rolls every process back, as frame's `logged` recovery does (the
    /// logs of the window no longer describe a state anyone can replay).
    Once,
    /// One, and each asynchronous recovery ends with a level-1 checkpoint
    /// of the job (cost C_1, the new restore point); the window's logs are
    /// dropped at the next scheduled checkpoint only, so a second failure
    /// before it still rolls back, to that new checkpoint.
    OnceThenCheckpoint,
}

/// A job and its failure and cost profile, per level (lowest first).
#[derive(Clone, Debug, PartialEq)]
pub struct Model {
    /// Seconds of computation the job needs without failures.
    pub planned: f64,
    /// Length of one simulation step, seconds of computation.
    pub step: f64,
    /// Failure rate of each level, per second.
    pub rates: Vec<f64>,
    /// Checkpoint cost of each level, seconds.
    pub checkpoint: Vec<f64>,
    /// Recovery cost of each level, seconds.
    pub recovery: Vec<f64>,
    /// Checkpoint period of each level, seconds of computation.
    pub periods: Vec<f64>,
    /// How failures are repaired.
    pub strategy: Strategy,
}

impl Model {
    /// A model whose periods come from [`opt_par`]: level i every W / N_i
    /// seconds of computation.
    pub fn with_optimal_periods(
        planned: f64,
        step: f64,
        mtbf: &[f64],
        checkpoint: &[f64],
        recovery: &[f64],
        strategy: Strategy,
    ) -> Self {
        let rates: Vec<f64> = mtbf.iter().map(|m| 1.0 / m).collect();
        let (n, w) = opt_par(&rates, checkpoint);
        Self {
            planned,
            step,
            periods: n.iter().map(|ni| w / ni).collect(),
            rates,
            checkpoint: checkpoint.to_vec(),
            recovery: recovery.to_vec(),
            strategy,
        }
    }

    fn levels(&self) -> usize {
        self.rates
            .len()
            .min(self.checkpoint.len())
            .min(self.recovery.len())
            .min(self.periods.len())
    }
}

/// One simulated run.
#[derive(Clone, Debug, PartialEq)]
pub struct Run {
    /// Wall-clock time minus the planned computation, seconds (a lower
    /// bound when the run did not finish).
    pub overhead: f64,
    /// Failures of each level.
    pub failures: Vec<u32>,
    /// Whether the job completed within [`GIVE_UP`] times its planned
    /// computation (failures faster than recoveries never let it finish).
    pub finished: bool,
}

/// A run stops once its wall-clock time reaches this many times the
/// planned computation.
pub const GIVE_UP: f64 = 1000.0;

fn exponential(rng: &mut ChaCha8Rng, rate: f64) -> f64 {
    if rate <= 0.0 {
        return f64::INFINITY;
    }
    // 1 - U lies in (0, 1]: its logarithm is finite.
    -(1.0 - rng.random::<f64>()).ln() / rate
}

/// Simulates run number `index` of `model` for `seed`.
pub fn run_once(model: &Model, seed: u64, index: u64) -> Run {
    let levels = model.levels();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(index);
    let mut next_failure: Vec<f64> = model.rates[..levels]
        .iter()
        .map(|r| exponential(&mut rng, *r))
        .collect();
    let mut failures = vec![0u32; levels];
    // Computed time of the last checkpoint covering each level, and of
    // each level's next checkpoint.
    let mut last = vec![0.0f64; levels];
    let mut next: Vec<f64> = model.periods[..levels].to_vec();
    // Whether the current logging window was already recovered
    // asynchronously (see `Window`).
    let mut window_used = false;
    let (mut comp, mut wall) = (0.0f64, 0.0f64);
    let eps = 1e-9;
    let limit = model.planned * GIVE_UP;
    while comp < model.planned - eps && levels > 0 {
        if wall >= limit {
            break;
        }
        let dt = model.step.min(model.planned - comp);
        let after = comp + dt;
        let due = (0..levels).rev().find(|&j| after + eps >= next[j]);
        // A checkpoint of level j writes levels 1..=j, as `opt_par`'s
        // pattern cost (sum of N_i C_i) counts it and as frame promotes.
        let end = wall + dt + due.map_or(0.0, |j| model.checkpoint[..=j].iter().sum::<f64>());
        let (lvl, at) =
            next_failure
                .iter()
                .copied()
                .enumerate()
                .fold(
                    (0, f64::INFINITY),
                    |b, (i, t)| if t < b.1 { (i, t) } else { b },
                );
        if at > end {
            wall = end;
            comp = after;
            if let Some(j) = due {
                for i in 0..=j {
                    last[i] = after;
                    next[i] = after + model.periods[i];
                }
                window_used = false;
            }
            continue;
        }
        // A failure of level `lvl` during this step or its checkpoint; one
        // during a recovery is handled after that recovery.
        failures[lvl] += 1;
        next_failure[lvl] = at + exponential(&mut rng, model.rates[lvl]);
        let start = at.max(wall);
        let gray = (at - wall).clamp(0.0, dt);
        let asynchronous = match model.strategy {
            Strategy::Async {
                levels: l, window, ..
            } => lvl < l && (window == Window::Unlimited || !window_used),
            Strategy::Coordinated => false,
        };
        match model.strategy {
            Strategy::Async { k, window, .. } if asynchronous => {
                let lost = comp - last[lvl] + gray;
                wall = start + model.recovery[lvl] + lost / k.max(1.0);
                window_used = true;
                if window == Window::OnceThenCheckpoint {
                    wall += model.checkpoint[0];
                    last[0] = comp;
                    next[0] = comp + model.periods[0];
                }
            }
            _ => {
                wall = start + model.recovery[lvl];
                comp = last[lvl];
                for i in 0..levels {
                    last[i] = last[i].min(comp);
                    next[i] = last[i] + model.periods[i];
                }
                window_used = false;
            }
        }
    }
    Run {
        overhead: wall - model.planned,
        failures,
        finished: comp >= model.planned - eps,
    }
}

/// Statistics over many runs.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    /// Runs simulated.
    pub runs: u64,
    /// Mean overhead, seconds.
    pub mean: f64,
    /// Standard deviation of the overhead, seconds.
    pub sd: f64,
    /// Half-width of the 95 % confidence interval of the mean, seconds.
    pub ci95: f64,
    /// Mean failures of each level per run.
    pub failures: Vec<f64>,
    /// Runs that did not finish (see [`Run::finished`]); their overhead
    /// counts as a lower bound.
    pub unfinished: u64,
}

/// Simulates runs `0..runs` of `model` for `seed` on every core; the result
/// depends only on the model, the seed and `runs`.
pub fn simulate(model: &Model, runs: u64, seed: u64) -> Summary {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    let threads = threads.clamp(1, runs.max(1));
    let results: Vec<Run> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    (0..runs)
                        .filter(|i| i % threads == t)
                        .map(|i| (i, run_once(model, seed, i)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut all: Vec<(u64, Run)> = handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect();
        all.sort_by_key(|(i, _)| *i);
        all.into_iter().map(|(_, r)| r).collect()
    });
    summarize(&results, model.levels())
}

fn summarize(results: &[Run], levels: usize) -> Summary {
    let n = results.len().max(1) as f64;
    let mean = results.iter().map(|r| r.overhead).sum::<f64>() / n;
    let var = results
        .iter()
        .map(|r| (r.overhead - mean).powi(2))
        .sum::<f64>()
        / (n - 1.0).max(1.0);
    let sd = var.sqrt();
    let failures = (0..levels)
        .map(|l| {
            results
                .iter()
                .map(|r| f64::from(r.failures.get(l).copied().unwrap_or(0)))
                .sum::<f64>()
                / n
        })
        .collect();
    Summary {
        unfinished: results.iter().filter(|r| !r.finished).count() as u64,
        runs: results.len() as u64,
        mean,
        sd,
        ci95: 1.96 * sd / n.sqrt(),
        failures,
    }
}

#[cfg(test)]
mod tests;
