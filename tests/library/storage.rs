//! Node-local storage stays within the formula of docs/STORAGE.md
//! ([`Config::storage_need`]) while a job runs with every level on: every
//! level prunes as soon as a newer checkpoint of it commits, on every
//! node, including the partner copies and parity a node keeps for others.

use crate::common;

use common::heat2d::Heat2d;
use common::storage::Watch;
use common::{run, scratch, serial};
use frame::config::{Config, Interval, LevelRetention, NodeData};
use std::path::Path;
use std::time::Duration;

const DEADLINE: Duration = Duration::from_secs(300);
const NODES: u32 = 4;

/// `retention.levels` as the configuration spells it.
fn policy_name(levels: LevelRetention) -> &'static str {
    match levels {
        LevelRetention::Each => "each",
        LevelRetention::Ordered => "ordered",
        LevelRetention::Newest => "newest",
    }
}

/// The bytes of one checkpoint of node `n`'s ranks: the rank files of its
/// newest level-1 checkpoint (kept at the end of the run).
fn own_bytes(local: &Path, n: u32) -> u64 {
    let l1 = local.join(format!("node-{n}/heat2d/l1"));
    let newest = std::fs::read_dir(&l1)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("ckpt-")
        })
        .max()
        .unwrap_or_else(|| panic!("no level-1 checkpoint under {}", l1.display()));
    std::fs::read_dir(&newest)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".fck"))
        .map(|e| e.metadata().unwrap().len())
        .sum()
}

/// Runs heat2d on 4 nodes of 2 ranks with levels 2 (every checkpoint,
/// `copies` partners per node), 3 (every second) and 4 (every fourth),
/// `grid` giving its size and checkpoints, the global directory in
/// `global`, within `deadline`; checks that every node's directory stayed
/// within the formula the whole run and that the program wrote
/// `checkpoints`; `levels` is `retention.levels`.
fn within_the_formula(
    grid: &[&str],
    copies: u32,
    checkpoints: u32,
    global: &Path,
    deadline: Duration,
    levels: LevelRetention,
) {
    let dir = scratch();
    let local = dir.path().join("local");
    let copies_text = copies.to_string();
    let settings = [
        ("FRAME_L2_INTERVAL", "1"),
        ("FRAME_L2_COPIES", copies_text.as_str()),
        ("FRAME_L3_INTERVAL", "2"),
        ("FRAME_L4_INTERVAL", "4"),
        ("FRAME_MANAGER_QUEUE", "1"),
        ("FRAME_RETENTION_KEEP_ON_FINALIZE", "true"),
        ("FRAME_RETENTION_LEVELS", policy_name(levels)),
    ];
    let mut cmd = Heat2d::new(["--nodes", "4", "--ranks-per-node", "2"])
        .args(grid)
        .local(&local)
        .env("FRAME_STORAGE_GLOBAL_DIR", global)
        .envs(settings)
        .command();
    std::fs::create_dir_all(&local).unwrap();
    let watch = Watch::start(local.clone(), NODES);
    let (status, out, err) = run(&mut cmd, deadline);
    let peaks = watch.finish();
    assert!(status.success(), "{out}{err}");
    assert!(
        out.contains(&format!("wrote {checkpoints} checkpoint(s)")),
        "{out}"
    );

    // The configuration the job ran with: the defaults and the settings.
    let mut cfg = Config::default();
    cfg.l2.interval = Interval::Calls(1);
    cfg.l2.copies = copies;
    cfg.l3.interval = Interval::Calls(2);
    cfg.l4.interval = Interval::Calls(4);
    cfg.manager.queue = 1;
    cfg.retention.levels = levels;
    let own: Vec<u64> = (0..NODES).map(|n| own_bytes(&local, n)).collect();
    let largest = *own.iter().max().unwrap();
    // Records and markers: a few KiB per file, well within this.
    let slack = 1 << 20;
    for n in 0..NODES {
        let data = NodeData {
            own: own[n as usize],
            // Node n keeps the copies of the `copies` nodes before it.
            partner: (1..=copies)
                .map(|d| own[((n + NODES - d) % NODES) as usize])
                .sum(),
            largest_blob: largest + 64 * 1024,
            group: NODES,
        };
        let need = cfg.storage_need(data);
        let peak = peaks[&n];
        println!(
            "node {n}: peak {peak} bytes, formula {need:?} = {}",
            need.total()
        );
        assert!(
            peak >= 2 * data.own,
            "node {n}: the watch saw {peak} bytes, less than two checkpoints"
        );
        assert!(
            peak <= need.total() + slack,
            "node {n} held {peak} bytes, above the {} the formula allows ({need:?})",
            need.total() + slack
        );
    }
}

/// Twenty checkpoints of a 2048 x 2048 grid with `copies` partner copies
/// per node and `levels`.
fn twenty_checkpoints(copies: u32, levels: LevelRetention) {
    let _g = serial();
    let global = scratch();
    within_the_formula(
        &[
            "--nx", "2048", "--ny", "2048", "--steps", "200", "--every", "10",
        ],
        copies,
        20,
        global.path(),
        DEADLINE,
        levels,
    );
}

/// With two partner copies per node (the large run below has one).
#[test]
fn twenty_checkpoints_at_every_level_keep_every_node_within_the_formula() {
    twenty_checkpoints(2, LevelRetention::Each);
}

/// With one copy per node and a commit at any level retiring the older
/// checkpoints of levels 2 and 3, whose formula counts one checkpoint of
/// the node's own files fewer.
#[test]
fn with_only_the_newest_above_level_1_every_node_stays_within_its_formula() {
    twenty_checkpoints(1, LevelRetention::Newest);
}

/// 8 ranks of `FRAME_TEST_BIG_MIB` MiB each (64 by default, to keep CI
/// short; 256 needs a machine with some 30 GiB of memory for the tmpfs
/// and the program), every level, 10 checkpoints, the global directory on
/// disk: the job completes and every node stays within the formula.
#[test]
fn large_ranks_at_every_level_complete_within_the_formula() {
    let _g = serial();
    let mib: u64 = std::env::var("FRAME_TEST_BIG_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    let side = (((mib << 20) / 8 * 8) as f64).sqrt() as u64;
    let side = side.to_string();
    let global = tempfile::Builder::new()
        .prefix("frame-test-global-")
        .tempdir()
        .unwrap();
    within_the_formula(
        &[
            "--nx", &side, "--ny", &side, "--steps", "10", "--every", "1",
        ],
        1,
        10,
        global.path(),
        // Three seconds per MiB of each rank: about three times what the
        // 2-core test machine takes.
        DEADLINE.max(Duration::from_secs(3 * mib)),
        LevelRetention::Each,
    );
}
