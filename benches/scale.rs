//! Runtime recovery as the job grows: heat2d on 16, 64, 256 and 1024 ranks
//! (16 ranks per virtual node, one spare node), one rank killed at step
//! 150 of 300, then one node killed (restored from level 2), each
//! recovered online. Node-local storage is on `/dev/shm` (a RAM disk)
//! when the machine has one.
//!
//! Per size and failure it prints the medians of: the runtime's recovery
//! (detection to the release of the world barrier), the whole recovery
//! (detection to the end of the last rank's load), the CPU the root and
//! the ranks spent on it (from the metrics records), the machine's busy
//! time over the same window (`/proc/stat`: every process, the daemons
//! and managers too), the bound that busy time sets on this machine's
//! cores (busy / cores: no schedule finishes sooner), the whole recovery
//! against that bound, the messages the root read, and the start-up
//! (launch to the first release). Growth is against the smallest size.
//!
//! The medians go to `target/scale.json` (the sizes of this run only),
//! which `frame sim --project-scale FILE` projects past this machine.
//!
//! Run: `cargo bench --bench scale [-- --sizes 16,64 --runs 3]`.

mod support;

use frame_cli::sim::scale::{Kind, Measured, Phases, Size};
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Ranks per virtual node.
const PER_NODE: usize = 16;

/// The machine's busy time so far, nanoseconds (`/proc/stat`'s first
/// line: every state but idle and iowait, in ticks of 10 ms).
fn busy_ns() -> u64 {
    let text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let Some(line) = text.lines().next() else {
        return 0;
    };
    let fields: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    let busy: u64 = fields
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 3 && *i != 4)
        .map(|(_, v)| v)
        .sum();
    // USER_HZ is 100 on Linux.
    busy * 10_000_000
}

/// Samples the machine's busy time every few milliseconds while a job
/// runs: (wall clock ns since the Unix epoch, busy ns).
struct Sampler {
    samples: Arc<Mutex<Vec<(u64, u64)>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Sampler {
    fn start() -> Self {
        let samples = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (s, st) = (Arc::clone(&samples), Arc::clone(&stop));
        let thread = std::thread::spawn(move || {
            while !st.load(Ordering::Relaxed) {
                let at = frame::metrics::now_ns();
                s.lock().unwrap().push((at, busy_ns()));
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        Self {
            samples,
            stop,
            thread: Some(thread),
        }
    }

    /// Busy nanoseconds between two wall-clock stamps (from the samples
    /// around them).
    fn busy_between(&self, from: u64, to: u64) -> u64 {
        let s = self.samples.lock().unwrap();
        let before = s.iter().rev().find(|(at, _)| *at <= from).map(|x| x.1);
        let after = s.iter().find(|(at, _)| *at >= to).map(|x| x.1);
        match (before, after) {
            (Some(a), Some(b)) => b.saturating_sub(a),
            _ => 0,
        }
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// What one run measured.
#[derive(Clone, Copy, Default)]
struct Run {
    runtime_ms: f64,
    total_ms: f64,
    root_cpu_ms: f64,
    ranks_cpu_ms: f64,
    busy_ms: f64,
    messages: f64,
    startup_ms: f64,
    phases: Phases,
}

impl Run {
    fn cpu_ms(&self) -> f64 {
        self.root_cpu_ms + self.ranks_cpu_ms
    }
}

/// Runs heat2d on `ranks` ranks, killing `victim` (`rank:R` or `node:N`)
/// at step 150, and reads its metrics.
fn run(exe: &Path, ranks: usize, victim: &str, dir: &Path) -> Run {
    let metrics = dir.join("metrics.jsonl");
    let _ = std::fs::remove_file(&metrics);
    let _ = std::fs::remove_dir_all(dir.join("local"));
    let nodes = (ranks / PER_NODE).max(1);
    let per_node = ranks / nodes;
    let sampler = Sampler::start();
    let mut cmd = Command::new(exe);
    cmd.args(["--nodes", &nodes.to_string()])
        .args(["--ranks-per-node", &per_node.to_string()])
        .args(["--spare-nodes", "1"])
        .args([
            "--nx", "1024", "--ny", "1024", "--steps", "300", "--every", "50",
        ])
        .args(["--inject", &format!("{victim}@iter=150")])
        .arg("--metrics")
        .arg(&metrics)
        .env("FRAME_METRICS_FILE", &metrics)
        .env("FRAME_STORAGE_LOCAL_DIR", dir.join("local"))
        .env("FRAME_L2_INTERVAL", "1")
        // heat2d's errors (every rank's interrupted call) would capture a
        // backtrace each when the shell asks for them: not frame's cost.
        .env_remove("RUST_BACKTRACE")
        .env_remove("RUST_LIB_BACKTRACE");
    support::timed(&mut cmd, &format!("{ranks} ranks, {victim} killed"));
    let text = std::fs::read_to_string(&metrics).expect("metrics");
    let lines: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let event = |name: &str| lines.iter().find(|v| v["event"] == name).cloned();
    let runtime = event("runtime_recovery").expect("a runtime recovery");
    let recovery = event("recovery").expect("a recovery");
    let start = event("runtime_start").unwrap_or_default();
    let u = |v: &Value, k: &str| v[k].as_u64().unwrap_or(0);
    let f = |v: &Value, k: &str| v[k].as_f64().unwrap_or(0.0);
    let (detected, resumed) = (u(&runtime, "detected_ns"), u(&recovery, "resumed_ns"));
    let between = |from: u64, to: u64| to.saturating_sub(from) as f64 / 1e6;
    let (sent, last_ready) = (u(&runtime, "reinit_sent_ns"), u(&runtime, "last_ready_ns"));
    let barrier = u(&runtime, "barrier_ns");
    Run {
        runtime_ms: f(&runtime, "runtime_recovery_ms"),
        total_ms: between(detected, resumed),
        root_cpu_ms: f(&runtime, "root_cpu_ms"),
        ranks_cpu_ms: f(&recovery, "ranks_cpu_ms"),
        busy_ms: sampler.busy_between(detected, resumed) as f64 / 1e6,
        messages: f(&runtime, "root_messages"),
        startup_ms: f(&start, "startup_ms"),
        // As `frame report` splits them.
        phases: Phases {
            decide: between(detected, sent),
            unwind: between(sent, last_ready),
            release: between(last_ready, barrier),
            deliver: between(barrier, u(&recovery, "released_ns")),
            reentry: f(&recovery, "reentry_ms"),
            identify: f(&recovery, "identify_ms"),
            fetch: f(&recovery, "fetch_ms"),
            load: f(&recovery, "load_ms"),
        },
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

fn sizes() -> Vec<usize> {
    std::env::args()
        .skip_while(|a| a != "--sizes")
        .nth(1)
        .map(|s| s.split(',').filter_map(|n| n.parse().ok()).collect())
        .unwrap_or_else(|| vec![16, 64, 256, 1024])
}

fn main() {
    let exe = support::heat2d();
    let runs = support::runs(3);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    // Node-local storage on a RAM disk, as level 1 is meant to be (a
    // disk's journal would be measured, not the recovery).
    let shm = Path::new("/dev/shm");
    let dir = if shm.is_dir() {
        tempfile::tempdir_in(shm)
    } else {
        tempfile::tempdir()
    }
    .expect("temp dir");
    println!(
        "heat2d 1024x1024, 300 steps, checkpoints every 50 (level 2 each), killed at step 150; \
         {PER_NODE} ranks per node + 1 spare; {cores} cores; node-local storage in {}; \
         medians of {runs} run(s); milliseconds",
        dir.path().display()
    );
    println!(
        "{:>6} {:>5} | {:>9} {:>9} {:>9} {:>9} {:>9} {:>7} | {:>7} {:>9} | {:>9}",
        "ranks",
        "kill",
        "runtime",
        "total",
        "CPU",
        "busy",
        "bound",
        "x bound",
        "growth",
        "root msgs",
        "start-up"
    );
    let mut base: [Option<f64>; 2] = [None, None];
    let mut measured = Measured {
        cores: cores as f64,
        ranks_per_node: PER_NODE as f64,
        sizes: Vec::new(),
    };
    for ranks in sizes() {
        for (k, (kind, victim)) in [
            (Kind::Rank, format!("rank:{}", ranks - 1)),
            (Kind::Node, "node:1".to_string()),
        ]
        .into_iter()
        .enumerate()
        {
            if kind == Kind::Node && ranks < 2 * PER_NODE {
                continue;
            }
            let all: Vec<Run> = (0..runs)
                .map(|_| run(&exe, ranks, &victim, dir.path()))
                .collect();
            let m = |f: &dyn Fn(&Run) -> f64| median(all.iter().map(f).collect());
            let total = m(&|r| r.total_ms);
            let bound = m(&|r| r.busy_ms) / cores as f64;
            let growth = total / *base[k].get_or_insert(total);
            println!(
                "{:>6} {:>5} | {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>7.2} | {:>6.1}x {:>9.0} | {:>9.0}",
                ranks,
                kind.name(),
                m(&|r| r.runtime_ms),
                total,
                m(&Run::cpu_ms),
                m(&|r| r.busy_ms),
                bound,
                if bound > 0.0 { total / bound } else { 0.0 },
                growth,
                m(&|r| r.messages),
                m(&|r| r.startup_ms)
            );
            let phase = |i: usize| m(&|r| r.phases.named()[i].1);
            measured.sizes.push(Size {
                ranks: ranks as f64,
                kind,
                runtime_ms: m(&|r| r.runtime_ms),
                total_ms: total,
                root_cpu_ms: m(&|r| r.root_cpu_ms),
                ranks_cpu_ms: m(&|r| r.ranks_cpu_ms),
                root_messages: m(&|r| r.messages),
                phases: Phases {
                    decide: phase(0),
                    unwind: phase(1),
                    release: phase(2),
                    deliver: phase(3),
                    reentry: phase(4),
                    identify: phase(5),
                    fetch: phase(6),
                    load: phase(7),
                },
            });
        }
    }
    let path = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("..")
        .join("scale.json");
    std::fs::write(
        &path,
        serde_json::to_string_pretty(&measured).expect("json"),
    )
    .expect("write the measurements");
    println!(
        "measurements written to {} (frame sim --project-scale FILE projects them past this machine)",
        path.display()
    );
}
