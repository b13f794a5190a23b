//! `retention.levels`: what a commit at one level does to the older
//! checkpoints levels 2 and 3 keep, checked on every node after each
//! checkpoint of a run whose checkpoints go to levels 2, 3, 2, 4, 2, 3 in
//! turn, and a recovery from what is left.

use crate::common;
use crate::levels::{field, level_config, recover_as, stop_managers, USUAL};

use common::{node_dir, ranks, scratch};
use frame::comm::Comm;
use frame::config::{Interval, LevelRetention};
use frame::{Checkpointer, Config, Level};
use std::path::Path;

/// The levels checkpoints 1 to 6 go to.
const TURNS: [Level; 6] = [
    Level::L2,
    Level::L3,
    Level::L2,
    Level::L4,
    Level::L2,
    Level::L3,
];

/// A run of 8 ranks on 4 nodes with every level on, promoted only when
/// asked, and `policy`.
fn config(base: &Path, job: &str, policy: LevelRetention) -> Config {
    let mut cfg = level_config(base, job, 1000, 1000);
    cfg.l3.interval = Interval::Calls(1000);
    cfg.l3.group_size = 4;
    cfg.l3.parity = 1;
    cfg.retention.levels = policy;
    cfg
}

/// Ids of the checkpoint directories of `level` under a node's directory.
fn held(node: &Path, job: &str, level: &str) -> Vec<u64> {
    let mut ids: Vec<u64> = std::fs::read_dir(node.join(job).join(level))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.strip_prefix("ckpt-")?.parse().ok())
        .collect();
    ids.sort_unstable();
    ids
}

/// Runs the turns; every rank returns, after each checkpoint was
/// committed everywhere, what its node holds at levels 2 and 3.
fn run(base: &Path, cfg: &Config) -> Vec<Vec<(Vec<u64>, Vec<u64>)>> {
    let (base, cfg) = (base.to_path_buf(), cfg.clone());
    ranks(USUAL.size, USUAL.per_node, move |comm| {
        let mut cfg = cfg.clone();
        cfg.storage.local_dir = node_dir(&base, comm.node());
        let mut ckpt = Checkpointer::init(&cfg, &comm).unwrap();
        let step = ckpt.protect(0, 0u64);
        let data = ckpt.protect(1, Vec::<f64>::new());
        let mut seen = Vec::new();
        for level in TURNS {
            step.set(step.get() + 1);
            *data.write() = field(comm.rank(), step.get(), USUAL.len);
            ckpt.checkpoint_at(level).unwrap();
            ckpt.wait_for_promotions().unwrap();
            // Every node's leader has had its manager record the commit.
            comm.barrier().unwrap();
            let local = &cfg.storage.local_dir;
            seen.push((
                held(local, &cfg.job.id, "l2"),
                held(local, &cfg.job.id, "l3"),
            ));
            comm.barrier().unwrap();
        }
        seen
    })
}

#[test]
fn a_commit_retires_the_older_checkpoints_its_policy_names_on_every_node() {
    let _serial = common::serial();
    let none: Vec<u64> = Vec::new();
    let at = |id: u64| vec![id];
    // What levels 2 and 3 hold after each of the six checkpoints.
    let expected = [
        (
            LevelRetention::Each,
            [
                (at(1), none.clone()),
                (at(1), at(2)),
                (at(3), at(2)),
                (at(3), at(2)),
                (at(5), at(2)),
                (at(5), at(6)),
            ],
        ),
        (
            LevelRetention::Ordered,
            [
                (at(1), none.clone()),
                (none.clone(), at(2)),
                (at(3), at(2)),
                (none.clone(), none.clone()),
                (at(5), none.clone()),
                (none.clone(), at(6)),
            ],
        ),
        (
            LevelRetention::Newest,
            [
                (at(1), none.clone()),
                (none.clone(), at(2)),
                (at(3), none.clone()),
                (none.clone(), none.clone()),
                (at(5), none.clone()),
                (none.clone(), at(6)),
            ],
        ),
    ];
    for (policy, want) in expected {
        let dir = scratch();
        let job = "retire";
        let cfg = config(dir.path(), job, policy);
        let seen = run(dir.path(), &cfg);
        stop_managers(job);
        for (rank, got) in seen.iter().enumerate() {
            assert_eq!(got.as_slice(), want.as_slice(), "{policy:?}, rank {rank}");
        }
    }
}

#[test]
fn with_the_newest_only_a_lost_node_is_rebuilt_from_parity_bit_exact() {
    let _serial = common::serial();
    let dir = scratch();
    let job = "newestl2";
    let cfg = config(dir.path(), job, LevelRetention::Newest);
    run(dir.path(), &cfg);
    stop_managers(job);
    // Checkpoint 6 went to level 3 and is the only one above level 1:
    // node 1 lost, its group's parity rebuilds it.
    std::fs::remove_dir_all(node_dir(dir.path(), 1)).unwrap();
    let got = recover_as(dir.path(), &cfg, USUAL);
    assert!(
        got.iter().all(|&(id, step)| id == 6 && step == 6),
        "{got:?}"
    );
    stop_managers(job);
}
