//! Failure-aware recovery (`frame`) against the iterative baseline, per
//! failure level, on the same heat2d job under the runtime: six nodes of one
//! rank plus two spares, all four levels (partner = next node, groups of 3
//! nodes with one parity share), a failure at the same step that only its
//! level can repair.
//!
//! Each case runs several times per strategy, alternating; the figures are
//! medians of the metrics lines (rank 0's recovery record: the slowest
//! rank's identify, fetch and load; the root's runtime recovery). Retrieval
//! is identify + fetch: what the strategies do differently. Then full
//! recovery (runtime + application) of an L2 failure: online with `frame`
//! against redeploy with `iterative`. Run: `cargo bench --bench strategies`
//! (`STRATEGIES_RUNS=N` to change the runs per point, default 5;
//! `STRATEGIES_MIB=N` for about N MiB of grid per rank, default 3). The
//! medians go to `target/strategies.json` (`target/strategies-<N>mib.json`
//! for another size), which `frame sim --project` projects to 16..1024
//! nodes.

mod support;

use frame_cli::report::{median, Recovered, Report};
use frame_cli::sim::projection::{Measured, Point};
use std::path::Path;
use std::process::{Command, Stdio};
use support::heat2d;

const CASES: [(&str, &str); 4] = [
    ("L1", "rank:2@iter=175"),
    ("L2", "node:1@iter=175"),
    ("L3", "node:2,3@iter=175"),
    ("L4", "node:0,1@iter=175"),
];

/// Runs the job once with `inject` and returns its one recovery.
fn run(exe: &Path, dirs: &Dirs, side: &str, inject: &str, strategy: &str, mode: &str) -> Recovered {
    let metrics = dirs.disk.path().join("metrics.jsonl");
    let local = dirs.shm.path().join("local");
    let global = dirs.disk.path().join("global");
    let _ = std::fs::remove_file(&metrics);
    let _ = std::fs::remove_dir_all(&local);
    let _ = std::fs::remove_dir_all(&global);
    let status = Command::new(exe)
        .args([
            "--nodes",
            "6",
            "--ranks-per-node",
            "1",
            "--spare-nodes",
            "2",
        ])
        .args([
            "--nx", side, "--ny", side, "--steps", "200", "--every", "20",
        ])
        .args(["--recovery", mode, "--inject", inject, "--progress", "0s"])
        .arg("--metrics")
        .arg(&metrics)
        .env_remove("FRAME_CONFIG")
        .env("FRAME_STORAGE_LOCAL_DIR", &local)
        .env("FRAME_STORAGE_GLOBAL_DIR", &global)
        .env("FRAME_METRICS_FILE", &metrics)
        .env("FRAME_L2_INTERVAL", "1")
        .env("FRAME_L3_INTERVAL", "2")
        .env("FRAME_L3_GROUP_SIZE", "3")
        .env("FRAME_L3_PARITY", "1")
        .env("FRAME_L4_INTERVAL", "3")
        .env("FRAME_RECOVERY_STRATEGY", strategy)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("run heat2d");
    assert!(
        status.success(),
        "heat2d failed ({inject}, {strategy}, {mode})"
    );
    let report = Report::read(&[metrics]).expect("metrics");
    assert_eq!(
        report.failures.len(),
        1,
        "one recovery ({inject}, {strategy})"
    );
    report.failures[0].clone()
}

/// Levels 1 to 3 on tmpfs (node-local RAM disk), level 4 on the disk.
struct Dirs {
    shm: tempfile::TempDir,
    disk: tempfile::TempDir,
}

fn med(runs: &[Recovered], f: impl Fn(&Recovered) -> f64) -> f64 {
    median(&runs.iter().map(f).collect::<Vec<_>>()).unwrap_or(f64::NAN)
}

fn retrieval(r: &Recovered) -> f64 {
    r.record.identify_ms + r.record.fetch_ms
}

fn rounds(runs: &[Recovered]) -> String {
    let mut r: Vec<u32> = runs.iter().map(|x| x.record.rounds).collect();
    r.sort_unstable();
    r.dedup();
    r.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
}

fn main() {
    let runs: usize = std::env::var("STRATEGIES_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let mib: u32 = std::env::var("STRATEGIES_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|m| (1..=1024).contains(m))
        .unwrap_or(3);
    // Six ranks share a square grid of doubles by rows: the side is a
    // multiple of 6 giving each rank about `mib` MiB.
    let side = ((f64::from(mib) * 1_048_576.0 * 6.0 / 8.0).sqrt() as u32) / 6 * 6;
    let side = side.to_string();
    let exe = heat2d();
    let dirs = Dirs {
        shm: tempfile::tempdir_in("/dev/shm")
            .or_else(|_| tempfile::tempdir())
            .expect("temp dir"),
        disk: tempfile::Builder::new()
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .expect("temp dir"),
    };
    println!(
        "heat2d {side}x{side} ({mib} MiB per rank), 6 nodes x 1 rank + 2 spares, checkpoint every 20 steps, failure at step 175; {runs} runs per point, medians (ms)"
    );
    println!(
        "{:>5} {:>10} {:>7} {:>6} {:>9} {:>9} {:>9} {:>9} {:>9} | {:>14}",
        "level",
        "strategy",
        "rounds",
        "used",
        "identify",
        "fetch",
        "retrieval",
        "load",
        "app",
        "frame/iterative"
    );
    let mut measured = Measured::test_machine();
    for (i, (level, inject)) in CASES.into_iter().enumerate() {
        let mut frame = Vec::new();
        let mut iterative = Vec::new();
        for _ in 0..runs {
            frame.push(run(&exe, &dirs, &side, inject, "frame", "online"));
            iterative.push(run(&exe, &dirs, &side, inject, "iterative", "online"));
        }
        let ratio = med(&frame, retrieval) / med(&iterative, retrieval);
        let point = |rs: &[Recovered]| Point {
            identify_ms: med(rs, |r| r.record.identify_ms),
            fetch_ms: med(rs, |r| r.record.fetch_ms),
            load_ms: med(rs, |r| r.record.load_ms),
            rounds: med(rs, |r| f64::from(r.record.rounds)),
        };
        measured.frame[i] = point(&frame);
        measured.iterative[i] = point(&iterative);
        for (name, rs) in [("frame", &frame), ("iterative", &iterative)] {
            let used: Vec<u8> = rs.iter().map(|r| r.record.level).collect();
            println!(
                "{:>5} {:>10} {:>7} {:>6} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>9.2} | {:>14}",
                level,
                name,
                rounds(rs),
                format!("L{}", used[0]),
                med(rs, |r| r.record.identify_ms),
                med(rs, |r| r.record.fetch_ms),
                med(rs, retrieval),
                med(rs, |r| r.record.load_ms),
                med(rs, |r| r.record.application_recovery_ms),
                if name == "frame" {
                    format!("{ratio:.2}x")
                } else {
                    String::new()
                }
            );
            assert!(
                used.iter().all(|u| format!("L{u}") == level),
                "{level} {name}: recovered from {used:?}"
            );
            if name == "frame" {
                assert!(rs.iter().all(|r| r.record.rounds == 1), "frame rounds");
            }
        }
    }
    println!();
    println!("full recovery of an L2 failure (node 1 killed): runtime + application, medians (ms)");
    println!(
        "{:>22} {:>9} {:>12} {:>9}",
        "", "runtime", "application", "full"
    );
    let mut online = Vec::new();
    let mut redeploy = Vec::new();
    for _ in 0..runs {
        online.push(run(&exe, &dirs, &side, CASES[1].1, "frame", "online"));
        redeploy.push(run(&exe, &dirs, &side, CASES[1].1, "iterative", "redeploy"));
    }
    for (name, rs) in [
        ("online + frame", &online),
        ("redeploy + iterative", &redeploy),
    ] {
        println!(
            "{:>22} {:>9.2} {:>12.2} {:>9.2}",
            name,
            med(rs, |r| r.runtime_ms.unwrap_or(f64::NAN)),
            med(rs, |r| r.record.application_recovery_ms),
            med(rs, Recovered::full_ms)
        );
    }
    println!(
        "online + frame is {:.1}x faster",
        med(&redeploy, Recovered::full_ms) / med(&online, Recovered::full_ms)
    );
    measured.nodes = 6.0;
    measured.online_ms = med(&online, |r| r.runtime_ms.unwrap_or(f64::NAN));
    measured.redeploy_ms = med(&redeploy, |r| r.runtime_ms.unwrap_or(f64::NAN));
    let name = if mib == 3 {
        "strategies.json".to_string()
    } else {
        format!("strategies-{mib}mib.json")
    };
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("..")
        .join(name);
    std::fs::write(
        &path,
        serde_json::to_string_pretty(&measured).expect("json"),
    )
    .expect("write the measurements");
    println!(
        "measurements written to {} (frame sim --project FILE projects them to 16..1024 nodes)",
        path.display()
    );
}
