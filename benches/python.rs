//! Python against Rust, measured in the same run: `protect` + `snapshot`
//! of one array of float64 per rank at level 1, through the Python package
//! (a numpy array, protected in place) and through the Rust API (a
//! `Vec<f64>`), same sizes, same configuration, same tmpfs.
//!
//! Builds the package in release mode into `target/python-release` first
//! (`ffi/python/install --release`). Sizes in MiB with
//! `FRAME_BENCH_SIZES` (default 16,256). Prints the medians of three
//! rounds of each side taken in turn; the ratio is
//! Rust's time over Python's (1: as fast as Rust; the goal is 0.9 or more).
//!
//! Run: `cargo bench --bench python`.

use frame::comm::LocalComm;
use frame::config::{Config, Interval};
use frame::Checkpointer;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn reps_for(mib: usize) -> usize {
    if mib <= 16 {
        31
    } else {
        9
    }
}

/// Rounds of each side, taken in turn.
const ROUNDS: usize = 3;

fn top() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The configuration both sides use: a checkpoint per snapshot, one kept.
const SETTINGS: [(&str, &str); 3] = [
    ("FRAME_SNAPSHOT_INTERVAL", "1"),
    ("FRAME_RETENTION_KEEP_LAST", "1"),
    ("FRAME_JOB_ID", "bench"),
];

fn rust(dir: &Path, mib: usize, reps: usize) -> Vec<Duration> {
    let mut cfg = Config::default();
    cfg.storage.local_dir = dir.to_path_buf();
    cfg.job.id = "bench".into();
    cfg.snapshot.interval = Interval::Calls(1);
    cfg.retention.keep_last = 1;
    let comm = LocalComm::world(1, 1).pop().expect("comm");
    let mut ckpt = Checkpointer::init(&cfg, &comm).expect("init");
    let data: Vec<f64> = (0..(mib << 17) as u64)
        .map(|i| (i * 31 % 251) as f64)
        .collect();
    let handle = ckpt.protect(0, data);
    let mut times = Vec::new();
    for rep in 0..reps {
        handle.write()[rep] += 1.0;
        let t = Instant::now();
        ckpt.protect_handle(0, &handle);
        ckpt.snapshot().expect("snapshot");
        times.push(t.elapsed());
    }
    ckpt.finalize().expect("finalize");
    times
}

fn python(py: &Path, dir: &Path, mib: usize, reps: usize) -> Vec<Duration> {
    let out = Command::new(py)
        .arg(top().join("benches/python/snapshot.py"))
        .arg(reps.to_string())
        .arg(mib.to_string())
        .env("FRAME_STORAGE_LOCAL_DIR", dir)
        .envs(SETTINGS)
        .env_remove("FRAME_CONFIG")
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let times: Vec<Duration> = text
        .split_whitespace()
        .skip(1)
        .filter_map(|s| s.parse().ok())
        .map(Duration::from_secs_f64)
        .collect();
    assert_eq!(times.len(), reps, "not {reps} times in {text:?}");
    times
}

fn main() {
    let sizes: Vec<usize> = std::env::var("FRAME_BENCH_SIZES")
        .ok()
        .map(|s| s.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![16, 256]);
    let venv = top().join("target/python-release");
    let built = Command::new(top().join("ffi/python/install"))
        .arg("--release")
        .arg(&venv)
        .status()
        .expect("ffi/python/install");
    assert!(built.success(), "ffi/python/install --release failed");
    let py = venv.join("bin/python");
    let base = tempfile::Builder::new()
        .prefix("frame-bench-python-")
        .tempdir_in("/dev/shm")
        .expect("tmpfs directory");
    println!("protect + snapshot of one float64 array per rank at level 1 on /dev/shm, medians; ratio: Rust's time / Python's");
    println!(
        "{:>6}  {:>12}  {:>12}  {:>8}",
        "MiB", "Rust", "Python", "ratio"
    );
    for mib in sizes {
        let reps = reps_for(mib);
        // Rounds taken in turn, so both sides see the same machine.
        let (mut r, mut p) = (Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            r.extend(rust(&base.path().join("rust"), mib, reps));
            p.extend(python(&py, &base.path().join("python"), mib, reps));
        }
        let (r, p) = (median(r), median(p));
        let gbps = |d: Duration| (mib << 20) as f64 / d.as_secs_f64() / 1e9;
        println!(
            "{mib:>6}  {:>7.2} GB/s  {:>7.2} GB/s  {:>7.2}x",
            gbps(r),
            gbps(p),
            r.as_secs_f64() / p.as_secs_f64()
        );
    }
}
