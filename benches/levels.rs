//! Levels 2 to 4, each figure measured side by side with its baseline in the
//! same run:
//!
//! 1. **Blocking**: the time a snapshot blocks the program when levels 2, 3
//!    and 4 are all due (promotion queued to the node's manager), against a
//!    plain level-1 snapshot, alternating in one job; and, over two separate
//!    jobs, every snapshot with the levels due against none. 4 ranks on 2
//!    virtual nodes, threads.
//! 2. **Encoding**: level-3 terms per core (one thread, the group's stripe
//!    shape), and a whole stripe encoded with reed-solomon-erasure and with
//!    reed-solomon-simd.
//! 3. **Promotion throughput** per level (from the managers' metrics)
//!    against a plain copy of the same bytes into a file (write + fsync).
//! 4. **Differential level 4**: a checkpoint with 10 % of its chunks changed,
//!    written differentially against a full flush: bytes and time.
//! 5. **Recovery time per level**: 8 ranks on 4 virtual nodes, each level
//!    made the lowest usable one by removing what the lower ones need.
//!
//! Run: `cargo bench --bench levels`. `FRAME_BENCH_MIB` sets the data per
//! rank (default 64; the recovery figure in docs/PERFORMANCE.md uses 256);
//! `FRAME_BENCH_ONLY_BLOCKING=1` runs only the first part,
//! `FRAME_BENCH_ONLY_RECOVERY=1` only the last,
//! `FRAME_BENCH_ONLY_THROUGHPUT=1` only the promotion throughputs (`=L2`
//! only level 2's, and so on). Prints
//! medians.

use frame::comm::{Comm, LocalComm};
use frame::config::{Config, Interval};
use frame::internals::level::erasure::Codec;
use frame::internals::level::GlobalStore;
use frame::Checkpointer;
use frame::Level;
use std::hint::black_box;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn gbps(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / d.as_secs_f64().max(1e-9) / 1e9
}

fn mib() -> usize {
    std::env::var("FRAME_BENCH_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64)
}

fn field(n: usize, seed: usize) -> Vec<f64> {
    (0..n).map(|i| ((i + seed) as f64 * 1e-3).sin()).collect()
}

fn config(base: &Path, job: &str) -> Config {
    let mut cfg = Config::default();
    cfg.storage.local_dir = base.join("unused");
    cfg.storage.global_dir = base.join("global");
    cfg.job.id = job.into();
    cfg.snapshot.interval = Interval::Calls(1);
    cfg.retention.keep_last = 2;
    cfg.l4.chunk_size = bytesize::ByteSize::mib(4);
    cfg
}

fn node_dir(base: &Path, node: u32) -> PathBuf {
    base.join(format!("node-{node}"))
}

/// Blocking time of snapshots (1.), with and without every level due, in
/// one job: levels 2, 3 and 4 are due at every second checkpoint, so plain
/// level-1 snapshots and snapshots that queue a promotion alternate, under
/// the same memory and file-system state.
fn blocking(base: &Path, per_rank: usize) {
    let pairs = 9;
    let mut cfg = config(base, "blocking");
    cfg.l2.interval = Interval::Calls(2);
    cfg.l3.interval = Interval::Calls(2);
    cfg.l4.interval = Interval::Calls(2);
    let b = base.to_path_buf();
    let times = LocalComm::run(4, 2, move |comm| {
        let mut cfg = cfg.clone();
        cfg.storage.local_dir = node_dir(&b, comm.node());
        let mut ckpt = Checkpointer::init(&cfg, &comm).expect("init");
        let _data = ckpt.protect(0, field(per_rank / 8, comm.rank()));
        let mut times = Vec::new();
        // Two rounds first, so that every file is a reused one.
        for round in 0..2 * (pairs + 2) {
            comm.barrier().expect("barrier");
            let t = Instant::now();
            ckpt.checkpoint().expect("checkpoint");
            if round >= 4 {
                times.push(t.elapsed());
            }
            // Promotion happens while the program computes; the next
            // snapshot comes after it is done.
            ckpt.wait_for_promotions().expect("promotions");
        }
        ckpt.finalize().expect("finalize");
        times
    });
    // Slowest rank per checkpoint; odd positions had the levels due.
    let slowest: Vec<Duration> = times
        .into_iter()
        .map(|t| t.expect("rank"))
        .fold(vec![Duration::ZERO; 2 * pairs], |acc, t| {
            acc.iter().zip(&t).map(|(a, b)| (*a).max(*b)).collect()
        });
    let plain = median(slowest.iter().step_by(2).copied().collect());
    let with = median(slowest.iter().skip(1).step_by(2).copied().collect());
    println!(
        "blocking, {} MiB/rank, 4 ranks on 2 nodes, alternating in one job: L1 snapshot {:.2} ms, snapshot with L2+L3+L4 due {:.2} ms -> {:.2}x (target <= 1.2x)",
        per_rank >> 20,
        plain.as_secs_f64() * 1e3,
        with.as_secs_f64() * 1e3,
        with.as_secs_f64() / plain.as_secs_f64()
    );
    frame::internals::manager::inline::stop("blocking");
}

/// The same in two separate jobs (1.), one with the levels due at every
/// checkpoint and one without: the cost over a whole run, promotions'
/// after-effects included.
fn blocking_separate(base: &Path, per_rank: usize) {
    let reps = 9;
    let run = |levels: bool| -> Duration {
        let mut cfg = config(base, if levels { "block-levels" } else { "block-l1" });
        if levels {
            cfg.l2.interval = Interval::Calls(1);
            cfg.l3.interval = Interval::Calls(1);
            cfg.l4.interval = Interval::Calls(1);
        }
        let base = base.to_path_buf();
        let times = LocalComm::run(4, 2, move |comm| {
            let mut cfg = cfg.clone();
            cfg.storage.local_dir = node_dir(&base, comm.node());
            let mut ckpt = Checkpointer::init(&cfg, &comm).expect("init");
            let _data = ckpt.protect(0, field(per_rank / 8, comm.rank()));
            let mut times = Vec::new();
            for _ in 0..reps {
                comm.barrier().expect("barrier");
                let t = Instant::now();
                ckpt.checkpoint().expect("checkpoint");
                times.push(t.elapsed());
                // Promotion happens while the program computes; the next
                // snapshot comes after it is done.
                ckpt.wait_for_promotions().expect("promotions");
            }
            ckpt.finalize().expect("finalize");
            times
        });
        let all: Vec<Duration> = times
            .into_iter()
            .map(|t| t.expect("rank"))
            .fold(vec![Duration::ZERO; reps], |acc, t| {
                acc.iter().zip(&t).map(|(a, b)| (*a).max(*b)).collect()
            });
        median(all)
    };
    let plain = run(false);
    let with = run(true);
    println!(
        "blocking, {} MiB/rank, 4 ranks on 2 nodes, two jobs: L1 snapshot {:.2} ms, snapshot with L2+L3+L4 due {:.2} ms -> {:.2}x ",
        per_rank >> 20,
        plain.as_secs_f64() * 1e3,
        with.as_secs_f64() * 1e3,
        with.as_secs_f64() / plain.as_secs_f64()
    );
    frame::internals::manager::inline::stop("block-levels");
}

/// 2. Level-3 encoding speed.
fn encoding(per_rank: usize) {
    for (g, p) in [(4usize, 1usize), (4, 2), (8, 1), (8, 2)] {
        let k = g - p;
        let piece = (per_rank / k).div_ceil(64) * 64;
        let data: Vec<Vec<u8>> = (0..k)
            .map(|i| (0..piece).map(|j| (j * 31 + i * 7) as u8).collect())
            .collect();
        let codec = Codec::new(k, p).expect("codec");
        let mut terms = vec![Vec::new(); p];
        let mut contrib = Vec::new();
        for _ in 0..7 {
            let t = Instant::now();
            codec
                .contribution(1, black_box(&data[0]), &mut terms)
                .expect("terms");
            contrib.push(t.elapsed());
        }
        let mut whole = Vec::new();
        let mut simd = Vec::new();
        let refs: Vec<&[u8]> = data.iter().map(|d| d.as_slice()).collect();
        let mut parity = vec![vec![0u8; piece]; p];
        for _ in 0..7 {
            let t = Instant::now();
            codec.encode(black_box(&refs), &mut parity).expect("encode");
            whole.push(t.elapsed());
            let t = Instant::now();
            black_box(reed_solomon_simd::encode(k, p, &refs).expect("simd"));
            simd.push(t.elapsed());
        }
        let stripe = (k * piece) as u64;
        println!(
            "L3 encode, group {g} parity {p}, {} MiB pieces: one node's terms {:.2} GB/s per core (target >= 2); whole stripe: reed-solomon-erasure {:.2} GB/s, reed-solomon-simd {:.2} GB/s -> {:.2}x",
            piece >> 20,
            gbps(piece as u64, median(contrib)),
            gbps(stripe, median(whole.clone())),
            gbps(stripe, median(simd.clone())),
            median(simd).as_secs_f64() / median(whole).as_secs_f64()
        );
    }
}

/// Promotion throughput per level against a plain file copy (3.): each
/// level alone, 4 nodes of one rank promoting at once; bytes of all nodes
/// over the slowest node's time, against one plain write+fsync of as many
/// bytes.
fn throughput(base: &Path, per_rank: usize) {
    let nodes = 4usize;
    let bytes = vec![7u8; per_rank * nodes];
    let plain = median(
        (0..5)
            .map(|i| {
                let path = base.join(format!("plain-{i}"));
                let t = Instant::now();
                let mut f = std::fs::File::create(&path).expect("create");
                f.write_all(&bytes).expect("write");
                f.sync_data().expect("sync");
                let d = t.elapsed();
                std::fs::remove_file(&path).expect("rm");
                d
            })
            .collect(),
    );
    // FRAME_BENCH_ONLY_THROUGHPUT=L2 (or L3, L4) measures one level.
    let only = std::env::var("FRAME_BENCH_ONLY_THROUGHPUT").unwrap_or_default();
    for level in [Level::L2, Level::L3, Level::L4] {
        if only.starts_with('L') && only != level.to_string() {
            continue;
        }
        let job = format!("throughput{}", level.number());
        let metrics = base.join(format!("{job}.jsonl"));
        let mut cfg = config(base, &job);
        match level {
            Level::L2 => cfg.l2.interval = Interval::Calls(1),
            Level::L3 => cfg.l3.interval = Interval::Calls(1),
            _ => cfg.l4.interval = Interval::Calls(1),
        }
        cfg.l4.differential = false;
        cfg.metrics.file = metrics.clone();
        let b = base.to_path_buf();
        LocalComm::run(nodes, 1, move |comm| {
            let mut cfg = cfg.clone();
            cfg.storage.local_dir = node_dir(&b, comm.node());
            let mut ckpt = Checkpointer::init(&cfg, &comm).expect("init");
            let _data = ckpt.protect(0, field(per_rank / 8, comm.rank()));
            for _ in 0..5 {
                ckpt.checkpoint().expect("checkpoint");
                ckpt.wait_for_promotions().expect("promotions");
            }
            ckpt.finalize().expect("finalize");
        });
        frame::internals::manager::inline::stop(&job);
        let text = std::fs::read_to_string(&metrics).unwrap_or_default();
        let records: Vec<serde_json::Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .filter(|v: &serde_json::Value| v["event"] == "promotion" && v["ok"] == true)
            .collect();
        // Per checkpoint: all nodes' bytes over the slowest node's time.
        let mut per_ckpt: std::collections::BTreeMap<u64, (u64, u64)> = Default::default();
        for v in &records {
            let e = per_ckpt
                .entry(v["checkpoint"].as_u64().unwrap_or(0))
                .or_default();
            e.0 += v["bytes_in"].as_u64().unwrap_or(0);
            e.1 = e.1.max(v["micros"].as_u64().unwrap_or(0));
        }
        let rates: Vec<Duration> = per_ckpt
            .values()
            .map(|(b, us)| {
                Duration::from_secs_f64(*us as f64 * 1e-6 * bytes.len() as f64 / (*b).max(1) as f64)
            })
            .collect();
        if rates.is_empty() {
            continue;
        }
        let d = median(rates);
        println!(
            "promotion {level} alone, {nodes} nodes x {} MiB: {:.2} GB/s, plain write+fsync of as many bytes {:.2} GB/s -> {:.2}x",
            per_rank >> 20,
            gbps(bytes.len() as u64, d),
            gbps(bytes.len() as u64, plain),
            plain.as_secs_f64() / d.as_secs_f64()
        );
    }
}

/// 4. Differential level 4 with 10 % of the chunks changed.
fn differential(base: &Path, per_rank: usize) {
    let chunk = 4 << 20;
    let mut bytes: Vec<u8> = (0..per_rank).map(|i| (i * 13 % 251) as u8).collect();
    let meta = |id: u64| frame::internals::format::Metadata {
        format_version: frame::internals::format::VERSION,
        job_id: "diff".into(),
        checkpoint_id: id,
        level: 1,
        rank: 0,
        world_size: 1,
        node: 0,
        stamp: 1,
        file: "rank-000000.fck".into(),
        file_len: per_rank as u64,
        header_crc: 0,
        data_crc: 0,
        raw_bytes: per_rank as u64,
        stored_bytes: per_rank as u64,
        compression: frame::internals::format::Compression::None,
        regions: Vec::new(),
        created_unix_ms: 0,
    };
    let mut full = Vec::new();
    let mut diff = Vec::new();
    let (mut written, mut total) = (0, 0);
    let source = base.join("diff-source.bin");
    let pieces = |bytes: &[u8]| {
        std::fs::write(&source, bytes).expect("source");
        let file = std::fs::File::open(&source).expect("source");
        frame::internals::level::Pieces::new(file, source.clone(), bytes.len() as u64)
    };
    for rep in 0..5u64 {
        let dir = base.join(format!("diff-{rep}"));
        let store = GlobalStore::open(&dir, "diff", 0).expect("store");
        store
            .write_from(&meta(1), pieces(&bytes), chunk, true)
            .expect("base");
        // Change one chunk in ten.
        for c in (0..per_rank / chunk).step_by(10) {
            bytes[c * chunk] ^= 0xff;
        }
        let file = pieces(&bytes);
        let t = Instant::now();
        let w = store.write_from(&meta(2), file, chunk, true).expect("diff");
        diff.push(t.elapsed());
        written = w.written;
        total = w.written + w.referenced;
        let file = pieces(&bytes);
        let t = Instant::now();
        store
            .write_from(&meta(3), file, chunk, false)
            .expect("full");
        full.push(t.elapsed());
        std::fs::remove_dir_all(&dir).expect("clean");
    }
    println!(
        "differential L4, {} MiB, 10% of chunks changed: wrote {} of {} MiB ({:.0}%), {:.1} ms against {:.1} ms for a full flush -> {:.2}x faster",
        per_rank >> 20,
        written >> 20,
        total >> 20,
        written as f64 * 100.0 / total.max(1) as f64,
        median(diff.clone()).as_secs_f64() * 1e3,
        median(full.clone()).as_secs_f64() * 1e3,
        median(full).as_secs_f64() / median(diff).as_secs_f64()
    );
}

/// 5. Recovery time from each level, 8 ranks on 4 nodes.
fn recovery(base: &Path, per_rank: usize) {
    for level in [Level::L1, Level::L2, Level::L3, Level::L4] {
        let mut times = Vec::new();
        for rep in 0..3 {
            let dir = base.join(format!("rec-{}-{rep}", level.number()));
            let job = format!("rec{}", level.number());
            let mut cfg = config(&dir, &job);
            cfg.l2.interval = Interval::Calls(1);
            cfg.l3.interval = Interval::Calls(1);
            cfg.l3.parity = 2;
            cfg.l4.interval = Interval::Calls(1);
            let (c, d) = (cfg.clone(), dir.clone());
            LocalComm::run(8, 2, move |comm| {
                let mut cfg = c.clone();
                cfg.storage.local_dir = node_dir(&d, comm.node());
                let mut ckpt = Checkpointer::init(&cfg, &comm).expect("init");
                let _data = ckpt.protect(0, field(per_rank / 8, comm.rank()));
                ckpt.checkpoint().expect("checkpoint");
                ckpt.wait_for_promotions().expect("promotions");
            });
            frame::internals::manager::inline::stop(&job);
            // Make `level` the lowest one every rank can use.
            let lost: &[u32] = match level {
                Level::L1 => &[],
                Level::L2 => &[1],
                Level::L3 => &[1, 2],
                Level::L4 => &[0, 1, 2, 3],
            };
            for n in lost {
                std::fs::remove_dir_all(node_dir(&dir, *n)).expect("lose node");
            }
            let (c, d) = (cfg.clone(), dir.clone());
            let took = LocalComm::run(8, 2, move |comm| {
                let mut cfg = c.clone();
                cfg.storage.local_dir = node_dir(&d, comm.node());
                let t = Instant::now();
                let mut ckpt = Checkpointer::init(&cfg, &comm).expect("init");
                let data = ckpt.protect(0, Vec::<f64>::new());
                ckpt.recover().expect("recover");
                let took = t.elapsed();
                assert_eq!(ckpt.stats().recovered_from, Some(level));
                black_box(data.read().len());
                took
            });
            frame::internals::manager::inline::stop(&job);
            times.push(
                took.into_iter()
                    .map(|t| t.expect("rank"))
                    .max()
                    .unwrap_or_default(),
            );
            let _ = std::fs::remove_dir_all(&dir);
        }
        println!(
            "recovery from {level}, 8 ranks on 4 nodes, {} MiB/rank: {:.1} ms (median of 3; init, agreement, fetch or rebuild, load)",
            per_rank >> 20,
            median(times).as_secs_f64() * 1e3
        );
    }
}

fn main() {
    let per_rank = mib() << 20;
    let base = tempfile::Builder::new()
        .prefix("frame-bench-levels-")
        .tempdir_in(if Path::new("/dev/shm").is_dir() {
            "/dev/shm"
        } else {
            "/tmp"
        })
        .expect("temp dir");
    if std::env::var_os("FRAME_BENCH_ONLY_RECOVERY").is_some() {
        recovery(base.path(), per_rank);
        return;
    }
    if std::env::var_os("FRAME_BENCH_ONLY_THROUGHPUT").is_some() {
        throughput(base.path(), per_rank);
        return;
    }
    blocking(base.path(), per_rank);
    blocking_separate(base.path(), per_rank);
    if std::env::var_os("FRAME_BENCH_ONLY_BLOCKING").is_none() {
        encoding(per_rank.min(64 << 20));
        throughput(base.path(), per_rank);
        differential(base.path(), per_rank);
        recovery(base.path(), per_rank);
    }
}
