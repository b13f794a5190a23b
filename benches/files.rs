//! File checkpoints against their baselines, measured in the same run:
//!
//! - **at level 1**: the program writes its file into the path frame gives
//!   and ends the checkpoint, against a plain `write` (then `fdatasync`) of
//!   the same bytes into a new file of the same tmpfs, and against a
//!   checkpoint of the same bytes as a protected region;
//! - **promotion to level 2**: the time the managers of two nodes (one
//!   rank each) take to promote a file checkpoint to the partner node,
//!   against a region checkpoint of the same size (both are one checkpoint
//!   file by then).
//!
//! Sizes in MiB per rank with `FRAME_BENCH_SIZES` (default 16,256), on
//! `/dev/shm`. Prints medians; a ratio above 1 means the file checkpoint
//! is faster.
//!
//! Run: `cargo bench --bench files`.

use frame::comm::LocalComm;
use frame::config::{Config, Interval};
use frame::{Checkpointer, Level};
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn gbps(bytes: usize, d: Duration) -> f64 {
    bytes as f64 / d.as_secs_f64() / 1e9
}

fn reps_for(bytes: usize) -> usize {
    if bytes >> 20 <= 16 {
        15
    } else {
        7
    }
}

fn config(dir: &Path, l2: bool) -> Config {
    let mut cfg = Config::default();
    cfg.storage.local_dir = dir.to_path_buf();
    cfg.job.id = "bench".into();
    cfg.snapshot.interval = Interval::Calls(1);
    cfg.retention.keep_last = 1;
    if l2 {
        cfg.l2.interval = Interval::Calls(1);
    }
    cfg
}

/// Writes `bytes` into a new file at `path` in pieces of 8 MiB, as a
/// program's stdio would, then `fdatasync`.
fn write_file(path: &Path, bytes: &[u8]) {
    let mut f = std::fs::File::create(path).expect("create");
    for piece in bytes.chunks(8 << 20) {
        f.write_all(piece).expect("write");
    }
    f.sync_data().expect("sync");
}

struct Row {
    plain: Duration,
    file: Duration,
    region: Duration,
    promote_file: Duration,
    promote_region: Duration,
}

/// One checkpoint of `bytes`: of the protected region `data` (changed
/// first, as a program changes its state between checkpoints), or without
/// one, of a file the program writes.
fn checkpoint_once(
    ckpt: &mut Checkpointer<'_>,
    bytes: &[u8],
    data: Option<&frame::Protected<Vec<u8>>>,
    rep: usize,
) {
    match data {
        Some(d) => {
            d.write()[rep] ^= 1;
            ckpt.checkpoint().expect("checkpoint");
        }
        None => {
            ckpt.begin_checkpoint(Level::L1).expect("begin");
            let path = ckpt.checkpoint_file("state.bin").expect("path");
            write_file(&path, bytes);
            ckpt.end_checkpoint().expect("end");
        }
    }
}

/// The median time of `reps` checkpoints of `bytes` at level 1 on one
/// rank: as a file the program writes (`files`), or as a protected region.
fn at_level_1(base: &Path, bytes: &[u8], files: bool, reps: usize) -> Duration {
    let dir = base.join("l1");
    let cfg = config(&dir, false);
    let comm = LocalComm::world(1, 1).pop().expect("comm");
    let mut ckpt = Checkpointer::init(&cfg, &comm).expect("init");
    let data = (!files).then(|| ckpt.protect(0, bytes.to_vec()));
    let mut times = Vec::new();
    for rep in 0..reps {
        let t = Instant::now();
        checkpoint_once(&mut ckpt, bytes, data.as_ref(), rep);
        times.push(t.elapsed());
    }
    drop(ckpt);
    std::fs::remove_dir_all(&dir).expect("clean");
    median(times)
}

/// The median time the managers of two nodes (one rank each) take to
/// promote a checkpoint of `bytes` per rank to level 2, after it
/// committed at level 1: of files, or of a protected region.
fn to_level_2(base: &Path, bytes: &[u8], files: bool, reps: usize) -> Duration {
    let dir = base.join("l2");
    let cfg = config(&dir, true);
    let times = LocalComm::run(2, 1, |comm| {
        let mut ckpt = Checkpointer::init(&cfg, &comm).expect("init");
        let data = (!files).then(|| ckpt.protect(0, bytes.to_vec()));
        let mut times = Vec::new();
        for rep in 0..reps {
            checkpoint_once(&mut ckpt, bytes, data.as_ref(), rep);
            let t = Instant::now();
            ckpt.wait_for_promotions().expect("promote");
            times.push(t.elapsed());
        }
        drop(ckpt);
        median(times)
    });
    std::fs::remove_dir_all(&dir).expect("clean");
    times
        .into_iter()
        .map(|t| t.expect("rank"))
        .max()
        .unwrap_or_default()
}

fn measure(base: &Path, bytes: &[u8]) -> Row {
    let reps = reps_for(bytes.len());
    let plain = median(
        (0..reps)
            .map(|rep| {
                let path = base.join(format!("plain-{rep}"));
                let t = Instant::now();
                write_file(&path, bytes);
                let took = t.elapsed();
                std::fs::remove_file(&path).expect("clean");
                took
            })
            .collect(),
    );
    Row {
        plain,
        file: at_level_1(base, bytes, true, reps),
        region: at_level_1(base, bytes, false, reps),
        promote_file: to_level_2(base, bytes, true, reps),
        promote_region: to_level_2(base, bytes, false, reps),
    }
}

fn main() {
    let sizes: Vec<usize> = std::env::var("FRAME_BENCH_SIZES")
        .ok()
        .map(|s| s.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![16, 256]);
    let base = tempfile::Builder::new()
        .prefix("frame-bench-files-")
        .tempdir_in("/dev/shm")
        .expect("tmpfs directory");
    println!(
        "file checkpoints on /dev/shm (level 1: one rank; level 2: two nodes of one rank), medians; ratio > 1: the file checkpoint is faster"
    );
    println!(
        "{:>8}  {:>12}  {:>12}  {:>12}  {:>10}  {:>10}  {:>14}  {:>14}  {:>10}",
        "MiB",
        "plain write",
        "file ckpt",
        "region ckpt",
        "vs plain",
        "vs region",
        "L2 file ckpt",
        "L2 region ckpt",
        "L2 ratio"
    );
    for mib in sizes {
        let bytes: Vec<u8> = (0..mib << 20).map(|i| (i * 31 % 251) as u8).collect();
        let r = measure(base.path(), &bytes);
        let ratio = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64();
        println!(
            "{mib:>8}  {:>7.2} GB/s  {:>7.2} GB/s  {:>7.2} GB/s  {:>9.2}x  {:>9.2}x  {:>9.1} ms  {:>9.1} ms  {:>9.2}x",
            gbps(bytes.len(), r.plain),
            gbps(bytes.len(), r.file),
            gbps(bytes.len(), r.region),
            ratio(r.plain, r.file),
            ratio(r.region, r.file),
            r.promote_file.as_secs_f64() * 1e3,
            r.promote_region.as_secs_f64() * 1e3,
            ratio(r.promote_region, r.promote_file),
        );
    }
}
