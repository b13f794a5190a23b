//! L1 snapshot and recovery bandwidth, measured side by side with a plain
//! memcpy of the same buffer in the same run, with zstd off and on.
//!
//! Run: `cargo bench --bench l1` (sizes in MiB can be chosen with
//! `FRAME_BENCH_SIZES=1,16,256,1024`). Prints medians and ratios.

use frame::comm::LocalComm;
use frame::config::{Compression, Config, Interval};
use frame::{Checkpointer, Protected};
use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn gbps(bytes: usize, d: Duration) -> f64 {
    bytes as f64 / d.as_secs_f64() / 1e9
}

/// A smooth field, like a simulation's state: compressible, but not trivially.
fn field(n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| {
            let x = i as f64 / n as f64;
            (x * 40.0).sin() * 100.0 + (x * 7.0).cos() * 3.0
        })
        .collect()
}

fn reps_for(bytes: usize) -> usize {
    match bytes >> 20 {
        0..=4 => 41,
        5..=64 => 15,
        65..=512 => 7,
        _ => 5,
    }
}

fn config(dir: &Path, compression: Compression) -> Config {
    let mut cfg = Config::default();
    cfg.storage.local_dir = dir.to_path_buf();
    cfg.job.id = format!("bench-{compression}");
    cfg.snapshot.interval = Interval::Calls(1);
    cfg.snapshot.compression = compression;
    cfg.snapshot.compression_level = 1;
    cfg.retention.keep_last = 1;
    cfg.retention.keep_on_finalize = true;
    cfg
}

struct Measured {
    snapshot: Duration,
    load: Duration,
    ratio: f64,
}

/// Times `reps` checkpoints (after warm-up) and `reps` recoveries of `data`.
fn measure(
    dir: &Path,
    compression: Compression,
    data: &Protected<Vec<f64>>,
    reps: usize,
) -> Measured {
    let comm = LocalComm::world(1, 1).pop().expect("one rank");
    let cfg = config(dir, compression);
    let mut ckpt = Checkpointer::init(&cfg, &comm).expect("init");
    ckpt.protect_handle(0, data);
    for _ in 0..3 {
        ckpt.checkpoint().expect("warm-up checkpoint");
    }
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t = Instant::now();
        ckpt.checkpoint().expect("checkpoint");
        times.push(t.elapsed());
    }
    let stats = ckpt.stats().clone();
    let ratio = stats.raw_bytes as f64 / stats.stored_bytes.max(1) as f64;
    drop(ckpt);
    let snapshot = median(times);

    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t = Instant::now();
        let mut ckpt = Checkpointer::init(&cfg, &comm).expect("init");
        ckpt.protect_handle(0, data);
        ckpt.recover().expect("recover");
        times.push(t.elapsed());
    }
    Measured {
        snapshot,
        load: median(times),
        ratio,
    }
}

fn main() {
    let sizes: Vec<usize> = std::env::var("FRAME_BENCH_SIZES")
        .ok()
        .map(|s| s.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1, 16, 256, 1024]);
    let base = if Path::new("/dev/shm").is_dir() {
        "/dev/shm"
    } else {
        "/tmp"
    };
    println!(
        "L1 bandwidth on {base} (medians; ratio = bandwidth / memcpy bandwidth of the same buffer)"
    );
    println!(
        "{:>8} {:>8} | {:>16} {:>16} | {:>16} {:>16} {:>6}",
        "size", "memcpy", "snapshot", "load", "snapshot zstd", "load zstd", "zstd x"
    );
    for mib in sizes {
        let bytes = mib << 20;
        let n = bytes / 8;
        let src = field(n);
        let mut dst = vec![0f64; n];
        let reps = reps_for(bytes);
        let copy = median(
            (0..reps)
                .map(|_| {
                    let t = Instant::now();
                    black_box(&mut dst).copy_from_slice(black_box(&src));
                    t.elapsed()
                })
                .collect(),
        );
        drop(dst);
        let dir = tempfile::Builder::new()
            .prefix("frame-bench-")
            .tempdir_in(base)
            .expect("temp dir");
        let data = Protected::new(src);
        let raw = measure(dir.path(), Compression::None, &data, reps);
        let z = measure(dir.path(), Compression::Zstd, &data, reps.min(7));
        let mem = gbps(bytes, copy);
        let cell = |d: Duration| {
            let g = gbps(bytes, d);
            format!("{g:6.2} GB/s {:4.2}x", g / mem)
        };
        println!(
            "{:>4} MiB {:>5.2} GB/s | {:>16} {:>16} | {:>16} {:>16} {:>6.2}",
            mib,
            mem,
            cell(raw.snapshot),
            cell(raw.load),
            cell(z.snapshot),
            cell(z.load),
            z.ratio
        );
    }
}
