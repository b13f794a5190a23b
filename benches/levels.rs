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
//! 4. **Recovery per level against its limit**: 8 ranks on 4 virtual
//!    nodes, each level made the lowest usable one by removing the storage
//!    of some nodes, the job restarted in a new process; against what
//!    moving the lost bytes and loading every rank's data costs without
//!    frame, measured in the same run (see [`recovery`]).
//!
//! Run: `cargo bench --bench levels`. `FRAME_BENCH_MIB` sets the data per
//! rank (default 64); `FRAME_BENCH_DIR` the directory the nodes' storage
//! and the global directory go in (default `/dev/shm`; a tmpfs mounted with
//! `huge=within_size` measures huge pages);
//! `FRAME_BENCH_ONLY_BLOCKING=1` runs only the first part,
//! `FRAME_BENCH_ONLY_RECOVERY=1` only the last (`=L2` only level 2's, and
//! so on), `FRAME_BENCH_ONLY_THROUGHPUT=1` only the promotion throughputs
//! (`=L2` only level 2's). Prints medians.

mod support;

use frame::comm::{Comm, LocalComm};
use frame::config::{Config, Interval};
use frame::internals::level::erasure::scale;
use frame::internals::scheme::erasure_code;
use frame::Checkpointer;
use frame::Level;
use std::hint::black_box;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use support::{bench_dir, gbps, median, mib};

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
        let codec = erasure_code("reed-solomon", k, p).expect("codec");
        let mut terms = vec![vec![0u8; piece]; p];
        let mut contrib = Vec::new();
        for _ in 0..7 {
            let t = Instant::now();
            let coefficients = codec.coefficients(1).expect("coefficients");
            for (c, term) in coefficients.into_iter().zip(&mut terms) {
                scale(c, black_box(&data[0]), term);
            }
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
    let plain_write = |i: usize| {
        let path = base.join(format!("plain-{i}"));
        let t = Instant::now();
        let mut f = std::fs::File::create(&path).expect("create");
        f.write_all(&bytes).expect("write");
        f.sync_data().expect("sync");
        let d = t.elapsed();
        std::fs::remove_file(&path).expect("rm");
        d
    };
    // FRAME_BENCH_ONLY_THROUGHPUT=L2 (or L3, L4) measures one level.
    let only = std::env::var("FRAME_BENCH_ONLY_THROUGHPUT").unwrap_or_default();
    for level in [Level::L2, Level::L3, Level::L4] {
        if only.starts_with('L') && only != level.to_string() {
            continue;
        }
        // The baseline right before each level: this shared machine's
        // speed drifts within a run.
        let plain = median((0..5).map(plain_write).collect());
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

/// A recovery measured by part 4: the level that must serve it, the level-3
/// parity, and the nodes whose storage is lost.
#[derive(Clone, Copy)]
struct Scenario {
    level: Level,
    parity: u32,
    lost: &'static [u32],
    /// Level 2 on (off for the level-3 run compared with VeloC's XOR).
    l2: bool,
}

const SCENARIOS: [Scenario; 5] = [
    Scenario {
        level: Level::L1,
        parity: 2,
        lost: &[],
        l2: true,
    },
    Scenario {
        level: Level::L2,
        parity: 2,
        lost: &[1],
        l2: true,
    },
    Scenario {
        level: Level::L3,
        parity: 2,
        lost: &[1, 2],
        l2: true,
    },
    Scenario {
        level: Level::L3,
        parity: 1,
        lost: &[1],
        l2: false,
    },
    Scenario {
        level: Level::L4,
        parity: 2,
        lost: &[0, 1, 2, 3],
        l2: true,
    },
];

/// The configuration of the recovery runs: every level (level 2 only with
/// `l2`) at every checkpoint, level 3 over the 4 nodes with `parity`.
fn recovery_config(dir: &Path, job: &str, parity: u32, l2: bool) -> Config {
    let mut cfg = config(dir, job);
    cfg.l2.interval = Interval::Calls(u64::from(l2));
    cfg.l3.interval = Interval::Calls(1);
    cfg.l3.parity = parity;
    cfg.l4.interval = Interval::Calls(1);
    cfg.metrics.file = dir.join("metrics.jsonl");
    cfg
}

/// Part 5, recovery per level against its limit: a job of 8 ranks on 4 nodes
/// writes one checkpoint and waits for every level; the storage of the
/// scenario's nodes is removed; a new process (a restarted job) then
/// starts frame and recovers. The limit, measured in the same run, is what
/// moving the lost bytes costs without frame: sent over a Unix socket (L2,
/// L3) or read from the global directory (L4) and written to new files on
/// the RAM disk, for level 3 decoded at the codec's speed on one core, then
/// every rank's data copied into its arrays (8 concurrent `memcpy`).
fn recovery(base: &Path, per_rank: usize) {
    let codec = |p| decode_rate(per_rank, p);
    let rates = [codec(1), codec(2)];
    // FRAME_BENCH_ONLY_RECOVERY=L2 (or L1, L3, L4) measures one level.
    let only = std::env::var("FRAME_BENCH_ONLY_RECOVERY").unwrap_or_default();
    for sc in SCENARIOS {
        if only.starts_with('L') && only != sc.level.to_string() {
            continue;
        }
        let mut times = Vec::new();
        let mut limits = Vec::new();
        let mut phases = Vec::new();
        let mut redundancy = Vec::new();
        for rep in 0..3 {
            let dir = base.join(format!("rec-{}-{rep}", sc.level.number()));
            let job = format!("rec{}", sc.level.number());
            let cfg = recovery_config(&dir, &job, sc.parity, sc.l2);
            let d = dir.clone();
            LocalComm::run(8, 2, move |comm| {
                let mut cfg = cfg.clone();
                cfg.storage.local_dir = node_dir(&d, comm.node());
                let mut ckpt = Checkpointer::init(&cfg, &comm).expect("init");
                let _data = ckpt.protect(0, field(per_rank / 8, comm.rank()));
                ckpt.checkpoint().expect("checkpoint");
                ckpt.wait_for_promotions().expect("promotions");
            });
            frame::internals::manager::inline::stop(&job);
            redundancy.push(promotion_time(&dir.join("metrics.jsonl"), Level::L3));
            std::fs::remove_file(dir.join("metrics.jsonl")).expect("metrics");
            for n in sc.lost {
                std::fs::remove_dir_all(node_dir(&dir, *n)).expect("lose node");
            }
            let lost_ranks = sc.lost.len() * 2;
            let moved = match sc.level {
                Level::L1 => Duration::ZERO,
                Level::L4 => read_and_write(&dir, 8, per_rank),
                _ => over_socket(&dir, lost_ranks, per_rank),
            };
            let decoded = match sc.level {
                Level::L3 => Duration::from_secs_f64(
                    (lost_ranks * per_rank) as f64 / rates[sc.parity as usize - 1],
                ),
                _ => Duration::ZERO,
            };
            limits.push(moved + decoded + concurrent_memcpy(8, per_rank));
            let out = std::process::Command::new(std::env::current_exe().expect("exe"))
                .env("FRAME_BENCH_RESTART", &dir)
                .env("FRAME_BENCH_RESTART_JOB", &job)
                .env("FRAME_BENCH_RESTART_LEVEL", sc.level.number().to_string())
                .env("FRAME_BENCH_RESTART_PARITY", sc.parity.to_string())
                .env("FRAME_BENCH_RESTART_L2", if sc.l2 { "1" } else { "0" })
                .env("FRAME_BENCH_MIB", (per_rank >> 20).to_string())
                .stderr(std::process::Stdio::inherit())
                .output()
                .expect("restart process");
            assert!(
                out.status.success(),
                "the restart failed (its messages are above)"
            );
            let micros: u64 = String::from_utf8_lossy(&out.stdout)
                .trim()
                .parse()
                .expect("the restart's time");
            times.push(Duration::from_micros(micros));
            phases.push(recovery_phases(&dir.join("metrics.jsonl")));
            let _ = std::fs::remove_dir_all(&dir);
        }
        let (took, limit) = (median(times), median(limits));
        phases.sort_by(|a, b| a[1].total_cmp(&b[1]));
        let p = phases[phases.len() / 2];
        let l3 = if sc.level == Level::L3 {
            format!(
                "; level-3 redundancy complete {:.1} ms after the checkpoint",
                median(redundancy).as_secs_f64() * 1e3
            )
        } else {
            String::new()
        };
        println!(
            "recovery from {}, 8 ranks on 4 nodes, {} MiB/rank, node(s) {:?} lost{}{}: {:.1} ms (identify {:.1}, fetch or rebuild {:.1}, load {:.1}); limit in the same run {:.1} ms -> {:.2}x of the limit{l3} (medians of 3)",
            sc.level,
            per_rank >> 20,
            sc.lost,
            if sc.level == Level::L3 {
                format!(", parity {}", sc.parity)
            } else {
                String::new()
            },
            if sc.l2 { "" } else { ", no level 2" },
            took.as_secs_f64() * 1e3,
            p[0],
            p[1],
            p[2],
            limit.as_secs_f64() * 1e3,
            took.as_secs_f64() / limit.as_secs_f64()
        );
    }
}

/// The restart of part 4, in a process of its own: 8 rank threads start
/// frame and recover from what the directory holds; prints the slowest
/// rank's time from the start of the restart (microseconds).
fn restart(dir: &Path) {
    let var = |k: &str| std::env::var(k).expect(k);
    let job = var("FRAME_BENCH_RESTART_JOB");
    let level: u8 = var("FRAME_BENCH_RESTART_LEVEL").parse().expect("level");
    let parity: u32 = var("FRAME_BENCH_RESTART_PARITY").parse().expect("parity");
    let per_rank = mib(64) << 20;
    let l2 = var("FRAME_BENCH_RESTART_L2") == "1";
    let cfg = recovery_config(dir, &job, parity, l2);
    let d = dir.to_path_buf();
    let took = LocalComm::run(8, 2, move |comm| {
        let mut cfg = cfg.clone();
        cfg.storage.local_dir = node_dir(&d, comm.node());
        // The program's arrays exist (and are touched) before it starts
        // frame and recovers them.
        let array = vec![1.0f64; per_rank / 8];
        comm.barrier().expect("barrier");
        let t = Instant::now();
        let mut ckpt = Checkpointer::init(&cfg, &comm).expect("init");
        let data = ckpt.protect(0, array);
        ckpt.recover().expect("recover");
        let took = t.elapsed();
        assert_eq!(ckpt.stats().recovered_from.map(|l| l.number()), Some(level));
        black_box(data.read().len());
        took
    });
    frame::internals::manager::inline::stop(&job);
    let slowest = took
        .into_iter()
        .map(|t| t.expect("rank"))
        .max()
        .unwrap_or_default();
    println!("{}", slowest.as_micros());
}

/// The slowest node's time for the promotion to `level` (metrics).
fn promotion_time(metrics: &Path, level: Level) -> Duration {
    let text = std::fs::read_to_string(metrics).unwrap_or_default();
    let us = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["event"] == "promotion" && v["level"] == level.number() && v["ok"] == true)
        .filter_map(|v| v["micros"].as_u64())
        .max()
        .unwrap_or(0);
    Duration::from_micros(us)
}

/// Bytes per second the codec rebuilds lost data at, on one core: a group
/// of 4 with `parity` (the recovery's shape), `parity` data shards lost.
fn decode_rate(per_rank: usize, parity: usize) -> f64 {
    let (k, p) = (4 - parity, parity);
    let piece = (per_rank.min(64 << 20) / k).div_ceil(64) * 64;
    let codec = erasure_code("reed-solomon", k, p).expect("codec");
    let data: Vec<Vec<u8>> = (0..k)
        .map(|i| {
            field(piece / 8, i)
                .iter()
                .flat_map(|x| x.to_le_bytes())
                .collect()
        })
        .collect();
    let refs: Vec<&[u8]> = data.iter().map(|d| d.as_slice()).collect();
    let mut parity = vec![vec![0u8; piece]; p];
    codec.encode(&refs, &mut parity).expect("encode");
    let times: Vec<Duration> = (0..5)
        .map(|_| {
            let mut shards: Vec<Option<Vec<u8>>> = vec![None; p];
            shards.extend(data[p..].iter().cloned().map(Some));
            shards.extend(parity.iter().cloned().map(Some));
            let t = Instant::now();
            codec.reconstruct(&mut shards).expect("decode");
            let d = t.elapsed();
            black_box(shards);
            d
        })
        .collect();
    (p * piece) as f64 / median(times).as_secs_f64()
}

/// Runs `f(r)` on `ranks` threads at once; the slowest's time.
fn slowest(ranks: usize, f: impl Fn(usize) -> Duration + Sync) -> Duration {
    std::thread::scope(|s| {
        let f = &f;
        let handles: Vec<_> = (0..ranks).map(|r| s.spawn(move || f(r))).collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("rank"))
            .max()
            .unwrap_or_default()
    })
}

/// `ranks` threads at once, each sending `per_rank` bytes over a Unix
/// socket in 4 MiB writes to a reader that writes them to a new file in
/// `dir`: the slowest's time.
fn over_socket(dir: &Path, ranks: usize, per_rank: usize) -> Duration {
    use std::io::Read;
    use std::os::unix::net::UnixStream;
    let out = dir.join("limit");
    std::fs::create_dir_all(&out).expect("limit dir");
    let took = slowest(ranks, |r| {
        let (mut tx, mut rx) = UnixStream::pair().expect("pair");
        let t = Instant::now();
        let sender = std::thread::spawn(move || {
            let src = vec![3u8; 4 << 20];
            let mut left = per_rank;
            while left > 0 {
                let n = left.min(src.len());
                tx.write_all(&src[..n]).expect("send");
                left -= n;
            }
        });
        let mut f = std::fs::File::create(out.join(format!("r{r}"))).expect("create");
        let mut buf = vec![0u8; 4 << 20];
        let mut left = per_rank;
        while left > 0 {
            let n = left.min(buf.len());
            rx.read_exact(&mut buf[..n]).expect("receive");
            f.write_all(&buf[..n]).expect("write");
            left -= n;
        }
        sender.join().expect("sender");
        t.elapsed()
    });
    let _ = std::fs::remove_dir_all(&out);
    took
}

/// `ranks` files of `per_rank` bytes in `dir` (written first, untimed),
/// each read and written to a new file by its own thread: the slowest's
/// time.
fn read_and_write(dir: &Path, ranks: usize, per_rank: usize) -> Duration {
    use std::io::Read;
    let out = dir.join("limit");
    std::fs::create_dir_all(&out).expect("limit dir");
    let src = vec![5u8; per_rank];
    for r in 0..ranks {
        std::fs::write(out.join(format!("in{r}")), &src).expect("source");
    }
    drop(src);
    let took = slowest(ranks, |r| {
        let t = Instant::now();
        let mut i = std::fs::File::open(out.join(format!("in{r}"))).expect("open");
        let mut f = std::fs::File::create(out.join(format!("out{r}"))).expect("create");
        let mut buf = vec![0u8; 4 << 20];
        loop {
            let n = i.read(&mut buf).expect("read");
            if n == 0 {
                break;
            }
            f.write_all(&buf[..n]).expect("write");
        }
        t.elapsed()
    });
    let _ = std::fs::remove_dir_all(&out);
    took
}

/// `ranks` threads at once, each copying `per_rank` bytes into an array it
/// touched before: the slowest's time.
fn concurrent_memcpy(ranks: usize, per_rank: usize) -> Duration {
    slowest(ranks, |_| {
        let src = vec![9u8; per_rank];
        let mut dst = vec![1u8; per_rank];
        let t = Instant::now();
        dst.copy_from_slice(black_box(&src));
        let d = t.elapsed();
        black_box(&dst);
        d
    })
}

/// The recovery record's identify, fetch and load times (ms).
fn recovery_phases(metrics: &Path) -> [f64; 3] {
    let text = std::fs::read_to_string(metrics).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["event"] == "recovery")
        .map(|v| ["identify_ms", "fetch_ms", "load_ms"].map(|k| v[k].as_f64().unwrap_or(0.0)))
        .unwrap_or_default()
}

fn main() {
    if let Some(dir) = std::env::var_os("FRAME_BENCH_RESTART") {
        restart(Path::new(&dir));
        return;
    }
    let per_rank = mib(64) << 20;
    let base = bench_dir("levels");
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
        recovery(base.path(), per_rank);
    }
}
