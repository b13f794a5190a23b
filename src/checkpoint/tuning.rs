//! Automatic checkpoint intervals (`snapshot.interval = "auto"`): from the
//! configured mean time between failures of each level and the checkpoint
//! costs measured while the program runs, the optimal multi-level pattern
//! ([`opt_par`]) gives how much computation goes between two
//! checkpoints and how often each automatic level above 1 is promoted.
//!
//! [`choose`] is the pure computation; [`Tuner`] keeps a running estimate
//! of each level's cost (the time the program was blocked by a checkpoint
//! whose highest level it was) and chooses again when the estimate moves.
//! Every rank feeds it the same agreed costs, so every rank chooses alike.
//! The first checkpoint is taken at the first opportunity, to measure a
//! cost instead of trusting the assumed one for a whole period.

use crate::level::Level;
use std::time::Duration;

/// The optimal multi-level pattern for failure rates `lam` (per second,
/// one per level, lowest first) and checkpoint costs `c` (seconds): the
/// number of checkpoints of each level in a pattern, and the pattern's
/// length in seconds of computation.
///
/// ```
/// let (n, w) = frame::opt_par(&[1.0 / 1800.0, 1.0 / 36000.0], &[1.0, 6.0]);
/// assert!((n[0] - 10.95).abs() < 0.01 && (n[1] - 1.0).abs() < 1e-12);
/// assert!((w - 657.0).abs() < 1.0);
/// ```
pub fn opt_par(lam: &[f64], c: &[f64]) -> (Vec<f64>, f64) {
    let last = lam.len().min(c.len()).saturating_sub(1);
    let mut n = Vec::with_capacity(last + 1);
    let (mut top, mut bottom) = (0.0, 0.0);
    for i in 0..=last {
        let ni = (c[last] * lam[i] / lam[last] / c[i]).sqrt();
        top += ni * c[i];
        bottom += lam[i] / ni;
        n.push(ni);
    }
    (n, (2.0 * top / bottom).sqrt())
}

/// The cost assumed for a level before one of its checkpoints is measured.
const ASSUMED_COST: f64 = 1.0;
/// Weight of a new measurement in the running estimate.
const WEIGHT: f64 = 0.25;
/// A new choice is adopted when the period moves by more than this.
const CHANGE: f64 = 0.10;
/// Bounds of the period between checkpoints.
const MIN_PERIOD: Duration = Duration::from_millis(10);
const MAX_PERIOD: Duration = Duration::from_secs(7 * 24 * 3600);

/// Automatic intervals.
#[derive(Clone, Debug, PartialEq)]
pub struct Choice {
    /// Time between two checkpoints (each one at level 1).
    pub period: Duration,
    /// For each automatic level above 1: promote every this many
    /// checkpoints.
    pub every: Vec<(Level, u64)>,
}

/// The intervals for `levels` (level 1 first, then the automatic levels
/// above it, ascending) with failure rates `rates` (per second, one per
/// level: the failures each level is the lowest to recover from) and
/// checkpoint costs `costs` (seconds).
///
/// (The example of *Coordinated checkpointing with logging of transmitted
/// data and asynchronous recovery*, N1 = 10.95 level-1 checkpoints in a
/// 657 s pattern, is a unit test below.)
pub(crate) fn choose(levels: &[Level], rates: &[f64], costs: &[f64]) -> Choice {
    let (n1, w, exact) = pattern(rates, costs);
    let period = Duration::try_from_secs_f64(w / n1)
        .unwrap_or(MAX_PERIOD)
        .clamp(MIN_PERIOD, MAX_PERIOD);
    let every = levels
        .iter()
        .skip(1)
        .zip(exact)
        .map(|(level, x)| (*level, x.round().clamp(1.0, 1e9) as u64))
        .collect();
    Choice { period, every }
}

/// The optimal pattern: level-1 checkpoints per pattern, the pattern's
/// length, and for each level above 1 the exact (unrounded) number of
/// checkpoints between two of its promotions (1 where undefined).
fn pattern(rates: &[f64], costs: &[f64]) -> (f64, f64, Vec<f64>) {
    let (n, w) = opt_par(rates, costs);
    let n1 = n
        .first()
        .copied()
        .filter(|v| v.is_finite() && *v > 0.0)
        .unwrap_or(1.0);
    let exact = n
        .iter()
        .skip(1)
        .map(|ni| {
            if ni.is_finite() && *ni > 0.0 {
                n1 / ni
            } else {
                1.0
            }
        })
        .collect();
    (n1, w, exact)
}

/// Running cost estimates and the intervals chosen from them.
#[derive(Clone, Debug)]
pub(crate) struct Tuner {
    levels: Vec<Level>,
    rates: Vec<f64>,
    costs: Vec<Option<f64>>,
    chosen: Choice,
}

impl Tuner {
    /// A tuner for `levels` (level 1 first) with mean times between
    /// failures `mtbf` (one per level); starts from an assumed cost of one
    /// second per level.
    pub(crate) fn new(levels: Vec<Level>, mtbf: &[Duration]) -> Self {
        let rates: Vec<f64> = mtbf
            .iter()
            .map(|m| 1.0 / m.as_secs_f64().max(1e-3))
            .collect();
        let chosen = choose(&levels, &rates, &vec![ASSUMED_COST; levels.len()]);
        Self {
            costs: vec![None; levels.len()],
            levels,
            rates,
            chosen,
        }
    }

    /// The intervals in force.
    pub(crate) fn choice(&self) -> &Choice {
        &self.chosen
    }

    /// Whether any checkpoint's cost was measured yet.
    pub(crate) fn measured(&self) -> bool {
        self.costs.iter().any(Option::is_some)
    }

    /// Records that a checkpoint whose highest level was `highest` blocked
    /// the program for `cost`; returns the new intervals when they moved
    /// enough to change.
    pub(crate) fn observe(&mut self, highest: Level, cost: Duration) -> Option<&Choice> {
        let i = self.levels.iter().rposition(|l| *l <= highest)?;
        let c = cost.as_secs_f64();
        self.costs[i] = Some(match self.costs[i] {
            Some(old) => old + WEIGHT * (c - old),
            None => c,
        });
        let costs = self.estimates();
        let mut next = choose(&self.levels, &self.rates, &costs);
        // A promotion count changes only once its exact value has left the
        // old count by half a step plus CHANGE, so that a value near a
        // rounding boundary does not flip the choice at every checkpoint.
        let (_, _, exact) = pattern(&self.rates, &costs);
        for ((_, k), (&(_, old), x)) in next
            .every
            .iter_mut()
            .zip(self.chosen.every.iter().zip(exact))
        {
            let old_f = old as f64;
            if (x - old_f).abs() <= 0.5 + CHANGE * old_f {
                *k = old;
            }
        }
        let old = self.chosen.period.as_secs_f64();
        let moved = (next.period.as_secs_f64() - old).abs() > CHANGE * old
            || next.every != self.chosen.every;
        if moved {
            self.chosen = next;
            Some(&self.chosen)
        } else {
            None
        }
    }

    /// Each level's cost estimate: measured; or the nearest lower level's
    /// (a level costs the program at least what the levels below it do);
    /// or, with nothing measured below, the cheapest measured level above
    /// (a checkpoint of a higher level did this level's work too, so it
    /// bounds this one: the first checkpoint, which every level takes,
    /// measures them all); or the assumed cost.
    fn estimates(&self) -> Vec<f64> {
        let mut out = Vec::with_capacity(self.costs.len());
        for (i, c) in self.costs.iter().enumerate() {
            let below = self.costs[..i].iter().rev().find_map(|c| *c);
            let above = self.costs[i + 1..]
                .iter()
                .flatten()
                .copied()
                .reduce(f64::min);
            let estimate = c.or(below).or(above).unwrap_or(ASSUMED_COST);
            out.push(estimate.max(1e-6));
        }
        out
    }
}

#[cfg(test)]
mod tests;
