//! The three recovery modes on the same job and the same failure: global
//! restart, logged recovery and cone recovery. Run: `cargo bench --bench
//! cone [-- --runs N]`.
//!
//! heat2d 1024x1024 on 4 nodes x 2 ranks (a 2 x 4 process grid), 600
//! steps, a checkpoint every 200; rank 0 dies when it reaches step 403,
//! 3 steps after checkpoint 2. Global: all 8 ranks go back and redo the 3
//! steps (24 rank-steps). Logged: rank 0's replacement alone redoes them
//! from the survivors' logs (3). Cone: rank 0 restores and redoes 3, ranks
//! 1 and 4 redo 2 from copies, 2 and 5 redo 1, 3 and 6 supply their
//! copies, 7 idles (9 rank-steps), no log kept. The fault-free runs show
//! what each mode costs without a failure: logging a copy of every
//! message, or cone's reduction every step. Each configuration runs
//! `--runs` times (5), alternating; medians. The machine's cores are
//! shared by all ranks: the modes are told apart by CPU time and by the
//! recovery's own figures more than by wall time.

mod support;

use std::path::Path;
use std::process::Command;
use support::heat2d;

const RANKS: usize = 8;
const ARGS: [&str; 12] = [
    "--nodes",
    "4",
    "--ranks-per-node",
    "2",
    "--nx",
    "1024",
    "--ny",
    "1024",
    "--steps",
    "600",
    "--every",
    "200",
];

/// One job's figures.
struct Run {
    wall: f64,
    /// Each rank's CPU, seconds.
    cpu: Vec<f64>,
    checksum: String,
    /// Rank-steps recomputed, from the metrics (global: every rank the
    /// steps since the checkpoint).
    recomputed: f64,
    /// Idle rank-seconds, from the metrics.
    idle_s: f64,
    /// The largest log a survivor held, bytes.
    log_bytes: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn run(exe: &Path, dir: &Path, mode: &str, fail: bool) -> Run {
    let metrics = dir.join("metrics.jsonl");
    let _ = std::fs::remove_file(&metrics);
    let _ = std::fs::remove_dir_all(dir.join("local"));
    let mut cmd = Command::new(exe);
    cmd.args(ARGS)
        .args(["--recovery", mode, "--measure"])
        .arg("--metrics")
        .arg(&metrics)
        .env("FRAME_METRICS_FILE", &metrics)
        .env("FRAME_STORAGE_LOCAL_DIR", dir.join("local"))
        .env_remove("RUST_LOG");
    if fail {
        cmd.args(["--inject", "rank:0@iter=403"]);
    }
    let (wall, text) = support::timed(&mut cmd, &format!("heat2d in {mode} mode"));
    let cpu = support::cpu_of_ranks(&text, RANKS);
    let records: Vec<serde_json::Value> = std::fs::read_to_string(&metrics)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let of = |event: &'static str| records.iter().filter(move |r| r["event"] == event);
    let num = |r: &serde_json::Value, key: &str| r[key].as_f64().unwrap_or(0.0);
    let (recomputed, idle_s) = match mode {
        "cone" => (
            of("cone").map(|r| num(r, "steps")).sum(),
            of("cone")
                .filter(|r| r["role"] == "idle" || r["role"] == "supply")
                .map(|r| num(r, "wall_ms") / 1e3)
                .sum(),
        ),
        "logged" => (
            if fail { 3.0 } else { 0.0 },
            of("idle").map(|r| num(r, "wall_ms") / 1e3).sum(),
        ),
        _ => (if fail { 3.0 * RANKS as f64 } else { 0.0 }, 0.0),
    };
    Run {
        wall,
        cpu,
        checksum: text
            .lines()
            .find_map(|l| l.strip_prefix("final checksum: "))
            .unwrap_or("none")
            .to_string(),
        recomputed,
        idle_s,
        log_bytes: of("replay")
            .map(|r| num(r, "log_bytes"))
            .fold(0.0, f64::max),
    }
}

fn main() {
    let runs = support::runs(5);
    let exe = heat2d();
    let dir = tempfile::tempdir().expect("temp dir");
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let modes = ["online", "logged", "cone"];
    let mut all: Vec<Vec<Run>> = (0..6).map(|_| Vec::new()).collect();
    for _ in 0..runs {
        for (m, mode) in modes.iter().enumerate() {
            for (f, fail) in [false, true].into_iter().enumerate() {
                all[2 * m + f].push(run(&exe, dir.path(), mode, fail));
            }
        }
    }
    let reference = all[0][0].checksum.clone();
    for r in all.iter().flatten() {
        assert_eq!(r.checksum, reference, "a run's checksum differs");
    }
    let med = |i: usize, f: &dyn Fn(&Run) -> f64| median(all[i].iter().map(f).collect());
    let survivors = |r: &Run| r.cpu.iter().skip(1).sum::<f64>();
    println!(
        "heat2d 1024x1024, {RANKS} ranks on {cores} core(s), 600 steps, a checkpoint every 200; rank 0 killed at step 403 (3 steps lost); {runs} runs each, medians"
    );
    println!(
        "{:>7} | {:>9} {:>9} | {:>9} {:>13} {:>10} {:>11} {:>9} | {:>12}",
        "mode",
        "ff wall s",
        "vs global",
        "wall s",
        "survivors' s",
        "rank-steps",
        "idle rank-s",
        "log KiB",
        "CPU s"
    );
    for (m, mode) in modes.iter().enumerate() {
        let (ff, failed) = (2 * m, 2 * m + 1);
        println!(
            "{:>7} | {:>9.3} {:>+8.1}% | {:>9.3} {:>+13.3} {:>10.0} {:>11.3} {:>9.1} | {:>12.3}",
            if *mode == "online" { "global" } else { mode },
            med(ff, &|r| r.wall),
            (med(ff, &|r| r.wall) / med(0, &|r| r.wall) - 1.0) * 100.0,
            med(failed, &|r| r.wall),
            med(failed, &survivors) - med(ff, &survivors),
            med(failed, &|r| r.recomputed),
            med(failed, &|r| r.idle_s),
            med(failed, &|r| r.log_bytes) / 1024.0,
            med(failed, &|r| r.cpu.iter().sum())
        );
    }
    println!("(ff: fault-free, against global's; survivors' s: the CPU ranks 1 to 7 used beyond their fault-free run; rank-steps: steps recomputed over all ranks; idle: the waiting ranks' wall time from the metrics; log: the largest log a survivor held; CPU: all ranks' with the failure)");
}
