//! When `snapshot()` turns into a checkpoint.
//!
//! Every rank must take the same decision at the same call. Counting calls is
//! trivially consistent. A time interval is not (clocks and progress differ),
//! so until it is calibrated the schedule asks all ranks once per call
//! (max of the elapsed times); after each checkpoint it converts the interval
//! into a number of calls from the agreed duration of the calls since the
//! previous one, and counts calls from then on.

use crate::comm::{Comm, CommResult, ReduceOp};
use crate::config::Interval;
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
}

impl Schedule {
    pub(crate) fn new(interval: Interval) -> Self {
        Self {
            interval,
            calls: 0,
            since: Instant::now(),
            calls_per_interval: None,
        }
    }

    /// Counts one `snapshot()` call; returns whether it should checkpoint.
    /// Collective until a time interval is calibrated.
    pub(crate) fn due(&mut self, comm: &dyn Comm) -> CommResult<bool> {
        self.calls += 1;
        match (self.interval, self.calls_per_interval) {
            (Interval::Calls(n), _) => Ok(self.calls >= n),
            (Interval::Every(_), Some(n)) => Ok(self.calls >= n),
            (Interval::Every(every), None) => {
                let mut elapsed = [micros(self.since.elapsed())];
                comm.all_reduce_u64(&mut elapsed, ReduceOp::Max)?;
                Ok(elapsed[0] >= micros(every))
            }
        }
    }

    /// Records that a checkpoint was written at this call. Collective for
    /// time intervals (the ranks agree on the calibration).
    pub(crate) fn checkpointed(&mut self, comm: &dyn Comm) -> CommResult<()> {
        if let Interval::Every(every) = self.interval {
            let mut elapsed = [micros(self.since.elapsed())];
            comm.all_reduce_u64(&mut elapsed, ReduceOp::Max)?;
            self.calls_per_interval = Some(calls_per(every, elapsed[0], self.calls));
        }
        self.calls = 0;
        self.since = Instant::now();
        Ok(())
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
mod tests {
    use super::*;
    use crate::comm::LocalComm;

    #[test]
    fn calls_interval_counts_calls() {
        let comm = LocalComm::world(1, 1).pop().unwrap();
        let mut s = Schedule::new(Interval::Calls(3));
        let mut taken = Vec::new();
        for call in 1..=9 {
            if s.due(&comm).unwrap() {
                taken.push(call);
                s.checkpointed(&comm).unwrap();
            }
        }
        assert_eq!(taken, vec![3, 6, 9]);
    }

    #[test]
    fn calibration_converts_time_to_calls() {
        // 10 calls in 50 ms: 5 ms per call, so 1 s is 200 calls.
        assert_eq!(calls_per(Duration::from_secs(1), 50_000, 10), 200);
        assert_eq!(calls_per(Duration::from_millis(1), 50_000, 10), 1);
        assert_eq!(calls_per(Duration::from_secs(1), 0, 0), 1_000_000);
    }
}
