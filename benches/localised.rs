//! Localised (logged) recovery against global restart, for the same heat2d
//! job and the same rank failure: time to solution, the CPU each rank
//! used (who recomputed), idle rank-seconds, the log the survivors held,
//! and the fault-free cost of logging; then the same failure recovered by
//! teams of k = 2 and 5 processes (`--spares`): the CPU each part used
//! for the recomputation against the replacement's alone. Run: `cargo
//! bench --bench localised [-- --runs N]`.
//!
//! heat2d 512x512 on 2 nodes x 2 ranks, 2000 steps, a checkpoint every
//! 1000; rank 3 is killed at step 1990, so 990 steps are lost (the teams:
//! 1024x1024, the same failure; their runs are compared with each other). In global
//! mode every rank recomputes them; in logged mode only rank 3's
//! replacement does, fed the halos it lost from its neighbours' logs,
//! while the others wait blocked. The machine's cores are shared by all
//! ranks, so wall-clock gains are bounded by them: the split is judged by
//! CPU time. Each configuration runs `--runs` times (5), alternating;
//! medians.

mod support;

use std::path::Path;
use std::process::Command;
use support::heat2d;

const RANKS: usize = 4;
const VICTIM: usize = 3;
const GRID: [&str; 6] = ["--nodes", "2", "--ranks-per-node", "2", "--steps", "2000"];
/// The grid's side: 512 for the modes; 1024 for the teams, whose split
/// pays a few messages per step that a larger block hides.
const SIDE: usize = 512;
const TEAM_SIDE: usize = 1024;

/// One job's figures.
struct Run {
    wall: f64,
    cpu: Vec<f64>,
    log_bytes: Vec<u64>,
    checksum: String,
    /// The recomputation, from the metrics: its wall time, and the CPU
    /// time of each part (the replacement first, then its helpers).
    recompute_ms: Option<f64>,
    parts_cpu_ms: Vec<f64>,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn run(exe: &Path, dir: &Path, mode: &str, fail: bool, spares: u32, side: usize) -> Run {
    let metrics = dir.join("metrics.jsonl");
    let _ = std::fs::remove_file(&metrics);
    let mut cmd = Command::new(exe);
    let side = side.to_string();
    cmd.args(GRID)
        .args(["--nx", &side, "--ny", &side])
        .args(["--every", "1000", "--recovery", mode, "--measure"])
        .args(["--spares", &spares.to_string()])
        .arg("--metrics")
        .arg(&metrics)
        .env("FRAME_METRICS_FILE", &metrics)
        .env("FRAME_STORAGE_LOCAL_DIR", dir.join("local"))
        .env("RUST_LOG", "frame::comm::net::rejoin=info");
    if fail {
        cmd.args(["--inject", &format!("rank:{VICTIM}@iter=1990")]);
    }
    let (wall, text) = support::timed(&mut cmd, &format!("heat2d in {mode} mode"));
    let cpu = support::cpu_of_ranks(&text, RANKS);
    let log_bytes = text
        .lines()
        .filter(|l| l.contains("replayed to a replacement"))
        .filter_map(|l| {
            l.split("log_bytes=")
                .nth(1)?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .collect();
    let checksum = text
        .lines()
        .find_map(|l| l.strip_prefix("final checksum: "))
        .unwrap_or("none")
        .to_string();
    let records: Vec<serde_json::Value> = std::fs::read_to_string(&metrics)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let rejoin = records.iter().find(|r| r["event"] == "rejoin");
    let mut parts_cpu_ms: Vec<f64> = rejoin
        .and_then(|r| r["recompute_cpu_ms"].as_f64())
        .into_iter()
        .collect();
    parts_cpu_ms.extend(
        records
            .iter()
            .filter(|r| r["event"] == "help")
            .filter_map(|r| r["cpu_ms"].as_f64()),
    );
    Run {
        wall,
        cpu,
        log_bytes,
        checksum,
        recompute_ms: rejoin.and_then(|r| r["recompute_ms"].as_f64()),
        parts_cpu_ms,
    }
}

fn main() {
    let runs: usize = std::env::args()
        .skip_while(|a| a != "--runs")
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(5);
    let exe = heat2d();
    let dir = tempfile::tempdir().expect("temp dir");
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "heat2d {SIDE}x{SIDE}, {RANKS} ranks on {cores} core(s), 2000 steps, checkpoint every 1000; rank {VICTIM} killed at step 1990 (990 steps lost); {runs} runs each, medians"
    );
    let cases = [
        ("online", false, 1, SIDE),
        ("logged", false, 1, SIDE),
        ("online", true, 1, SIDE),
        ("logged", true, 1, SIDE),
        ("logged", true, 1, TEAM_SIDE),
        ("logged", true, 2, TEAM_SIDE),
        ("logged", true, 5, TEAM_SIDE),
    ];
    let mut all: Vec<Vec<Run>> = cases.iter().map(|_| Vec::new()).collect();
    for _ in 0..runs {
        for (i, (mode, fail, spares, side)) in cases.iter().enumerate() {
            all[i].push(run(&exe, dir.path(), mode, *fail, *spares, *side));
        }
    }
    for (i, runs) in all.iter().enumerate() {
        let reference = &all[if cases[i].3 == SIDE { 0 } else { 4 }][0].checksum;
        for r in runs {
            assert_eq!(&r.checksum, reference, "a run's checksum differs");
        }
    }
    let wall = |i: usize| median(all[i].iter().map(|r| r.wall).collect());
    let cpu_of = |i: usize, rank: usize| median(all[i].iter().map(|r| r.cpu[rank]).collect());
    let total = |i: usize| median(all[i].iter().map(|r| r.cpu.iter().sum()).collect());
    let survivors = |i: usize| {
        median(
            all[i]
                .iter()
                .map(|r| {
                    r.cpu
                        .iter()
                        .enumerate()
                        .filter(|(k, _)| *k != VICTIM)
                        .map(|(_, c)| c)
                        .sum()
                })
                .collect(),
        )
    };
    let idle = |i: usize| {
        median(
            all[i]
                .iter()
                .map(|r| r.wall * RANKS as f64 - r.cpu.iter().sum::<f64>())
                .collect(),
        )
    };
    println!(
        "{:>22} | {:>8} {:>9} {:>12} {:>12} {:>11}",
        "", "wall s", "CPU s", "survivors s", "rank 3 s", "idle rank-s"
    );
    let names = [
        "global, no failure",
        "logged, no failure",
        "global, rank 3 killed",
        "logged, rank 3 killed",
    ];
    for (i, name) in names.iter().enumerate() {
        println!(
            "{:>22} | {:>8.3} {:>9.3} {:>12.3} {:>12.3} {:>11.3}",
            name,
            wall(i),
            total(i),
            survivors(i),
            cpu_of(i, VICTIM),
            idle(i)
        );
    }
    println!(
        "fault-free cost of logging: {:+.1} % wall ({:.3} s against {:.3} s)",
        (wall(1) / wall(0) - 1.0) * 100.0,
        wall(1),
        wall(0)
    );
    // The killed process's CPU before its death is not counted in either
    // mode; the replacement does the same work in both (the lost steps
    // and the rest of the run): the survivors tell the modes apart.
    println!(
        "survivors' CPU beyond the fault-free run: global {:+.3} s (each redid the lost steps), logged {:+.3} s (blocked while the replacement recomputed); the replacement used {:.3} s and {:.3} s",
        survivors(2) - survivors(0),
        survivors(3) - survivors(1),
        cpu_of(2, VICTIM),
        cpu_of(3, VICTIM)
    );
    println!(
        "time to solution with the failure: global {:.3} s, logged {:.3} s ({:.2}x)",
        wall(2),
        wall(3),
        wall(2) / wall(3)
    );
    let logs: Vec<f64> = all[3]
        .iter()
        .flat_map(|r| r.log_bytes.iter().map(|b| *b as f64))
        .collect();
    if !logs.is_empty() {
        println!(
            "log a survivor held when it replayed: median {:.1} KiB, at most {:.1} KiB",
            median(logs.clone()) / 1024.0,
            logs.iter().copied().fold(0.0, f64::max) / 1024.0
        );
    }
    teams(&all, cores);
}

/// The recomputation shared by teams: the most CPU one part used, its
/// ratio to the replacement's alone times k (1.0: a perfect split), the
/// recomputation's wall time and time to solution.
fn teams(all: &[Vec<Run>], cores: usize) {
    let recompute = |i: usize| median(all[i].iter().filter_map(|r| r.recompute_ms).collect());
    let alone = median(
        all[4]
            .iter()
            .filter_map(|r| r.parts_cpu_ms.first().copied())
            .collect(),
    );
    println!(
        "heat2d {TEAM_SIDE}x{TEAM_SIDE}, the same failure, the recomputation shared by k processes ({cores} core(s); 1000 steps to the next checkpoint, 990 of them lost):"
    );
    println!(
        "{:>3} | {:>14} {:>15} {:>13} {:>13} {:>13} {:>8}",
        "k",
        "recompute ms",
        "CPU per part ms",
        "x k / alone",
        "all / alone",
        "parts found",
        "wall s"
    );
    for (i, k) in [(4, 1usize), (5, 2), (6, 5)] {
        let most = median(
            all[i]
                .iter()
                .map(|r| r.parts_cpu_ms.iter().copied().fold(0.0, f64::max))
                .collect(),
        );
        let found = median(all[i].iter().map(|r| r.parts_cpu_ms.len() as f64).collect());
        let sum = median(all[i].iter().map(|r| r.parts_cpu_ms.iter().sum()).collect());
        println!(
            "{k:>3} | {:>14.1} {:>15.1} {:>13.2} {:>13.2} {:>13} {:>8.3}",
            recompute(i),
            most,
            most * k as f64 / alone,
            sum / alone,
            found,
            median(all[i].iter().map(|r| r.wall).collect())
        );
    }
    println!("(CPU per part: the most one part used; target: x k / alone at most 1.10, each part at most 1/k of the work plus 10 %; all / alone: the CPU the split costs in all)");
}
