//! When `snapshot()` turns into a checkpoint.
//!
//! Every rank must take the same decision at the same call. Counting calls is
//! trivially consistent. A time interval is not (clocks and progress differ),
//! so until it is calibrated the schedule asks all ranks once per call
//! (max of the elapsed times); after each checkpoint it converts the interval
//! into a number of calls from the agreed duration of the calls since the
//! previous one, and counts calls from then on.
//!
//! An automatic interval (`"auto"`) is a time interval that the
//! [`Tuner`] chooses again after each checkpoint from the agreed cost of
//! that checkpoint (the slowest rank's).

use super::tuning::{Choice, Tuner};
use crate::comm::{Comm, CommResult, ReduceOp};
use crate::config::{Config, Interval};
use crate::level::Level;
use std::time::{Duration, Instant};

/// Decides which `snapshot()` calls write a checkpoint.
#[derive(Debug)]
pub(crate) struct Schedule {
    interval: Interval,
    /// Calls since the last checkpoint.
    calls: u64,
    /// When the last checkpoint (or the start) happened.
    since: Instant,
    /// For time intervals: calls per interval, once calibrated.
    calls_per_interval: Option<u64>,
    /// For automatic intervals.
    tuner: Option<Tuner>,
}

impl Schedule {
    pub(crate) fn new(interval: Interval) -> Self {
        Self {
            interval,
            calls: 0,
            since: Instant::now(),
            calls_per_interval: None,
            tuner: None,
        }
    }

    /// The schedule `cfg` asks for; with automatic intervals, tuned for
    /// level 1 and every level above it whose interval is `"auto"`.
    pub(crate) fn for_config(cfg: &Config) -> Self {
        let mut me = Self::new(cfg.snapshot.interval);
        if cfg.snapshot.interval == Interval::Auto {
            let levels: Vec<Level> = [Level::L1, Level::L2, Level::L3, Level::L4]
                .into_iter()
                .filter(|l| *l == Level::L1 || cfg.level_interval(*l) == Interval::Auto)
                .collect();
            let mtbf: Vec<Duration> = levels
                .iter()
                .map(|l| {
                    let i = l.number() as usize - 1;
                    cfg.auto
                        .mtbf
                        .get(i)
                        .copied()
                        .unwrap_or(Duration::from_secs(86400))
                })
                .collect();
            me.tuner = Some(Tuner::new(levels, &mtbf));
        }
        me
    }

    /// The automatic intervals in force, if any.
    pub(crate) fn choice(&self) -> Option<&Choice> {
        self.tuner.as_ref().map(Tuner::choice)
    }

    /// The time interval in force, if the interval is one.
    fn every(&self) -> Option<Duration> {
        match self.interval {
            Interval::Every(d) => Some(d),
            Interval::Auto => self.choice().map(|c| c.period),
            Interval::Calls(_) => None,
        }
    }

    /// How many more calls until the one that checkpoints (that one
    /// included), when the schedule counts calls.
    pub(crate) fn calls_left(&self) -> Option<u64> {
        let n = match self.interval {
            Interval::Calls(n) => n,
            _ => self.calls_per_interval?,
        };
        Some(n.saturating_sub(self.calls).max(1))
    }

    /// Counts one `snapshot()` call; returns whether it should checkpoint.
    /// Collective until a time interval is calibrated.
    pub(crate) fn due(&mut self, comm: &dyn Comm) -> CommResult<bool> {
        self.calls += 1;
        if let Interval::Calls(n) = self.interval {
            return Ok(self.calls >= n);
        }
        if self.tuner.as_ref().is_some_and(|t| !t.measured()) {
            // Measure a checkpoint's cost right away (every rank alike).
            return Ok(true);
        }
        match (self.every(), self.calls_per_interval) {
            (_, Some(n)) => Ok(self.calls >= n),
            (Some(every), None) => {
                let mut elapsed = [micros(self.since.elapsed())];
                comm.all_reduce_u64(&mut elapsed, ReduceOp::Max)?;
                Ok(elapsed[0] >= micros(every))
            }
            (None, None) => Ok(false),
        }
    }

    /// Records that a checkpoint was written at this call, which blocked
    /// this rank for `cost` and went up to level `highest`. Collective for
    /// time intervals (the ranks agree on the calibration and the cost).
    /// Returns the automatic intervals when they were chosen again.
    pub(crate) fn checkpointed(
        &mut self,
        comm: &dyn Comm,
        cost: Duration,
        highest: Level,
    ) -> CommResult<Option<Choice>> {
        let mut chosen = None;
        if self.every().is_some() {
            let mut agreed = [micros(self.since.elapsed()), micros(cost)];
            comm.all_reduce_u64(&mut agreed, ReduceOp::Max)?;
            if let Some(t) = self.tuner.as_mut() {
                chosen = t
                    .observe(highest, Duration::from_micros(agreed[1]))
                    .cloned();
            }
            if let Some(every) = self.every() {
                self.calls_per_interval = Some(calls_per(every, agreed[0], self.calls));
            }
        }
        self.calls = 0;
        self.since = Instant::now();
        Ok(chosen)
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// Number of calls that fill `every`, given that `calls` calls took `elapsed_us`.
fn calls_per(every: Duration, elapsed_us: u64, calls: u64) -> u64 {
    let per_call = (elapsed_us as f64 / calls.max(1) as f64).max(1.0);
    ((micros(every) as f64 / per_call).round() as u64).max(1)
}

#[cfg(test)]
mod tests;
