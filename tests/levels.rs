//! Levels 2 and 4 end to end, in one process: rank threads on virtual nodes
//! (each with its own local directory), their inline managers promoting in
//! the background, then the loss of what each level protects against and a
//! bit-exact recovery from that level.

mod common;

use common::{ranks, scratch};
use frame::comm::Comm;
use frame::config::Interval;
use frame::{Checkpointer, Config};
use std::path::Path;

const SIZE: usize = 8;
const PER_NODE: usize = 2;

fn node_dir(base: &Path, node: u32) -> std::path::PathBuf {
    base.join(format!("node-{node}"))
}

fn level_config(base: &Path, job: &str, l2: u64, l4: u64) -> Config {
    let mut cfg = common::config(&base.join("unused"), job);
    cfg.storage.global_dir = base.join("global");
    cfg.l2.interval = Interval::Calls(l2);
    cfg.l4.interval = Interval::Calls(l4);
    cfg.l4.chunk_size = bytesize::ByteSize::kib(64);
    cfg.retention.keep_last = 2;
    cfg
}

/// The state of `rank` after `step` steps: a field that changes a little
/// every step (so level 4 has unchanged chunks to skip).
fn field(rank: usize, step: u64) -> Vec<f64> {
    (0..40_000)
        .map(|i| {
            if i % 97 == 0 {
                (i as f64 + step as f64 * 0.5 + rank as f64).sin()
            } else {
                (i * (rank + 1)) as f64
            }
        })
        .collect()
}

/// Runs `steps` steps with a snapshot after each, waits for the managers,
/// and "crashes" (no finalize). Returns the id of the last checkpoint.
fn run_and_crash(base: &Path, cfg: &Config, steps: u64) -> u64 {
    let base = base.to_path_buf();
    let cfg = cfg.clone();
    let ids = ranks(SIZE, PER_NODE, move |comm| {
        let mut cfg = cfg.clone();
        cfg.storage.local_dir = node_dir(&base, comm.node());
        let mut ckpt = Checkpointer::init(&cfg, &comm).unwrap();
        let step = ckpt.protect(0, 0u64);
        let data = ckpt.protect(1, Vec::<f64>::new());
        assert!(!ckpt.recovering());
        let mut last = 0;
        while step.get() < steps {
            step.set(step.get() + 1);
            *data.write() = field(comm.rank(), step.get());
            if let Some(id) = ckpt.snapshot().unwrap() {
                last = id;
            }
        }
        ckpt.wait_for_promotions().unwrap();
        last
    });
    ids[0]
}

/// Recovers and returns (checkpoint id, step) on every rank, checking the
/// field bit for bit.
fn recover(base: &Path, cfg: &Config) -> Vec<(u64, u64)> {
    let base = base.to_path_buf();
    let cfg = cfg.clone();
    ranks(SIZE, PER_NODE, move |comm| {
        let mut cfg = cfg.clone();
        cfg.storage.local_dir = node_dir(&base, comm.node());
        let mut ckpt = Checkpointer::init(&cfg, &comm).unwrap();
        let step = ckpt.protect(0, 0u64);
        let data = ckpt.protect(1, Vec::<f64>::new());
        assert!(
            ckpt.recovering(),
            "rank {} found nothing to recover",
            comm.rank()
        );
        let id = ckpt.recover().unwrap();
        assert_eq!(
            *data.read(),
            field(comm.rank(), step.get()),
            "rank {}",
            comm.rank()
        );
        // Carry on: the next checkpoints work at every level.
        step.set(step.get() + 1);
        *data.write() = field(comm.rank(), step.get());
        ckpt.checkpoint().unwrap();
        ckpt.wait_for_promotions().unwrap();
        ckpt.finalize().unwrap();
        (id, step.get() - 1)
    })
}

fn stop_managers(job: &str) {
    frame::manager::inline::stop(job);
}

#[test]
fn level_2_restores_a_lost_node_from_its_partner() {
    let _serial = common::serial();
    let dir = scratch();
    let cfg = level_config(dir.path(), "l2node", 1, 0);
    let last = run_and_crash(dir.path(), &cfg, 6);
    assert_eq!(last, 6);
    stop_managers("l2node");
    // Node 1 is lost with everything it had.
    std::fs::remove_dir_all(node_dir(dir.path(), 1)).unwrap();
    let got = recover(dir.path(), &cfg);
    assert!(
        got.iter().all(|&(id, step)| id == 6 && step == 6),
        "{got:?}"
    );
    stop_managers("l2node");
}

#[test]
fn level_2_rebuilds_copies_so_a_second_node_loss_is_survivable() {
    let _serial = common::serial();
    let dir = scratch();
    let cfg = level_config(dir.path(), "l2twice", 1, 0);
    run_and_crash(dir.path(), &cfg, 4);
    stop_managers("l2twice");
    std::fs::remove_dir_all(node_dir(dir.path(), 2)).unwrap();
    // Recover (copies of checkpoint 4 rebuilt), write 5, crash again.
    let base = dir.path().to_path_buf();
    let c = cfg.clone();
    ranks(SIZE, PER_NODE, move |comm| {
        let mut cfg = c.clone();
        cfg.storage.local_dir = node_dir(&base, comm.node());
        let mut ckpt = Checkpointer::init(&cfg, &comm).unwrap();
        let step = ckpt.protect(0, 0u64);
        let data = ckpt.protect(1, Vec::<f64>::new());
        assert_eq!(ckpt.recover().unwrap(), 4);
        step.set(5);
        *data.write() = field(comm.rank(), 5);
        ckpt.checkpoint().unwrap();
        ckpt.wait_for_promotions().unwrap();
    });
    stop_managers("l2twice");
    // Now node 3 goes: its partner (node 0) must have its copies of 5.
    std::fs::remove_dir_all(node_dir(dir.path(), 3)).unwrap();
    let got = recover(dir.path(), &cfg);
    assert!(
        got.iter().all(|&(id, step)| id == 5 && step == 5),
        "{got:?}"
    );
    stop_managers("l2twice");
}

#[test]
fn level_4_restores_after_every_local_directory_is_lost() {
    let _serial = common::serial();
    let dir = scratch();
    let cfg = level_config(dir.path(), "l4all", 0, 3);
    run_and_crash(dir.path(), &cfg, 7);
    stop_managers("l4all");
    for node in 0..(SIZE / PER_NODE) as u32 {
        std::fs::remove_dir_all(node_dir(dir.path(), node)).unwrap();
    }
    // Level 4 holds checkpoints 3 and 6; 6 is the newest.
    let got = recover(dir.path(), &cfg);
    assert!(
        got.iter().all(|&(id, step)| id == 6 && step == 6),
        "{got:?}"
    );
    stop_managers("l4all");
    // Finalize removed the job's level-4 files.
    let left = common::files_under(&dir.path().join("global"));
    assert!(left.is_empty(), "{left:?}");
}
