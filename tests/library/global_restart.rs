//! A global restart from level 4 with every node's storage lost: each
//! rank's file comes from the global directory as its regions load, what
//! it stores is known before the load, a region at a time restores too,
//! and level 1 keeps a copy for a failure before the next checkpoint.

use crate::common;

use super::levels::{field, level_config, run_and_crash, stop_managers, PER_NODE, SIZE, USUAL};
use common::{node_dir, ranks, scratch};
use frame::comm::Comm;
use frame::Checkpointer;
use std::path::Path;

/// Runs job `job` to step 7 (level 4 every 3rd checkpoint: it holds 3
/// and 6), then removes every node's storage.
fn lose_every_node(base: &Path, job: &str) -> frame::Config {
    let cfg = level_config(base, job, 0, 3);
    assert_eq!(run_and_crash(base, &cfg, 7), 7);
    stop_managers(job);
    for node in 0..(SIZE / PER_NODE) as u32 {
        std::fs::remove_dir_all(node_dir(base, node)).unwrap();
    }
    cfg
}

#[test]
fn a_restart_from_level_4_loads_and_leaves_a_level_1_copy_for_the_next_failure() {
    let _serial = common::serial();
    let dir = scratch();
    let cfg = lose_every_node(dir.path(), "l4once");
    for pass in ["from level 4", "from level 1"] {
        let base = dir.path().to_path_buf();
        let c = cfg.clone();
        ranks(SIZE, PER_NODE, move |comm| {
            let mut cfg = c.clone();
            cfg.storage.local_dir = node_dir(&base, comm.node());
            let mut ckpt = Checkpointer::init(&cfg, &comm).unwrap();
            assert_eq!(ckpt.recovery_id(), Some(6), "{pass}");
            let stored: Vec<(u32, u64)> = (ckpt.stored_regions().iter())
                .map(|r| (r.id, r.count))
                .collect();
            assert_eq!(stored, [(0, 1), (1, USUAL.len as u64)], "{pass}");
            assert_eq!(
                ckpt.stored_region(1).map(|r| r.count),
                Some(USUAL.len as u64)
            );
            let step = ckpt.protect(0, 0u64);
            let data = ckpt.protect(1, Vec::<f64>::new());
            assert_eq!(ckpt.recover().unwrap(), 6, "{pass}");
            assert_eq!(step.get(), 6);
            assert_eq!(
                *data.read(),
                field(comm.rank(), 6, USUAL.len),
                "{pass}, rank {}",
                comm.rank()
            );
            // The job dies again before its next checkpoint.
        });
        stop_managers("l4once");
        // The global level goes too: what the restart left in level 1 is
        // all the next one has.
        let global = dir.path().join("global").join("l4once");
        if global.exists() {
            std::fs::remove_dir_all(global).unwrap();
        }
    }
}

#[test]
fn a_region_at_a_time_restores_from_level_4_and_ids_continue() {
    let _serial = common::serial();
    let dir = scratch();
    let cfg = lose_every_node(dir.path(), "l4region");
    let base = dir.path().to_path_buf();
    ranks(SIZE, PER_NODE, move |comm| {
        let mut cfg = cfg.clone();
        cfg.storage.local_dir = node_dir(&base, comm.node());
        let mut ckpt = Checkpointer::init(&cfg, &comm).unwrap();
        let data = ckpt.protect(1, Vec::<f64>::new());
        let step = ckpt.protect(0, 99u64);
        ckpt.recover_region(1).unwrap();
        assert_eq!(
            *data.read(),
            field(comm.rank(), 6, USUAL.len),
            "rank {}",
            comm.rank()
        );
        assert_eq!(step.get(), 99, "only region 1 was restored");
        // Checkpoint 7 went with the nodes: the next is 7 again.
        assert_eq!(ckpt.checkpoint().unwrap(), 7);
        ckpt.finalize().unwrap();
    });
    stop_managers("l4region");
}
