//! File checkpoints against their baselines, measured in the same run:
//!
//! - **at level 1**: the program writes its file into the path frame gives
//!   and ends the checkpoint, against a plain `write` (then `fdatasync`) of
//!   the same bytes into a new file of the same tmpfs, and against a
//!   checkpoint of the same bytes as a protected region. The file
//!   checkpoint stays on the node, so ending it moves the file; its CRCs
//!   are computed, and the retired checkpoint's files removed, on another
//!   thread. Two cases: the program *computes between checkpoints* (plain
//!   writes and file checkpoints in turn, each after a pause of three
//!   plain writes' time, so that this work is done when the next one
//!   comes), and checkpoints *back to back* (all plain writes, then all
//!   file checkpoints, each meeting the work of the checkpoint before it:
//!   the worst case);
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

/// Rounds per size: enough for a steady median of the small ones.
fn reps_for(bytes: usize) -> usize {
    if bytes >> 20 <= 16 {
        41
    } else {
        9
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
    plain_back_to_back: Duration,
    file_back_to_back: Duration,
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

/// The median of `reps` plain writes of `bytes`, each after `pause`.
fn plain_writes(base: &Path, bytes: &[u8], reps: usize, pause: Duration) -> Duration {
    let times = (0..reps)
        .map(|rep| {
            std::thread::sleep(pause);
            let path = base.join(format!("plain-{rep}"));
            let t = Instant::now();
            write_file(&path, bytes);
            let took = t.elapsed();
            std::fs::remove_file(&path).expect("clean");
            took
        })
        .collect();
    median(times)
}

/// The median of `reps` checkpoints of `bytes` at level 1 on one rank,
/// each after `pause`: as a file the program writes (`files`), or as a
/// protected region.
fn at_level_1(base: &Path, bytes: &[u8], files: bool, reps: usize, pause: Duration) -> Duration {
    let dir = base.join("l1");
    let cfg = config(&dir, false);
    let comm = LocalComm::world(1, 1).pop().expect("comm");
    let mut ckpt = Checkpointer::init(&cfg, &comm).expect("init");
    let data = (!files).then(|| ckpt.protect(0, bytes.to_vec()));
    let mut times = Vec::new();
    for rep in 0..reps {
        std::thread::sleep(pause);
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

/// Medians of `reps` rounds, each a plain write of `bytes` and a file
/// checkpoint of them, each after `pause` (so that the background work of
/// the checkpoint before is done): (plain, file).
fn in_turn(base: &Path, bytes: &[u8], reps: usize, pause: Duration) -> (Duration, Duration) {
    let dir = base.join("l1");
    let cfg = config(&dir, false);
    let comm = LocalComm::world(1, 1).pop().expect("comm");
    let mut ckpt = Checkpointer::init(&cfg, &comm).expect("init");
    let (mut plain, mut file) = (Vec::new(), Vec::new());
    for rep in 0..reps {
        plain.push(plain_writes(base, bytes, 1, pause));
        std::thread::sleep(pause);
        let t = Instant::now();
        checkpoint_once(&mut ckpt, bytes, None, rep);
        file.push(t.elapsed());
    }
    drop(ckpt);
    std::fs::remove_dir_all(&dir).expect("clean");
    (median(plain), median(file))
}

fn measure(base: &Path, bytes: &[u8]) -> Row {
    let reps = reps_for(bytes.len());
    let plain_back_to_back = plain_writes(base, bytes, reps, Duration::ZERO);
    let file_back_to_back = at_level_1(base, bytes, true, reps, Duration::ZERO);
    let (plain, file) = in_turn(base, bytes, reps, plain_back_to_back * 3);
    Row {
        plain,
        file,
        plain_back_to_back,
        file_back_to_back,
        region: at_level_1(base, bytes, false, reps, Duration::ZERO),
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
        "file checkpoints on /dev/shm (level 1: one rank; level 2: two nodes of one rank), medians; ratio > 1: the file checkpoint is faster; b2b: back to back"
    );
    println!(
        "{:>5}  {:>11}  {:>11}  {:>8}  {:>11}  {:>11}  {:>8}  {:>11}  {:>8}  {:>8}  {:>8}  {:>8}",
        "MiB",
        "plain",
        "file ckpt",
        "ratio",
        "plain b2b",
        "file b2b",
        "b2b",
        "region ckpt",
        "vs region",
        "L2 file",
        "L2 region",
        "L2 ratio"
    );
    for mib in sizes {
        let bytes: Vec<u8> = (0..mib << 20).map(|i| (i * 31 % 251) as u8).collect();
        let r = measure(base.path(), &bytes);
        let ratio = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64();
        let rate = |d: Duration| format!("{:.2} GB/s", gbps(bytes.len(), d));
        let ms = |d: Duration| format!("{:.1} ms", d.as_secs_f64() * 1e3);
        println!(
            "{mib:>5}  {:>11}  {:>11}  {:>7.2}x  {:>11}  {:>11}  {:>7.2}x  {:>11}  {:>7.2}x  {:>8}  {:>8}  {:>7.2}x",
            rate(r.plain),
            rate(r.file),
            ratio(r.plain, r.file),
            rate(r.plain_back_to_back),
            rate(r.file_back_to_back),
            ratio(r.plain_back_to_back, r.file_back_to_back),
            rate(r.region),
            ratio(r.region, r.file_back_to_back),
            ms(r.promote_file),
            ms(r.promote_region),
            ratio(r.promote_region, r.promote_file),
        );
    }
}
