//! Level 3 by XOR parity against Reed-Solomon with one parity, side by
//! side in the same run (alternated, medians):
//!
//! 1. **The codes** on one core: a node's terms of a stripe (what a
//!    promotion sends), a whole stripe encoded, and one lost data shard
//!    rebuilt, for groups of 4, 5 and 8.
//! 2. **Protect**: 8 ranks on 4 virtual nodes (threads, inline managers)
//!    checkpoint with level 3 every checkpoint; the time until every node's
//!    level-3 promotion is done (the slowest node's, from the metrics).
//! 3. **Rebuild**: node 1's storage removed, the job restarted in a new
//!    process; its `Checkpointer::init` and `recover` until every rank holds
//!    its data again (checked against what it wrote).
//!
//! Run: `cargo bench --bench xor`. `FRAME_BENCH_MIB` sets the data per
//! rank (default 64); `FRAME_BENCH_DIR` the directory the nodes' storage
//! goes in (default `/dev/shm`). Prints medians and XOR's speed-up.

mod support;

use frame::comm::{Comm, LocalComm};
use frame::config::{Config, Interval, L3Scheme};
use frame::internals::level::erasure::scale;
use frame::internals::scheme::erasure_code;
use frame::Checkpointer;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use support::{bench_dir, gbps, median, mib};

const SCHEMES: [(L3Scheme, &str); 2] = [
    (L3Scheme::ReedSolomon, "reed-solomon"),
    (L3Scheme::Xor, "xor"),
];

/// Rank `rank`'s data.
fn field(n: usize, rank: usize) -> Vec<f64> {
    (0..n)
        .map(|i| ((i + 31 * rank) as f64 * 1e-3).sin())
        .collect()
}

/// Part 1: the codes alone.
fn codes(per_rank: usize) {
    // Groups of 4 and 8: reed-solomon-erasure's one parity row is all ones
    // there (its code is XOR); of 5, it is not.
    for g in [4usize, 5, 8] {
        let k = g - 1;
        let piece = (per_rank / k).div_ceil(64) * 64;
        let data: Vec<Vec<u8>> = (0..k)
            .map(|i| (0..piece).map(|j| (j * 31 + i * 7) as u8).collect())
            .collect();
        let refs: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
        // [scheme] -> (terms, encode, rebuild) samples.
        let mut samples = [
            [Vec::new(), Vec::new(), Vec::new()],
            [Vec::new(), Vec::new(), Vec::new()],
        ];
        let mut term = vec![0u8; piece];
        let mut parity = vec![vec![0u8; piece]];
        for _ in 0..7 {
            for (i, (_, name)) in SCHEMES.iter().enumerate() {
                let code = erasure_code(name, k, 1).expect("code");
                // The terms of the node whose coefficient is not 1 under
                // Reed-Solomon, if any.
                let index = (0..k)
                    .find(|i| code.coefficients(*i).expect("coefficients")[0] != 1)
                    .unwrap_or(0);
                let t = Instant::now();
                let c = code.coefficients(index).expect("coefficients")[0];
                scale(c, black_box(&data[index]), &mut term);
                samples[i][0].push(t.elapsed());
                let t = Instant::now();
                code.encode(black_box(&refs), &mut parity).expect("encode");
                samples[i][1].push(t.elapsed());
                let mut shards: Vec<Option<Vec<u8>>> = data
                    .iter()
                    .cloned()
                    .chain(parity.iter().cloned())
                    .map(Some)
                    .collect();
                shards[1] = None;
                let t = Instant::now();
                code.reconstruct(&mut shards).expect("rebuild");
                samples[i][2].push(t.elapsed());
                assert_eq!(
                    shards[1].as_deref(),
                    Some(&data[1][..]),
                    "{name} rebuilt other bytes"
                );
            }
        }
        for (what, j, bytes) in [
            ("a node's terms", 0, piece),
            ("a whole stripe encoded", 1, piece * k),
            ("a lost shard rebuilt", 2, piece),
        ] {
            let rs = median(samples[0][j].clone());
            let xor = median(samples[1][j].clone());
            println!(
                "group {g}, {} MiB pieces, {what}: reed-solomon {:.2} GB/s, xor {:.2} GB/s -> xor {:.2}x faster",
                piece >> 20,
                gbps(bytes as u64, rs),
                gbps(bytes as u64, xor),
                rs.as_secs_f64() / xor.as_secs_f64()
            );
        }
    }
}

fn config(dir: &Path, scheme: L3Scheme) -> Config {
    let mut cfg = Config::default();
    cfg.job.id = "xorbench".into();
    cfg.snapshot.interval = Interval::Calls(1);
    cfg.l3.interval = Interval::Calls(1);
    cfg.l3.scheme = scheme;
    cfg.l3.group_size = 4;
    cfg.l3.parity = 1;
    cfg.metrics.file = dir.join("metrics.jsonl");
    cfg
}

fn node_dir(base: &Path, node: u32) -> PathBuf {
    frame::internals::node::dir_of(base, node)
}

/// The slowest node's level-3 promotion of the run (metrics).
fn protect_time(metrics: &Path) -> Duration {
    let text = std::fs::read_to_string(metrics).unwrap_or_default();
    let us = (text.lines())
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["event"] == "promotion" && v["level"] == 3 && v["ok"] == true)
        .filter_map(|v| v["micros"].as_u64())
        .max()
        .expect("a level-3 promotion in the metrics");
    Duration::from_micros(us)
}

/// Parts 2 and 3 for one scheme: (protect, rebuild).
fn end_to_end(base: &Path, scheme: usize, rep: usize, per_rank: usize) -> (Duration, Duration) {
    let dir = base.join(format!("run-{scheme}-{rep}"));
    let cfg = config(&dir, SCHEMES[scheme].0);
    let d = dir.clone();
    LocalComm::run(8, 2, move |comm| {
        let mut cfg = cfg.clone();
        cfg.storage.local_dir = node_dir(&d, comm.node());
        let mut ckpt = Checkpointer::init(&cfg, &comm).expect("init");
        let _data = ckpt.protect(0, field(per_rank / 8, comm.rank()));
        ckpt.checkpoint().expect("checkpoint");
        ckpt.wait_for_promotions().expect("promotions");
    });
    frame::internals::manager::inline::stop("xorbench");
    let protect = protect_time(&dir.join("metrics.jsonl"));
    std::fs::remove_dir_all(node_dir(&dir, 1)).expect("lose node 1");
    let out = std::process::Command::new(std::env::current_exe().expect("exe"))
        .env("FRAME_BENCH_RESTART", &dir)
        .env("FRAME_BENCH_RESTART_SCHEME", scheme.to_string())
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
    let _ = std::fs::remove_dir_all(&dir);
    (protect, Duration::from_micros(micros))
}

/// The restart of part 3, in a process of its own: prints the slowest
/// rank's time (microseconds).
fn restart(dir: &Path) {
    let scheme: usize = std::env::var("FRAME_BENCH_RESTART_SCHEME")
        .expect("scheme")
        .parse()
        .expect("scheme");
    let per_rank = mib(64) << 20;
    let cfg = config(dir, SCHEMES[scheme].0);
    let d = dir.to_path_buf();
    let took = LocalComm::run(8, 2, move |comm| {
        let mut cfg = cfg.clone();
        cfg.storage.local_dir = node_dir(&d, comm.node());
        let array = vec![1.0f64; per_rank / 8];
        comm.barrier().expect("barrier");
        let t = Instant::now();
        let mut ckpt = Checkpointer::init(&cfg, &comm).expect("init");
        let data = ckpt.protect(0, array);
        ckpt.recover().expect("recover");
        let took = t.elapsed();
        assert_eq!(ckpt.stats().recovered_from.map(|l| l.number()), Some(3));
        assert!(
            *data.read() == field(per_rank / 8, comm.rank()),
            "rank {} got other data",
            comm.rank()
        );
        took
    });
    frame::internals::manager::inline::stop("xorbench");
    let slowest = took
        .into_iter()
        .map(|t| t.expect("rank"))
        .max()
        .unwrap_or_default();
    println!("{}", slowest.as_micros());
}

fn main() {
    if let Some(dir) = std::env::var_os("FRAME_BENCH_RESTART") {
        restart(Path::new(&dir));
        return;
    }
    let per_rank = mib(64) << 20;
    codes(per_rank.min(64 << 20));
    let base = bench_dir("xor");
    let mut protect = [Vec::new(), Vec::new()];
    let mut rebuild = [Vec::new(), Vec::new()];
    for rep in 0..5 {
        for scheme in 0..2 {
            let (p, r) = end_to_end(base.path(), scheme, rep, per_rank);
            protect[scheme].push(p);
            rebuild[scheme].push(r);
        }
    }
    for (what, samples) in [
        ("level 3 complete after a checkpoint", &protect),
        (
            "restart with node 1 lost, until every rank holds its data",
            &rebuild,
        ),
    ] {
        let rs = median(samples[0].clone());
        let xor = median(samples[1].clone());
        println!(
            "8 ranks on 4 nodes (one group), {} MiB per rank, {what}: reed-solomon {:.1} ms, xor {:.1} ms -> xor {:.2}x faster (medians of 5)",
            per_rank >> 20,
            rs.as_secs_f64() * 1e3,
            xor.as_secs_f64() * 1e3,
            rs.as_secs_f64() / xor.as_secs_f64()
        );
    }
}
