//! Failure-aware recovery against the iterative baseline, in one process:
//! six rank threads on six virtual nodes (groups {0,1,2} and {3,4,5}, one
//! parity each; partners 0→1→…→5→0), every level promoted, then the loss
//! of nodes that each level protects against (and one damaged copy). Both
//! strategies must restore the same checkpoint from the same level, bit
//! for bit; `frame` in one round, the baseline in one round per level it
//! tried.

use crate::common;

use common::{node_dir, ranks, scratch};
use frame::comm::Comm;
use frame::config::{Interval, Strategy};
use frame::Level;
use frame::{Checkpointer, Config};
use std::path::Path;

const SIZE: usize = 6;
const STEPS: u64 = 6;

fn level_config(base: &Path, job: &str, strategy: Strategy) -> Config {
    let mut cfg = common::config(&base.join("unused"), job);
    cfg.storage.global_dir = base.join("global");
    cfg.l2.interval = Interval::Calls(1);
    cfg.l3.interval = Interval::Calls(1);
    cfg.l3.group_size = 3;
    cfg.l3.parity = 1;
    cfg.l4.interval = Interval::Calls(2);
    cfg.l4.block_size = bytesize::ByteSize::kib(64);
    cfg.recovery.strategy = strategy;
    cfg
}

/// The state of `rank` after `step` steps.
fn field(rank: usize, step: u64) -> Vec<f64> {
    (0..20_000)
        .map(|i| ((i + 7 * rank) as f64 * 0.001 + step as f64).sin())
        .collect()
}

/// Runs every step with a snapshot, waits for the managers, and stops
/// without finalizing (a crash).
fn run_and_crash(base: &Path, cfg: &Config) {
    let base = base.to_path_buf();
    let shared = cfg.clone();
    ranks(SIZE, 1, move |comm| {
        let mut cfg = shared.clone();
        cfg.storage.local_dir = node_dir(&base, comm.node());
        let mut ckpt = Checkpointer::init(&cfg, &comm).unwrap();
        let step = ckpt.protect(0, 0u64);
        let data = ckpt.protect(1, Vec::<f64>::new());
        while step.get() < STEPS {
            step.set(step.get() + 1);
            *data.write() = field(comm.rank(), step.get());
            ckpt.snapshot().unwrap();
        }
        ckpt.wait_for_promotions().unwrap();
    });
    frame::internals::manager::inline::stop(&cfg.job.id);
}

/// What a recovery did, as rank 0 saw it (every rank checks its data).
#[derive(Debug, PartialEq)]
struct Outcome {
    id: u64,
    level: Option<Level>,
    rounds: u32,
}

fn recover(base: &Path, cfg: &Config) -> Outcome {
    let base = base.to_path_buf();
    let shared = cfg.clone();
    let out = ranks(SIZE, 1, move |comm| {
        let mut cfg = shared.clone();
        cfg.storage.local_dir = node_dir(&base, comm.node());
        let mut ckpt = Checkpointer::init(&cfg, &comm).unwrap();
        let step = ckpt.protect(0, 0u64);
        let data = ckpt.protect(1, Vec::<f64>::new());
        assert!(ckpt.recovering(), "rank {} found nothing", comm.rank());
        let id = ckpt.recover().unwrap();
        assert_eq!(step.get(), id, "rank {}", comm.rank());
        assert_eq!(
            *data.read(),
            field(comm.rank(), step.get()),
            "rank {}",
            comm.rank()
        );
        let stats = ckpt.stats();
        Outcome {
            id,
            level: stats.recovered_from,
            rounds: stats.recovery_rounds,
        }
    });
    frame::internals::manager::inline::stop(&cfg.job.id);
    let first = &out[0];
    for o in &out {
        assert_eq!((o.id, o.level), (first.id, first.level));
    }
    Outcome {
        id: first.id,
        level: first.level,
        rounds: first.rounds,
    }
}

/// Makes a checkpoint tree, applies `damage`, and recovers with `strategy`.
fn case(strategy: Strategy, damage: &dyn Fn(&Path)) -> Outcome {
    let dir = scratch();
    let job = match strategy {
        Strategy::FailureAware => "aware",
        Strategy::Iterative => "iterative",
    };
    let cfg = level_config(dir.path(), job, strategy);
    run_and_crash(dir.path(), &cfg);
    damage(dir.path());
    recover(dir.path(), &cfg)
}

fn lose(base: &Path, nodes: &[u32]) {
    for n in nodes {
        std::fs::remove_dir_all(node_dir(base, *n)).unwrap();
    }
}

/// Flips a byte in the middle of every `level` data file (`"l1"` or
/// `"l2"`) of `rank` kept on `node`.
fn damage(base: &Path, node: u32, rank: u32, level: &str) {
    let job = std::fs::read_dir(node_dir(base, node))
        .unwrap()
        .flatten()
        .find(|e| e.path().join(level).is_dir())
        .unwrap()
        .path();
    let mut hit = 0;
    for ckpt in std::fs::read_dir(job.join(level)).unwrap().flatten() {
        let file = ckpt.path().join(format!("rank-{rank:06}.fck"));
        if let Ok(mut bytes) = std::fs::read(&file) {
            let mid = bytes.len() / 2;
            bytes[mid] ^= 0x5a;
            std::fs::write(&file, bytes).unwrap();
            hit += 1;
        }
    }
    assert!(hit > 0, "no {level} file of rank {rank} on node {node}");
}

/// Both strategies on one failure: same checkpoint, same level, data bit
/// for bit (checked in `recover`); `frame` in a single round.
fn both(name: &str, expected: Level, damage: &dyn Fn(&Path)) {
    both_in(name, expected, 1, damage)
}

/// As [`both`], with `frame` taking `rounds` exchanges (damage found while
/// loading level 1 costs a second one, after the damaged file is dropped).
fn both_in(name: &str, expected: Level, rounds: u32, damage: &dyn Fn(&Path)) {
    let aware = case(Strategy::FailureAware, damage);
    let iterative = case(Strategy::Iterative, damage);
    println!("{name}: frame {aware:?}, iterative {iterative:?}");
    assert_eq!(aware.level, Some(expected), "{name}: frame {aware:?}");
    assert_eq!(
        (aware.id, aware.level),
        (iterative.id, iterative.level),
        "{name}"
    );
    assert_eq!(
        aware.rounds, rounds,
        "{name}: frame took {} rounds",
        aware.rounds
    );
    // The baseline's rounds: level 1, each level above it up to the one
    // that worked, and its final level-1 agreement.
    let tried = expected as u32;
    assert!(
        iterative.rounds > tried,
        "{name}: iterative took {} rounds",
        iterative.rounds
    );
}

#[test]
fn a_lost_rank_process_restores_from_level_1() {
    let _serial = common::serial();
    both("L1", Level::L1, &|_| {});
}

#[test]
fn a_lost_node_restores_from_its_partner() {
    let _serial = common::serial();
    both("L2", Level::L2, &|b| lose(b, &[1]));
}

#[test]
fn a_lost_node_and_its_partner_restore_from_parity() {
    let _serial = common::serial();
    // Node 2's copy lived on node 3; each group lost one node.
    both("L3", Level::L3, &|b| lose(b, &[2, 3]));
}

#[test]
fn more_lost_nodes_in_a_group_than_parity_restore_from_the_global_directory() {
    let _serial = common::serial();
    both("L4", Level::L4, &|b| lose(b, &[0, 1]));
}

#[test]
fn a_damaged_partner_copy_moves_every_rank_to_the_next_level() {
    let _serial = common::serial();
    // Node 1 is lost and node 2's copy of its rank is damaged: found while
    // fetching, after which level 3 restores the same checkpoint.
    both("L2 damaged", Level::L3, &|b| {
        lose(b, &[1]);
        damage(b, 2, 1, "l2");
    });
}

#[test]
fn a_damaged_level_1_file_is_fetched_from_the_partner() {
    let _serial = common::serial();
    // Every node lives, but rank 4's own files are silently damaged: its
    // partner's copy of the same checkpoint replaces them.
    both_in("L1 damaged", Level::L2, 2, &|b| damage(b, 4, 4, "l1"));
}

/// Leaves checkpoint `id` as a job killed while writing it does: every
/// rank but `victim` has its level-1 file, no level committed it, and every
/// node's `LATEST` pointer still names the one before.
fn interrupt(base: &Path, id: u64, victim: u32) {
    let ckpt = format!("ckpt-{id:020}");
    let victim = format!("rank-{victim:06}.");
    for entry in std::fs::read_dir(base).unwrap().flatten() {
        for job in std::fs::read_dir(entry.path()).unwrap().flatten() {
            let job = job.path();
            for level in ["l2", "l3", "l4"] {
                let _ = std::fs::remove_dir_all(job.join(level).join(&ckpt));
            }
            let l1 = job.join("l1");
            for file in std::fs::read_dir(l1.join(&ckpt))
                .into_iter()
                .flatten()
                .flatten()
            {
                if file.file_name().to_string_lossy().starts_with(&victim) {
                    std::fs::remove_file(file.path()).unwrap();
                }
            }
            let pointer = l1.join("LATEST");
            if let Ok(text) = std::fs::read_to_string(&pointer) {
                let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
                v["checkpoint_id"] = (id - 1).into();
                std::fs::write(&pointer, v.to_string()).unwrap();
            }
        }
    }
}

#[test]
fn a_checkpoint_interrupted_before_its_commit_leaves_level_1_the_one_before() {
    let _serial = common::serial();
    // The baseline tries level 1 at the newest checkpoint that committed,
    // not at the newest file some rank holds.
    both("L1 interrupted", Level::L1, &|b| {
        interrupt(b, STEPS, SIZE as u32 - 1)
    });
}
