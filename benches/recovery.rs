//! Runtime recovery, online (Reinit) against redeploy (relaunch everything),
//! for the same heat2d job with one injected rank failure.
//!
//! Each mode runs several times, alternating; the figures come from the
//! root's JSON metrics lines (detection to world barrier). Run:
//! `cargo bench --bench recovery`.

mod support;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use support::heat2d;

const RUNS: usize = 9;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Runs the job once and returns its recovery record.
fn run(
    exe: &PathBuf,
    mode: &str,
    nodes: &str,
    per_node: &str,
    dir: &std::path::Path,
) -> serde_json::Value {
    let metrics = dir.join(format!("{mode}.jsonl"));
    let _ = std::fs::remove_file(&metrics);
    let victim =
        (nodes.parse::<u32>().unwrap_or(2) * per_node.parse::<u32>().unwrap_or(2) - 1).to_string();
    let status = Command::new(exe)
        .args([
            "--nodes",
            nodes,
            "--ranks-per-node",
            per_node,
            "--steps",
            "2000",
            "--every",
            "200",
        ])
        .args([
            "--recovery",
            mode,
            "--inject",
            &format!("rank:{victim}@iter=1234"),
        ])
        .arg("--metrics")
        .arg(&metrics)
        .env("FRAME_STORAGE_LOCAL_DIR", dir.join("local"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("run heat2d");
    assert!(status.success(), "heat2d failed in {mode} mode");
    let text = std::fs::read_to_string(&metrics).expect("metrics");
    serde_json::from_str(text.lines().next().expect("one recovery")).expect("json")
}

fn ms(v: &serde_json::Value, from: &str, to: &str) -> f64 {
    (v[to].as_u64().unwrap_or(0) as f64 - v[from].as_u64().unwrap_or(0) as f64) / 1e6
}

fn main() {
    let exe = heat2d();
    let dir = tempfile::tempdir().expect("temp dir");
    println!("heat2d 512x512, 2000 steps, checkpoint every 200, rank killed at step 1234; {RUNS} runs per mode, medians");
    println!(
        "{:>6} {:>9} | {:>9} {:>9} {:>9} {:>9} | {:>6}",
        "ranks", "mode", "total ms", "->reinit", "->spawn", "->barrier", "ratio"
    );
    for (nodes, per_node) in [("2", "1"), ("2", "2")] {
        let mut rows: Vec<(&str, Vec<serde_json::Value>)> =
            vec![("online", vec![]), ("redeploy", vec![])];
        for _ in 0..RUNS {
            for (mode, recs) in rows.iter_mut() {
                recs.push(run(&exe, mode, nodes, per_node, dir.path()));
            }
        }
        let total = |recs: &[serde_json::Value]| {
            median(
                recs.iter()
                    .map(|r| r["runtime_recovery_ms"].as_f64().unwrap_or(0.0))
                    .collect(),
            )
        };
        let redeploy = total(&rows[1].1);
        for (mode, recs) in &rows {
            let t = total(recs);
            println!(
                "{:>6} {:>9} | {:>9.3} {:>9.3} {:>9.3} {:>9.3} | {:>5.1}x",
                format!("{nodes}x{per_node}"),
                mode,
                t,
                median(
                    recs.iter()
                        .map(|r| ms(r, "detected_ns", "reinit_sent_ns"))
                        .collect()
                ),
                median(
                    recs.iter()
                        .map(|r| ms(r, "reinit_sent_ns", "replacements_started_ns"))
                        .collect()
                ),
                median(
                    recs.iter()
                        .map(|r| ms(r, "replacements_started_ns", "barrier_ns"))
                        .collect()
                ),
                redeploy / t
            );
        }
    }
}
