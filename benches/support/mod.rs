//! What the process-level benchmarks share.

use std::path::PathBuf;
use std::process::Command;

/// Builds the heat2d example in release mode and returns its path.
#[allow(dead_code)] // only the benchmarks that run heat2d
pub fn heat2d() -> PathBuf {
    let status = Command::new(env!("CARGO"))
        .args(["build", "--release", "--example", "heat2d"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .expect("cargo build");
    assert!(status.success(), "building heat2d failed");
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/release/examples/heat2d")
}

/// Builds the `frame` command in release mode and returns its path.
#[allow(dead_code)] // only the benchmarks that launch jobs themselves
pub fn frame_cli() -> PathBuf {
    let status = Command::new(env!("CARGO"))
        .args(["build", "--release", "-p", "frame-cli", "--bin", "frame"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .expect("cargo build");
    assert!(status.success(), "building frame failed");
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/release/frame")
}

/// The `--runs N` argument of a benchmark, at least 1 (`default` without
/// it).
#[allow(dead_code)] // not every benchmark repeats its runs
pub fn runs(default: usize) -> usize {
    std::env::args()
        .skip_while(|a| a != "--runs")
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
        .max(1)
}

/// Each rank's CPU seconds from heat2d's `heat2d: rank R used S s of CPU`
/// lines in `text` (0 for a rank without one).
#[allow(dead_code)] // only the heat2d recovery benchmarks read them
pub fn cpu_of_ranks(text: &str, ranks: usize) -> Vec<f64> {
    let mut cpu = vec![0.0; ranks];
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("heat2d: rank ") else {
            continue;
        };
        let mut words = rest.split(' ');
        let rank: Option<usize> = words.next().and_then(|w| w.parse().ok());
        if let (Some(r), Some("used"), Some(s)) = (rank, words.next(), words.next()) {
            if let Some(slot) = cpu.get_mut(r) {
                *slot = s.parse().unwrap_or(0.0);
            }
        }
    }
    cpu
}

/// Runs `cmd` to its end and returns its wall time, seconds, and its
/// standard output then standard error; a failed run panics naming
/// `what`, with the output.
#[allow(dead_code)] // only the benchmarks that run whole jobs
pub fn timed(cmd: &mut Command, what: &str) -> (f64, String) {
    let began = std::time::Instant::now();
    let out = cmd.output().expect("start the job");
    let wall = began.elapsed().as_secs_f64();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{what} failed:\n{text}");
    (wall, text)
}

/// The median of `v` (the upper one of an even count).
#[allow(dead_code)] // not every benchmark times in `Duration`s
pub fn median(mut v: Vec<std::time::Duration>) -> std::time::Duration {
    v.sort();
    v[v.len() / 2]
}

/// Gigabytes per second of `bytes` in `d`.
#[allow(dead_code)] // only the throughput benchmarks
pub fn gbps(bytes: u64, d: std::time::Duration) -> f64 {
    bytes as f64 / d.as_secs_f64().max(1e-9) / 1e9
}

/// `FRAME_BENCH_MIB`: data per rank in MiB (`default` without it).
#[allow(dead_code)] // only the benchmarks sized by it
pub fn mib(default: usize) -> usize {
    std::env::var("FRAME_BENCH_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A temporary directory named `frame-bench-<name>-…` in `FRAME_BENCH_DIR`
/// (default `/dev/shm`, or `/tmp` without it), removed on drop.
#[allow(dead_code)] // only the benchmarks that keep storage
pub fn bench_dir(name: &str) -> tempfile::TempDir {
    let base = match std::env::var_os("FRAME_BENCH_DIR") {
        Some(d) => PathBuf::from(d),
        None if std::path::Path::new("/dev/shm").is_dir() => PathBuf::from("/dev/shm"),
        None => PathBuf::from("/tmp"),
    };
    tempfile::Builder::new()
        .prefix(&format!("frame-bench-{name}-"))
        .tempdir_in(base)
        .expect("temp dir")
}
