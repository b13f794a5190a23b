//! Deadlines a slow or loaded machine does not trip.
//!
//! Every wait of a test (a child's exit, a line of its output, rank
//! threads) is bounded by a [`Patience`] of some `limit` rather than by
//! the wall clock. It runs out in two ways only:
//! - **spinning**: the test's processes (this test binary and every
//!   process it started, alive or reaped) used `cores × limit` of CPU
//!   time since the wait began: work that should have ended did not;
//! - **stuck**: they used almost no CPU (under 5% of one core) for
//!   `limit` of wall time at a stretch: nothing is happening.
//!
//! On an idle machine neither comes sooner than a wall-clock deadline of
//! `limit` would (the processes cannot use more than `cores` seconds of
//! CPU a second), while a machine that is slower, or busy with other
//! users' work, only stretches the wall time a wait may take: the test's
//! processes still progress, so they are never "stuck", and their CPU
//! budget does not depend on how fast they get it.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// How often a waiting test looks at its processes.
pub const SLICE: Duration = Duration::from_millis(200);

/// Below this share of one core, the test's processes count as doing
/// nothing.
const IDLE_SHARE: f64 = 0.05;

/// The patience of one wait (see the module's documentation).
pub struct Patience {
    /// Whose CPU counts: the process and its descendants.
    root: u32,
    limit: Duration,
    began: Instant,
    start_cpu: Duration,
    budget: Duration,
    /// (when, CPU used by then), the oldest first, spanning about `limit`.
    samples: VecDeque<(Instant, Duration)>,
}

impl Patience {
    /// Starts a wait of `limit` on the test's own work: this process
    /// (its threads, such as rank threads) and every process it started.
    pub fn new(limit: Duration) -> Self {
        Self::of(std::process::id(), limit)
    }

    /// Starts a wait of `limit` on the work of process `pid` and its
    /// descendants (a child the test started, whatever else the test
    /// binary runs meanwhile).
    pub fn of(pid: u32, limit: Duration) -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
        let now = tree_cpu(pid);
        let began = Instant::now();
        Self {
            root: pid,
            limit,
            began,
            start_cpu: now,
            budget: limit * cores,
            samples: VecDeque::from([(began, now)]),
        }
    }

    /// Why the wait is over, if it is.
    pub fn exhausted(&mut self) -> Option<String> {
        let now = Instant::now();
        let cpu = tree_cpu(self.root);
        self.samples.push_back((now, cpu));
        // Keep one sample at least `limit` old to measure the stretch.
        while self.samples.len() > 2 && now.duration_since(self.samples[1].0) >= self.limit {
            self.samples.pop_front();
        }
        let used = cpu.saturating_sub(self.start_cpu);
        let waited = now.duration_since(self.began);
        if used >= self.budget {
            return Some(format!(
                "used {:.1} s of CPU (the budget of a {:?} wait) in {:.1} s",
                used.as_secs_f64(),
                self.limit,
                waited.as_secs_f64()
            ));
        }
        let (then, cpu_then) = self.samples[0];
        let stretch = now.duration_since(then);
        if stretch >= self.limit {
            let share = cpu.saturating_sub(cpu_then).as_secs_f64() / stretch.as_secs_f64();
            if share < IDLE_SHARE {
                return Some(format!(
                    "nothing ran for {:.1} s ({:.1}% of a core), after {:.1} s and {:.1} s of CPU",
                    stretch.as_secs_f64(),
                    share * 100.0,
                    waited.as_secs_f64(),
                    used.as_secs_f64()
                ));
            }
        }
        None
    }

    /// Waits with `poll` (given at most a [`SLICE`] to wait each time)
    /// until it returns something or the patience runs out (`Err` says
    /// why).
    pub fn wait<T>(&mut self, mut poll: impl FnMut(Duration) -> Option<T>) -> Result<T, String> {
        loop {
            if let Some(v) = poll(SLICE) {
                return Ok(v);
            }
            if let Some(why) = self.exhausted() {
                return Err(why);
            }
        }
    }
}

/// The CPU time used so far by process `root` and its descendants: those
/// alive, and through their parents' counts those that ended and were
/// waited for.
pub fn tree_cpu(root: u32) -> Duration {
    let me = root;
    let mut parent_of: HashMap<u32, u32> = HashMap::new();
    let mut ticks_of: HashMap<u32, u64> = HashMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Duration::ZERO;
    };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // After the command's closing parenthesis: state, ppid, ... with
        // utime, stime, cutime and cstime the 12th to 15th fields.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.len() < 15 {
            continue;
        }
        let n = |i: usize| fields[i].parse::<u64>().unwrap_or(0);
        parent_of.insert(pid, n(1) as u32);
        ticks_of.insert(pid, n(11) + n(12) + n(13) + n(14));
    }
    let mut total = 0u64;
    for (&pid, &ticks) in &ticks_of {
        let mut p = pid;
        // Walk up at most 64 generations to this process.
        for _ in 0..64 {
            if p == me {
                total += ticks;
                break;
            }
            match parent_of.get(&p) {
                Some(&pp) if pp > 1 => p = pp,
                _ => break,
            }
        }
    }
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Duration::from_micros(total * 1_000_000 / hz)
}

/// Checks `ready` every `every` until it returns something, with the
/// [`Patience`] of `limit` (`Err` says why it ran out).
pub fn poll<T>(
    limit: Duration,
    every: Duration,
    mut ready: impl FnMut() -> Option<T>,
) -> Result<T, String> {
    Patience::new(limit).wait(|slice| {
        let until = Instant::now() + slice;
        loop {
            if let Some(v) = ready() {
                return Some(v);
            }
            if Instant::now() >= until {
                return None;
            }
            std::thread::sleep(every);
        }
    })
}
