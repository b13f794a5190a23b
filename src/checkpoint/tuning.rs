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
mod tests {
    use super::*;

    #[test]
    fn the_papers_example_checkpoints_every_minute_and_promotes_every_eleventh() {
        let c = choose(
            &[Level::L1, Level::L2],
            &[1.0 / 1800.0, 1.0 / 36000.0],
            &[1.0, 6.0],
        );
        assert!((c.period.as_secs_f64() - 60.0).abs() < 0.5);
        assert_eq!(c.every, vec![(Level::L2, 11)]);
    }

    #[test]
    fn one_level_follows_youngs_period() {
        // With one level, opt_par is Young's formula: sqrt(2 C M).
        let c = choose(&[Level::L1], &[1.0 / 3600.0], &[2.0]);
        assert!((c.period.as_secs_f64() - (2.0f64 * 2.0 * 3600.0).sqrt()).abs() < 0.01);
        assert!(c.every.is_empty());
    }

    #[test]
    fn costlier_or_rarer_levels_are_promoted_less_often() {
        let levels = [Level::L1, Level::L2, Level::L4];
        let rates = [1.0 / 600.0, 1.0 / 7200.0, 1.0 / 86400.0];
        let c = choose(&levels, &rates, &[0.5, 0.5, 0.5]);
        let k: Vec<u64> = c.every.iter().map(|(_, k)| *k).collect();
        assert!(k[0] > 1 && k[1] > k[0], "{c:?}");
        let dearer = choose(&levels, &rates, &[0.5, 0.5, 20.0]);
        assert!(dearer.every[1].1 > c.every[1].1, "{dearer:?} against {c:?}");
    }

    #[test]
    fn the_period_stays_within_bounds() {
        let c = choose(&[Level::L1], &[1e9], &[1e-9]);
        assert_eq!(c.period, MIN_PERIOD);
        let c = choose(&[Level::L1], &[1e-12], &[1e6]);
        assert_eq!(c.period, MAX_PERIOD);
    }

    #[test]
    fn intervals_converge_on_a_synthetic_cost_and_failure_profile() {
        let levels = vec![Level::L1, Level::L2, Level::L3];
        let mtbf = [
            Duration::from_secs(1800),
            Duration::from_secs(6 * 3600),
            Duration::from_secs(48 * 3600),
        ];
        let truth = [2.0, 5.0, 30.0];
        let mut t = Tuner::new(levels.clone(), &mtbf);
        // Checkpoints whose cost wobbles by +-20 % around the truth, each
        // level in the proportion the current choice promotes it.
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        for n in 1..=400u64 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let wobble = 0.8 + 0.4 * (rng % 1000) as f64 / 1000.0;
            let every = t.choice().every.clone();
            let highest = every
                .iter()
                .rev()
                .find(|(_, k)| n % k == 0)
                .map_or(Level::L1, |(l, _)| *l);
            let i = levels.iter().position(|l| *l == highest).unwrap();
            t.observe(highest, Duration::from_secs_f64(truth[i] * wobble));
        }
        let rates: Vec<f64> = mtbf.iter().map(|m| 1.0 / m.as_secs_f64()).collect();
        let ideal = choose(&levels, &rates, &truth);
        let got = t.choice();
        let ratio = got.period.as_secs_f64() / ideal.period.as_secs_f64();
        assert!((0.85..1.15).contains(&ratio), "{got:?} against {ideal:?}");
        for ((l, k), (_, ik)) in got.every.iter().zip(&ideal.every) {
            let r = *k as f64 / *ik as f64;
            assert!((0.7..1.4).contains(&r), "{l}: every {k} against {ik}");
        }
    }

    #[test]
    fn a_first_checkpoint_at_every_level_measures_them_all() {
        let mut t = Tuner::new(
            vec![Level::L1, Level::L2, Level::L4],
            &[
                Duration::from_secs(1),
                Duration::from_secs(2),
                Duration::from_secs(8),
            ],
        );
        let assumed = t.choice().period;
        let moved = t
            .observe(Level::L4, Duration::from_millis(50))
            .cloned()
            .expect("a new choice");
        assert_eq!(t.estimates(), vec![0.05, 0.05, 0.05]);
        // Costs 20x smaller: a period about sqrt(20) ~ 4.5x shorter.
        let ratio = assumed.as_secs_f64() / moved.period.as_secs_f64();
        assert!((4.0..5.0).contains(&ratio), "{ratio}");
        // A cheaper level-1 checkpoint measured later takes over below.
        t.observe(Level::L1, Duration::from_millis(10));
        assert_eq!(t.estimates(), vec![0.01, 0.01, 0.05]);
    }

    #[test]
    fn a_count_near_a_rounding_boundary_does_not_flip() {
        let levels = vec![Level::L1, Level::L2];
        let mtbf = [Duration::from_secs(100), Duration::from_secs(1000)];
        let mut t = Tuner::new(levels, &mtbf);
        // L2 every sqrt(10 * c2 / c1): with c2 / c1 = 0.62 that is 2.49,
        // rounded to 2; the running estimate wobbling across 2.5 (70 ms
        // alone takes it to 2.53) must not change it.
        t.observe(Level::L1, Duration::from_millis(100));
        t.observe(Level::L2, Duration::from_millis(40));
        for _ in 0..40 {
            t.observe(Level::L2, Duration::from_millis(62));
        }
        let k = t.choice().every[0].1;
        assert_eq!(k, 2);
        for c in [70u64, 55, 72, 54, 75, 52] {
            t.observe(Level::L2, Duration::from_millis(c));
            assert_eq!(t.choice().every[0].1, k, "after {c} ms");
        }
        // A real move (L2 now as dear as L1: every 3.2) changes it.
        for _ in 0..20 {
            t.observe(Level::L2, Duration::from_millis(100));
        }
        assert_eq!(t.choice().every[0].1, 3);
    }

    #[test]
    fn a_level_not_measured_yet_costs_what_the_one_below_does() {
        let mut t = Tuner::new(
            vec![Level::L1, Level::L2],
            &[Duration::from_secs(600), Duration::from_secs(6000)],
        );
        t.observe(Level::L1, Duration::from_secs(3));
        assert_eq!(t.estimates(), vec![3.0, 3.0]);
        t.observe(Level::L2, Duration::from_secs(9));
        assert_eq!(t.estimates(), vec![3.0, 9.0]);
    }
}
