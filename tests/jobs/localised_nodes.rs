//! Logged recovery of node failures with real processes: `frame run
//! --recovery logged --spare-nodes 1` on heat2d, a whole node (daemon,
//! manager, ranks, storage) SIGKILLed once its newest checkpoint reached
//! its partner at level 2. Its ranks start again on the spare node, take
//! that checkpoint from the partner and recompute with the survivors'
//! logs; the survivors never roll back. Each run ends with the fault-free
//! checksum, bit for bit.

use crate::common;

use common::heat2d::Heat2d;
use common::{final_checksum, finished_run, scratch, serial, Watched};
use std::path::Path;
use std::time::Duration;

/// 4 ranks, 300 steps, a checkpoint every 25 (checkpoint 5 at step 125).
const GRID: [&str; 8] = [
    "--nx", "96", "--ny", "80", "--steps", "300", "--every", "25",
];

/// Two nodes of two ranks and a spare node.
const SHAPE: [&str; 6] = [
    "--nodes",
    "2",
    "--ranks-per-node",
    "2",
    "--spare-nodes",
    "1",
];

/// Three nodes of two ranks and a spare node.
const THREE_NODES: [&str; 6] = [
    "--nodes",
    "3",
    "--ranks-per-node",
    "2",
    "--spare-nodes",
    "1",
];

const DEADLINE: Duration = Duration::from_secs(240);

/// heat2d under `frame run ARGS` with level 2 every checkpoint, watched.
fn start(dir: &Path, args: &[&str], heat2d: &[&str]) -> Watched {
    // The ranks write their metrics into the runtime's file.
    let heat = Heat2d::new(heat2d)
        .env("FRAME_L2_INTERVAL", "1")
        .env("RUST_LOG", "frame=info")
        .metrics_in(dir);
    Watched::spawn(&mut heat.frame_run_command(dir, args))
}

/// The ranks that went back to a checkpoint, and from which level.
fn restored(out: &str) -> Vec<(u32, String)> {
    let mut ranks: Vec<(u32, String)> = out
        .lines()
        .filter_map(|l| l.strip_prefix("heat2d: rank "))
        .filter(|l| l.contains(" restored checkpoint "))
        .filter_map(|l| {
            let rank = l.split(' ').next()?.parse().ok()?;
            let from = l.split(" from ").nth(1)?.split(',').next()?;
            Some((rank, from.to_string()))
        })
        .collect();
    ranks.sort();
    ranks
}

/// The ranks of the records of `event`.
fn ranks_of(job: &common::Job, event: &str) -> Vec<u64> {
    let mut ranks: Vec<u64> = (job.metrics.iter())
        .filter(|m| m["event"] == event)
        .filter_map(|m| m["rank"].as_u64())
        .collect();
    ranks.sort();
    ranks
}

/// A node dies with its storage while every rank holds before a step,
/// once its manager promoted the newest checkpoint to level 2 (the copies
/// are on its partner): node 1 before step 140 (mid-interval), node 0
/// (rank 0's) right after checkpoint 5 (step 126) and right after
/// checkpoint 6 (step 150), and node 1 with two spares per failed rank
/// (`--spares 2`). Its two ranks restart on spare node 2 without a new
/// epoch, restore that checkpoint from the partner's copies and recompute; the other two wait without rolling
/// back and send their logs. After it node 2 takes the lost node's place
/// in the promotions: the partner's copies go to it.
#[test]
fn a_lost_node_is_a_logged_recovery_from_its_partners_copies() {
    let _g = serial();
    let dir = scratch();
    let reference = start(dir.path(), &SHAPE, &GRID);
    let (ok, out) = reference.finish(DEADLINE);
    assert!(ok, "{out}");
    let want = final_checksum(&out);
    let cases: [(u32, &str, &[&str]); 4] = [
        (1, "140", &[]),
        (0, "126", &[]),
        (0, "150", &[]),
        // Each replacement shares its recomputation with a helper on the
        // spare node.
        (1, "140", &["--spares", "2"]),
    ];
    for (node, hold, extra) in cases {
        let job = lose_node(dir.path(), node, hold, extra);
        assert_eq!(final_checksum(&job.out), want, "{}", job.out);
        let lost: Vec<u64> = [2 * node, 2 * node + 1].map(u64::from).to_vec();
        let kept: Vec<u64> = [2 - 2 * node, 3 - 2 * node].map(u64::from).to_vec();
        let back = restored(&job.out);
        let from_l2: Vec<(u32, String)> = lost.iter().map(|r| (*r as u32, "L2".into())).collect();
        assert_eq!(back, from_l2, "node {node}:\n{}", job.out);
        let recoveries: Vec<_> = (job.metrics.iter())
            .filter(|m| m["event"] == "runtime_recovery")
            .collect();
        assert_eq!(recoveries.len(), 1, "{}", job.out);
        let r = recoveries[0];
        assert_eq!(
            (
                &r["mode"],
                &r["kind"],
                &r["failed_nodes"],
                &r["failed_ranks"]
            ),
            (
                &"logged".into(),
                &"node".into(),
                &serde_json::json!([node]),
                &serde_json::json!(lost)
            ),
            "{r}"
        );
        assert!(r["fallback"].is_null(), "{r}");
        // Both replacements recomputed from the checkpoint; the others
        // idled, and the neighbour of the lost block sent its log.
        assert_eq!(ranks_of(&job, "rejoin"), lost, "{}", job.out);
        assert_eq!(ranks_of(&job, "idle"), kept, "{}", job.out);
        // (The replacements answer each other's requests too, with what
        // they sent each other anew before the request came: the
        // receiver drops those numbers as had.)
        let replays: Vec<(u64, u64)> = (job.metrics.iter())
            .filter(|m| m["event"] == "replay")
            .filter_map(|m| Some((m["rank"].as_u64()?, m["messages"].as_u64()?)))
            .collect();
        assert!(
            replays.iter().any(|(r, n)| kept.contains(r) && *n > 0),
            "{replays:?}"
        );
        assert!(!job.out.contains("restarting globally"), "{}", job.out);
        if !extra.is_empty() {
            for rank in &lost {
                let line = format!("heat2d: rank {rank} shares 25 steps with 1 helper(s)");
                assert!(job.out.contains(&line), "{}", job.out);
            }
            assert_eq!(ranks_of(&job, "help"), lost, "{}", job.out);
        }
    }
}

/// heat2d holding before step `hold` loses node `node` once its manager
/// promoted the newest checkpoint before the hold to level 2, and runs to its end; promotions after
/// the recovery reach the spare in the lost node's place.
fn lose_node(dir: &Path, node: u32, hold: &str, extra: &[&str]) -> common::Job {
    let args = [&SHAPE[..], &["--recovery", "logged"], extra].concat();
    let heat2d = [&GRID[..], &["--hold-at", hold]].concat();
    let job = start(dir, &args, &heat2d);
    let wait = Duration::from_secs(120);
    let this = format!("node={node}");
    // The newest checkpoint before the hold (one every 25 steps) has the
    // node's copies on its partner: the replacements restore it. A slow
    // machine may still be promoting it when the ranks reach the hold.
    let newest = format!("checkpoint={}", hold.parse::<u64>().unwrap() / 25);
    job.wait_for(&["promoted", &newest, "level=L2", &this], wait);
    assert!(common::kill_node(dir, node), "node {node} not found");
    let partner = format!("node={}", 1 - node);
    job.wait_for(&["promoted", "checkpoint=8", "level=L2", &partner], wait);
    let (status, out) = job.finish_status(DEADLINE);
    finished_run(dir, status, out)
}

/// With two partner copies per node (`l2.copies = 2`), a lost node's
/// replacements take their copies from the second partner when the first
/// lacks them: three nodes of two ranks (node 1's copies on nodes 2 and
/// 0), node 2's copies of node 1's checkpoint 5 removed before node 1 dies
/// at step 140. Both replacements restore checkpoint 5 from level 2, from
/// node 0, and the job ends with the fault-free checksum.
#[test]
fn a_lost_node_rejoins_from_its_second_partner_when_the_first_lacks_the_copy() {
    let _g = serial();
    let dir = scratch();
    let shape = THREE_NODES;
    let heat = Heat2d::new(GRID)
        .env("FRAME_L2_INTERVAL", "1")
        .env("FRAME_L2_COPIES", "2")
        .env("RUST_LOG", "frame=info")
        .metrics_in(dir.path());
    let reference = Watched::spawn(&mut heat.frame_run_command(dir.path(), &shape));
    let (ok, out) = reference.finish(DEADLINE);
    assert!(ok, "{out}");
    let want = final_checksum(&out);

    let args = [&shape[..], &["--recovery", "logged"]].concat();
    let held = heat.clone().args(["--hold-at", "140"]);
    let job = Watched::spawn(&mut held.frame_run_command(dir.path(), &args));
    let wait = Duration::from_secs(120);
    // Node 1's copies of checkpoint 5 are on both its partners.
    job.wait_for(&["promoted", "checkpoint=5", "level=L2", "node=1"], wait);
    let copies = dir
        .path()
        .join("local/node-2/heat2d/l2/ckpt-00000000000000000005");
    for rank in [2, 3] {
        for name in [
            format!("rank-{rank:06}.fck"),
            format!("rank-{rank:06}.meta.json"),
        ] {
            let path = copies.join(&name);
            std::fs::remove_file(&path)
                .unwrap_or_else(|e| panic!("{}: {e}\n{}", path.display(), job.output()));
        }
    }
    assert!(common::kill_node(dir.path(), 1), "node 1 not found");
    let (status, out) = job.finish_status(DEADLINE);
    let job = finished_run(dir.path(), status, out);
    assert!(job.status.success(), "{}", job.out);
    assert_eq!(final_checksum(&job.out), want, "{}", job.out);
    assert_eq!(
        restored(&job.out),
        vec![(2, "L2".to_string()), (3, "L2".to_string())],
        "{}",
        job.out
    );
    let from_partner: Vec<&str> = (job.out.lines())
        .filter(|l| l.contains("took the checkpoint from the failed node's partner"))
        .collect();
    assert_eq!(from_partner.len(), 2, "{}", job.out);
    assert!(
        from_partner.iter().all(|l| l.contains("partner=0")),
        "{from_partner:?}"
    );
    assert!(!job.out.contains("restarting globally"), "{}", job.out);
}

/// Without level 2 nothing of the lost node's checkpoint survives on
/// another node: its replacements say so, naming the key, and the job
/// restarts globally from level 4, bit for bit.
#[test]
fn a_lost_node_without_level_2_restarts_globally_and_says_why() {
    let _g = serial();
    let dir = scratch();
    let global = dir.path().join("global");
    let heat = Heat2d::new(GRID)
        .env("FRAME_L2_INTERVAL", "0")
        .env("FRAME_L4_INTERVAL", "1")
        .env("FRAME_STORAGE_GLOBAL_DIR", &global);
    let run = |args: &[&str]| {
        let mut cmd = heat.frame_run_command(dir.path(), args);
        let job = Watched::spawn(&mut cmd);
        let (status, out) = job.finish_status(DEADLINE);
        finished_run(dir.path(), status, out)
    };
    let reference = run(&SHAPE);
    assert!(reference.status.success(), "{}", reference.out);
    let args = [
        &SHAPE[..],
        &["--recovery", "logged", "--inject", "node:1@iter=140"],
    ]
    .concat();
    let job = run(&args);
    assert!(job.status.success(), "{}", job.out);
    assert_eq!(final_checksum(&job.out), final_checksum(&reference.out));
    let fallbacks: Vec<&str> = (job.metrics.iter())
        .filter(|m| m["event"] == "runtime_recovery")
        .filter_map(|m| m["fallback"].as_str())
        .collect();
    assert!(
        fallbacks.len() == 1
            && fallbacks[0].contains("node 1 died")
            && fallbacks[0].contains("l2.interval"),
        "{fallbacks:?}\n{}",
        job.out
    );
}

/// A spare node that stood in for a lost node keeps that node's storage
/// under its id: the copies promoted after the stand-in are on the spare,
/// and the checkpoints' layouts name the lost node. Node 1 dies before
/// step 140 once checkpoint 5 reached level 2 (spare node 2 takes its
/// ranks in a logged recovery). After step 170, once checkpoint 6 was
/// promoted with the spare in node 1's place, rank 2 dies, and its
/// replacement again: the job restarts globally from level 1 (epoch 2).
/// Node 0 dies before step 172, before the epoch's first checkpoint: in
/// epoch 3 ranks 0 and 1 start again on spare node 3 and every rank
/// takes checkpoint 6 from level 2, their copies on the spare node that
/// stood in for node 1. The run ends bit for bit.
#[test]
fn a_global_restart_after_a_stand_in_finds_the_copies_on_the_spare() {
    let _g = serial();
    let dir = scratch();
    let shape = [&SHAPE[..4], &["--spare-nodes", "2"]].concat();
    let reference = start(dir.path(), &shape, &GRID);
    let (ok, out) = reference.finish(DEADLINE);
    assert!(ok, "{out}");
    let want = final_checksum(&out);
    let args = [&shape[..], &["--recovery", "logged"]].concat();
    let args = [&args[..], &["--inject", "node:0@iter=172"]].concat();
    let heat2d = [
        &GRID[..],
        &["--hold-at", "140", "--die-at", "170", "--die-rank", "2"],
        &["--die-after-promotions"],
    ]
    .concat();
    let job = start(dir.path(), &args, &heat2d);
    let wait = Duration::from_secs(120);
    job.wait_for(&["promoted", "checkpoint=5", "level=L2", "node=1"], wait);
    assert!(common::kill_node(dir.path(), 1), "node 1 not found");
    let (status, out) = job.finish_status(DEADLINE);
    let job = finished_run(dir.path(), status, out);
    assert!(job.status.success(), "{}", job.out);
    assert_eq!(final_checksum(&job.out), want, "{}", job.out);
    let recoveries: Vec<String> = (job.metrics.iter())
        .filter(|m| m["event"] == "runtime_recovery")
        .map(|m| format!("{} {} {}", m["mode"], m["failed_nodes"], m["failed_ranks"]))
        .collect();
    let expected = [
        "\"logged\" [1] [2,3]",
        "\"logged\" [] [2]",
        "\"online\" [] [2]",
        "\"online\" [0] [0,1]",
    ];
    assert_eq!(recoveries, expected, "{}", job.out);
    for rank in 0..4 {
        let line = format!("heat2d: rank {rank} restored checkpoint 6 (step 150) from L2, entered");
        let back: Vec<&str> = (job.out.lines())
            .filter(|l| l.starts_with(&line) && l.ends_with(" in epoch 3"))
            .collect();
        assert_eq!(back.len(), 1, "rank {rank}:\n{}", job.out);
    }
}

/// Level 3 without level 2: three nodes of two ranks in one group of
/// parity 1, and a spare node. Node 1 dies before step 140 once every
/// node wrote its parity of checkpoint 5. Its ranks start again on the
/// spare and each decodes its own file of checkpoint 5 from the shards
/// nodes 0 and 2 keep, through their managers, while those nodes' ranks
/// wait without rolling back; the run ends bit for bit, with no global
/// restart. Twice: small files (one window of one piece each), and files
/// of 4.4 MB (a node's blob cut in two pieces of more than one 4 MiB
/// window: rank 3's file starts in the first piece and ends in the
/// second).
#[test]
fn a_lost_node_is_a_logged_recovery_from_its_groups_parity() {
    let _g = serial();
    let large = [
        "--nx", "2048", "--ny", "1600", "--steps", "300", "--every", "25",
    ];
    for grid in [GRID, large] {
        let dir = scratch();
        lose_node_with_level_3(dir.path(), &grid);
    }
}

/// heat2d on `grid` loses node 1 with level 3 alone (see above).
fn lose_node_with_level_3(dir: &Path, grid: &[&str]) {
    let metrics = dir.join("metrics.jsonl");
    let heat = Heat2d::default()
        .env("FRAME_L2_INTERVAL", "0")
        .env("FRAME_L3_INTERVAL", "1")
        .env("FRAME_L3_GROUP_SIZE", "3")
        .env("FRAME_L3_PARITY", "1")
        .env("RUST_LOG", "frame=info")
        .metrics_in(dir);
    let shape = THREE_NODES;
    let spawn = |args: &[&str], heat2d: &[&str]| {
        let mut cmd = heat.clone().args(heat2d).frame_run_command(dir, args);
        Watched::spawn(&mut cmd)
    };
    let (ok, out) = spawn(&shape, grid).finish(DEADLINE);
    assert!(ok, "{out}");
    let want = final_checksum(&out);
    let _ = std::fs::remove_file(&metrics);
    let args = [&shape[..], &["--recovery", "logged"]].concat();
    let heat2d = [grid, &["--hold-at", "140"]].concat();
    let job = spawn(&args, &heat2d);
    let wait = Duration::from_secs(120);
    // Every member's parity of checkpoint 5 is written.
    let written = std::cell::RefCell::new(std::collections::BTreeSet::new());
    job.wait_until(
        "with every node's parity of checkpoint 5",
        |line| {
            if line.contains("parity written") && line.contains("checkpoint=5 ") {
                let node = line.split("node=").nth(1).unwrap_or("").to_string();
                written.borrow_mut().insert(node);
            }
            written.borrow().len() == 3
        },
        wait,
    );
    assert!(common::kill_node(dir, 1), "node 1 not found");
    let (status, out) = job.finish_status(DEADLINE);
    let job = finished_run(dir, status, out);
    assert!(job.status.success(), "{}", job.out);
    assert_eq!(final_checksum(&job.out), want, "{}", job.out);
    assert!(!job.out.contains("restarting globally"), "{}", job.out);
    assert_eq!(
        restored(&job.out),
        [(2, "L3".to_string()), (3, "L3".to_string())],
        "{}",
        job.out
    );
    assert_eq!(ranks_of(&job, "rejoin"), [2, 3], "{}", job.out);
    assert_eq!(ranks_of(&job, "idle"), [0, 1, 4, 5], "{}", job.out);
}
