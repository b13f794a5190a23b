//! The real-program experiment of *Coordinated checkpointing with logging
//! of transmitted data and asynchronous recovery*, scaled to this machine:
//! heat2d under coordinated (global) recovery and under `logged` recovery
//! with k = 2 and 5 processes per failed rank, failures drawn at the
//! paper's five MTBF pairs scaled by the ratio of heat2d's fault-free run
//! time to the paper's 3600 s. Run: `cargo bench --bench
//! logging_experiment [-- --runs N]`.
//!
//! - **The job.** heat2d 1024x1024 on 2 nodes x 1 rank, 4000 steps, with
//!   a spare node; levels 1 and 2. One rank per node and core: with more
//!   ranks than cores the same fault-free run took 8 to 14 s here.
//! - **Calibration** (medians of 3): the fault-free time without
//!   checkpoints (T, and the step time), a checkpoint's cost with level 1
//!   alone (C1) and with level 2 (C2), and the cost of a global recovery
//!   from a rank's failure (R1) and from a node's (R2), from the metrics:
//!   the runtime's part (detection to release) plus the program's.
//! - **The cells.** For each pair (MTBF1, MTBF2) x T / 3600, `frame sim`
//!   with the measured T, step, C and R gives the checkpoint periods
//!   (level 1 every so many steps, level 2 every so many level-1
//!   checkpoints) and its prediction. Each run draws level-1 failures (a
//!   random rank SIGKILLed) and level-2 failures (a random node's process
//!   group SIGKILLed, its storage removed; at most one a run, after the
//!   first level-2 copy) as
//!   exponential arrivals over the run, and the same draws are run under
//!   each of the three recoveries. Every run must end with the fault-free
//!   checksum.
//! - **The figures.** Overhead = time to solution - T; the reduction of
//!   the median overhead of each `logged` column against the coordinated
//!   one, beside the simulator's (means over 2000 simulated runs, one
//!   asynchronous recovery per logging window, as `logged` does) and the
//!   paper's measured range (13 to 47 % for k = 2, 23 to 53 % for k = 5).
//!
//! The machine's cores bound what k processes can gain: the recomputation
//! of k processes runs about min(k, cores) times faster, so the simulator
//! is also asked with k = min(k, cores).

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use support::heat2d;

const SIDE: &str = "1024";
const STEPS: u64 = 4000;
/// One spare node, so at most one level-2 failure a run (the figures in
/// docs/PERFORMANCE.md were measured so, while a global restart after a
/// second node failure could not find a stand-in spare's copies).
const SPARE_NODES: u32 = 1;
const RANKS: u32 = 2;
/// The paper's MTBF pairs (level 1, level 2) for its 3600 s job, seconds.
const MTBF: [(f64, f64); 5] = [
    (1800.0, 36000.0),
    (720.0, 3600.0),
    (360.0, 1800.0),
    (240.0, 1800.0),
    (180.0, 900.0),
];
/// The paper's measured reductions of overhead, percent (k = 2, k = 5).
const PAPER_RANGE: [(f64, f64); 2] = [(13.0, 47.0), (23.0, 53.0)];

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// What one heat2d run printed and took.
struct Outcome {
    wall: f64,
    checksum: String,
    /// Mean checkpoint cost rank 0 reported, seconds.
    checkpoint_s: f64,
    /// Failures the launcher injected.
    injected: usize,
    /// Recoveries that fell back to a global restart.
    fallbacks: usize,
    /// Each recovery's runtime and application parts summed, seconds
    /// (from the metrics).
    recoveries_s: Vec<f64>,
}

struct Bench {
    exe: PathBuf,
    dir: tempfile::TempDir,
}

impl Bench {
    /// Writes the configuration: level 1 every `every` steps, level 2
    /// every `l2` of them (0: no level 2).
    fn config(&self, l2: u64) -> PathBuf {
        let d = self.dir.path();
        let mut text = format!(
            "[job]\nid = \"experiment\"\n[storage]\nlocal_dir = \"{}\"\nglobal_dir = \"{}\"\n",
            d.join("local").display(),
            d.join("global").display()
        );
        if l2 > 0 {
            text += &format!("[l2]\ninterval = {l2}\nkeep_last = 1\n");
        }
        let path = d.join(format!("l2-{l2}.toml"));
        std::fs::write(&path, text).expect("write the configuration");
        path
    }

    fn run(&self, every: u64, l2: u64, recovery: &str, spares: u32, inject: &[String]) -> Outcome {
        let d = self.dir.path();
        let _ = std::fs::remove_dir_all(d.join("local"));
        let _ = std::fs::remove_dir_all(d.join("global"));
        let metrics = d.join("metrics.jsonl");
        let _ = std::fs::remove_file(&metrics);
        let mut cmd = Command::new(&self.exe);
        cmd.arg("--metrics")
            .arg(&metrics)
            .env("FRAME_METRICS_FILE", &metrics)
            .arg("--config")
            .arg(self.config(l2))
            .args([
                "--nodes",
                "2",
                "--ranks-per-node",
                "1",
                "--nx",
                SIDE,
                "--ny",
                SIDE,
            ])
            .args(["--steps", &STEPS.to_string(), "--every", &every.to_string()])
            .args(["--recovery", recovery, "--spares", &spares.to_string()])
            .args([
                "--spare-nodes",
                &SPARE_NODES.to_string(),
                "--max-failures",
                "1000",
            ])
            .env_remove("RUST_LOG");
        for spec in inject {
            cmd.args(["--inject", spec]);
        }
        let what = format!("heat2d ({recovery}, {inject:?})");
        let (wall, text) = support::timed(&mut cmd, &what);
        let checkpoint_s = text
            .lines()
            .find_map(|l| l.split("checkpoint(s), ").nth(1))
            .and_then(|r| r.split(" ms").next())
            .and_then(|ms| ms.parse::<f64>().ok())
            .map_or(0.0, |ms| ms / 1e3);
        Outcome {
            wall,
            checksum: text
                .lines()
                .find_map(|l| l.strip_prefix("final checksum: "))
                .unwrap_or("none")
                .to_string(),
            checkpoint_s,
            injected: text
                .lines()
                .filter(|l| l.starts_with("frame: injecting"))
                .count(),
            fallbacks: text
                .lines()
                .filter(|l| l.starts_with("frame: restarting globally"))
                .count(),
            recoveries_s: recoveries(&metrics),
        }
    }
}

/// Each recovery in the metrics file: the runtime's part (failure
/// detected to the ranks released) plus the program's (rank 0's record of
/// the same epoch), seconds.
fn recoveries(metrics: &Path) -> Vec<f64> {
    let records: Vec<serde_json::Value> = std::fs::read_to_string(metrics)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let of = |event: &'static str| records.iter().filter(move |r| r["event"] == event);
    of("runtime_recovery")
        .map(|run| {
            let program = of("recovery")
                .find(|r| r["epoch"] == run["epoch"])
                .and_then(|r| r["application_recovery_ms"].as_f64())
                .unwrap_or(0.0);
            (run["runtime_recovery_ms"].as_f64().unwrap_or(0.0) + program) / 1e3
        })
        .collect()
}

/// The simulator's mean overhead and checkpoint periods for one cell.
struct Sim {
    mean_s: f64,
    periods_s: Vec<f64>,
}

fn simulate(
    frame: &Path,
    t: f64,
    step: f64,
    mtbf: (f64, f64),
    c: [f64; 2],
    r: [f64; 2],
    strategy: &str,
) -> Sim {
    let out = Command::new(frame)
        .args(["sim", "--json", "--runs", "2000", "--async-window", "once"])
        .args(["--planned", &t.to_string(), "--step", &step.to_string()])
        .args(["--mtbf", &format!("{},{}", mtbf.0, mtbf.1)])
        .args(["--checkpoint", &format!("{},{}", c[0], c[1])])
        .args(["--recovery", &format!("{},{}", r[0], r[1])])
        .args(["--strategy", strategy])
        .output()
        .expect("run frame sim");
    assert!(
        out.status.success(),
        "frame sim: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("frame sim prints one JSON object");
    Sim {
        mean_s: v["mean_s"].as_f64().unwrap_or(f64::NAN),
        periods_s: v["periods_s"]
            .as_array()
            .map(|a| a.iter().filter_map(|p| p.as_f64()).collect())
            .unwrap_or_default(),
    }
}

/// Failures of one run: level-1 (a rank) and level-2 (a node) arrivals,
/// as `--inject` specs in the order they come, and how many level-2
/// arrivals came before `not_before` and were left out.
fn draw(seed: u64, mtbf: (f64, f64), horizon: f64, not_before: f64) -> (Vec<String>, usize) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut exp = |mean: f64| -mean * (1.0 - rng.f64()).ln();
    let mut events: Vec<(f64, Option<u32>)> = Vec::new();
    let mut t = exp(mtbf.0);
    while t < horizon {
        events.push((t, None));
        t += exp(mtbf.0);
    }
    let mut t = exp(mtbf.1);
    let (mut nodes, mut early) = (0, 0);
    while t < horizon && nodes < SPARE_NODES {
        if t < not_before {
            early += 1;
        } else {
            events.push((t, Some(0)));
            nodes += 1;
        }
        t += exp(mtbf.1);
    }
    events.sort_by(|a, b| a.0.total_cmp(&b.0));
    // The nodes that run ranks: a killed one's ranks go to the next spare.
    let mut live = [0u32, 1];
    let mut next_spare = 2;
    let mut pick = fastrand::Rng::with_seed(seed ^ 0x9e37_79b9);
    let specs = events
        .into_iter()
        .map(|(t, node)| {
            let ms = (t * 1e3).round() as u64;
            match node {
                None => format!("rank:{}@{ms}ms", pick.u32(0..RANKS)),
                Some(_) => {
                    let slot = pick.usize(0..2);
                    let victim = live[slot];
                    live[slot] = next_spare;
                    next_spare += 1;
                    format!("node:{victim}@{ms}ms")
                }
            }
        })
        .collect();
    (specs, early)
}

fn main() {
    let runs = support::runs(5);
    let frame = support::frame_cli();
    let bench = Bench {
        exe: heat2d(),
        dir: tempfile::tempdir().expect("temp dir"),
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    // Calibration.
    let never = STEPS + 1;
    let plain: Vec<Outcome> = (0..3)
        .map(|_| bench.run(never, 0, "online", 1, &[]))
        .collect();
    let reference = plain[0].checksum.clone();
    let t = median(plain.iter().map(|o| o.wall).collect());
    let step = t / STEPS as f64;
    let every = 100;
    let l1: Vec<Outcome> = (0..3)
        .map(|_| bench.run(every, 0, "online", 1, &[]))
        .collect();
    let l2: Vec<Outcome> = (0..3)
        .map(|_| bench.run(every, 1, "online", 1, &[]))
        .collect();
    let c1 = median(l1.iter().map(|o| o.checkpoint_s).collect());
    let c2 = median(l2.iter().map(|o| o.checkpoint_s).collect());
    let at = format!("@iter={}", STEPS / 2 + 1);
    let recovery_cost = |spec: &str| {
        let each = (0..3)
            .flat_map(|_| {
                let spec = format!("{spec}{at}");
                bench.run(every, 1, "online", 1, &[spec]).recoveries_s
            })
            .collect();
        median(each)
    };
    let (r1, r2) = (recovery_cost("rank:1"), recovery_cost("node:1"));
    let scale = t / 3600.0;
    println!(
        "heat2d {SIDE}x{SIDE}, {STEPS} steps, {RANKS} ranks on 2 nodes (+{SPARE_NODES} spare), {cores} core(s); {runs} runs per cell, medians"
    );
    println!(
        "calibrated: T = {t:.2} s (step {:.2} ms, scale T/3600 = {scale:.5}); C1 = {:.1} ms, C2 = {:.1} ms; R1 = {:.0} ms, R2 = {:.0} ms",
        step * 1e3,
        c1 * 1e3,
        c2 * 1e3,
        r1 * 1e3,
        r2 * 1e3
    );
    println!(
        "{:>14} | {:>5} {:>3} | {:>8} {:>5} {:>6} | {:>7} {:>7} {:>7} | {:>15} {:>15}",
        "MTBF scaled s",
        "every",
        "l2",
        "failures",
        "nodes",
        "fellbk",
        "coord",
        "k=2",
        "k=5",
        "k=2 meas/sim %",
        "k=5 meas/sim %"
    );
    let mut measured = [Vec::new(), Vec::new()];
    for (p, &(m1, m2)) in MTBF.iter().enumerate() {
        let mtbf = (m1 * scale, m2 * scale);
        let coordinated = simulate(&frame, t, step, mtbf, [c1, c2], [r1, r2], "coordinated");
        let p1 = coordinated.periods_s.first().copied().unwrap_or(1.0);
        let p2 = coordinated.periods_s.get(1).copied().unwrap_or(p1);
        let every = ((p1 / step).round() as u64).clamp(1, STEPS);
        let l2 = ((p2 / p1).round() as u64).max(1);
        let mut walls = [Vec::new(), Vec::new(), Vec::new()];
        let (mut fired, mut node_failures, mut fellback, mut left_out) = (0, 0, 0, 0);
        for r in 0..runs {
            // A node lost before its first level-2 copy leaves nothing
            // to restore (the paper's job would start over; frame stops
            // and says so): level-2 failures come after it.
            let first_copy = 2.0 * (every * l2) as f64 * step + 0.5;
            let (inject, early) = draw((p * 1000 + r) as u64, mtbf, 3.0 * t, first_copy);
            left_out += early;
            node_failures += inject.iter().filter(|s| s.starts_with("node")).count();
            for (i, (mode, k)) in [("online", 1), ("logged", 2), ("logged", 5)]
                .iter()
                .enumerate()
            {
                let o = bench.run(every, l2, mode, *k, &inject);
                assert_eq!(
                    o.checksum, reference,
                    "{mode} k={k} at {mtbf:?}, {inject:?}"
                );
                walls[i].push(o.wall - t);
                if i == 0 {
                    fired += o.injected;
                } else {
                    fellback += o.fallbacks;
                }
            }
        }
        let overhead: Vec<f64> = walls.iter().map(|w| median(w.clone())).collect();
        let mut cells = Vec::new();
        for (j, k) in [2usize, 5].into_iter().enumerate() {
            let reduction = (1.0 - overhead[j + 1] / overhead[0]) * 100.0;
            measured[j].push(reduction);
            let sim = |k: usize| {
                let a = simulate(
                    &frame,
                    t,
                    step,
                    mtbf,
                    [c1, c2],
                    [r1, r2],
                    &format!("async:{k}"),
                );
                (1.0 - a.mean_s / coordinated.mean_s) * 100.0
            };
            let (full, bounded) = (sim(k), sim(k.min(cores)));
            cells.push(format!("{reduction:>5.1}/{full:.0}({bounded:.0})"));
        }
        println!(
            "{:>14} | {every:>5} {l2:>3} | {:>8.1} {:>5.1} {:>6.1} | {:>7.2} {:>7.2} {:>7.2} | {:>15} {:>15}",
            format!("{:.1}/{:.1}", mtbf.0, mtbf.1),
            fired as f64 / runs as f64,
            node_failures as f64 / runs as f64,
            fellback as f64 / (2 * runs) as f64,
            overhead[0],
            overhead[1],
            overhead[2],
            cells[0],
            cells[1]
        );
        if left_out > 0 {
            println!("{:>14}   ({left_out} level-2 failure(s) drawn before the first level-2 copy left out)", "");
        }
    }
    for (j, k) in [2, 5].into_iter().enumerate() {
        let lo = measured[j].iter().copied().fold(f64::INFINITY, f64::min);
        let hi = measured[j]
            .iter()
            .copied()
            .fold(f64::NEG_INFINITY, f64::max);
        println!(
            "k = {k}: measured reduction {lo:.0} to {hi:.0} %, the paper's {:.0} to {:.0} %",
            PAPER_RANGE[j].0, PAPER_RANGE[j].1
        );
    }
    println!("(every: steps per checkpoint; l2: checkpoints per level-2 copy; failures: injected per run, nodes: of them level 2; fellbk: logged recoveries per run that restarted globally; coord, k=2, k=5: median overhead in s; meas/sim: the measured reduction of the median overhead / the simulator's for the same parameters (in brackets with k bounded by the cores))");
}
