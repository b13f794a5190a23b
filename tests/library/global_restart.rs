//! A global restart from level 4 with every node's storage lost: each
//! rank's file comes from the global directory as its regions load, what
//! it stores is known before the load, a region at a time restores too,
//! and level 1 keeps a copy for a failure before the next checkpoint; a
//! restart killed at any of its file-system calls restores next time.

use crate::common;

use super::levels::{
    field, level_config, run_and_crash, run_and_crash_as, stop_managers, Shape, PER_NODE, SIZE,
    USUAL,
};
use common::{node_dir, ranks, scratch};
use frame::comm::Comm;
use frame::Checkpointer;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

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

/// The job of the kill sweep: 4 ranks on 2 nodes.
const SWEPT: Shape = Shape {
    size: 4,
    per_node: 2,
    len: 20_000,
};
/// The kill sweep's job name.
const SWEPT_JOB: &str = "l4kill";

/// A restart from level 4 of the sweep's job in `FRAME_TEST_DIR`: every
/// rank must restore checkpoint 6 bit for bit; then the process ends
/// without a checkpoint or finalize (which would remove level 4).
#[test]
#[ignore = "runs as the child process of the level-4 kill sweep"]
fn level_4_restart_child() {
    if !common::is_child() {
        return;
    }
    let base = PathBuf::from(std::env::var_os("FRAME_TEST_DIR").expect("FRAME_TEST_DIR"));
    let cfg = level_config(&base, SWEPT_JOB, 0, 3);
    ranks(SWEPT.size, SWEPT.per_node, move |comm| {
        let mut cfg = cfg.clone();
        cfg.storage.local_dir = node_dir(&base, comm.node());
        let mut ckpt = Checkpointer::init(&cfg, &comm).expect("init");
        let step = ckpt.protect(0, 0u64);
        let data = ckpt.protect(1, Vec::<f64>::new());
        assert_eq!(ckpt.recover().expect("recover"), 6);
        assert_eq!(step.get(), 6);
        assert!(
            *data.read() == field(comm.rank(), 6, SWEPT.len),
            "rank {}: wrong data",
            comm.rank()
        );
        println!("@rank {} restored 6", comm.rank());
    });
}

/// Runs the restart child on `dir`, with `env`.
fn restart(dir: &Path, env: &[(&str, String)]) -> (std::process::ExitStatus, String) {
    let mut cmd = common::self_as_child(concat!(module_path!(), "::level_4_restart_child"));
    cmd.env("FRAME_TEST_DIR", dir);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let (status, out, err) = common::run(&mut cmd, Duration::from_secs(120));
    (status, out + &err)
}

/// Kill at every file-system call of a restart from level 4 (every
/// node's storage lost): the kill leaves level 4 whole and level 1 with
/// nothing that passes for a checkpoint, and the next restart restores
/// the newest checkpoint bit for bit on every rank.
#[test]
fn a_restart_from_level_4_killed_at_any_file_system_call_restores_next_time() {
    let _serial = common::serial();
    let mut patience = common::Patience::new(Duration::from_secs(900));
    let dir = scratch();
    let start = dir.path().join("start");
    let cfg = level_config(&start, SWEPT_JOB, 0, 3);
    assert_eq!(run_and_crash_as(&start, &cfg, 7, SWEPT), 7);
    stop_managers(SWEPT_JOB);
    for node in 0..(SWEPT.size / SWEPT.per_node) as u32 {
        std::fs::remove_dir_all(node_dir(&start, node)).unwrap();
    }
    // The crash points each rank passes in a whole restart.
    let counting = dir.path().join("count");
    common::copy_tree(&start, &counting);
    let trace = dir.path().join("trace");
    let (status, out) = restart(
        &counting,
        &[("FRAME_CRASH_TRACE", trace.display().to_string())],
    );
    assert!(status.success(), "the counting restart failed:\n{out}");
    let counts = common::kill_sweep::crash_points(&trace, SWEPT.size);
    assert!(counts.iter().all(|c| *c > 0), "no crash points: {counts:?}");
    let mut kills = 0;
    for (rank, &count) in counts.iter().enumerate() {
        for n in 1..=count {
            if let Some(why) = patience.exhausted() {
                panic!("level-4 kill sweep: {why}");
            }
            let what = format!("rank {rank} killed at crash point {n} of {count}");
            let work = dir.path().join(format!("kill-{rank}-{n}"));
            common::copy_tree(&start, &work);
            let (status, out) = restart(&work, &[("FRAME_CRASH_AT", format!("{rank}:{n}"))]);
            assert_eq!(
                status.signal(),
                Some(9),
                "{what}: not killed ({status}):\n{out}"
            );
            kills += 1;
            common::kill_sweep::assert_no_damage(&work, &what);
            let (status, next) = restart(&work, &[]);
            assert!(status.success(), "{what}: the next restart failed:\n{next}");
            let restored = next.lines().filter(|l| l.ends_with("restored 6")).count();
            assert_eq!(
                restored, SWEPT.size,
                "{what}: the next restart said:\n{next}"
            );
            std::fs::remove_dir_all(&work).ok();
        }
    }
    eprintln!("killed {kills} restarts from level 4 ({counts:?} crash points per rank)");
}

/// A level-4 record whose region count is absurd (damaged, or not
/// frame's) is refused before any memory is sized by it: every rank
/// falls back to the previous level-4 checkpoint, bit for bit.
#[test]
fn a_record_with_an_absurd_region_count_falls_back_without_sizing_memory() {
    let _serial = common::serial();
    let dir = scratch();
    let cfg = lose_every_node(dir.path(), "l4count");
    let manifest = dir
        .path()
        .join("global/l4count/l4/ckpt-00000000000000000006/rank-000001.l4.json");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let mut json: serde_json::Value = serde_json::from_str(&text).unwrap();
    json["record"]["regions"][1]["count"] = serde_json::json!(1u64 << 60);
    std::fs::write(&manifest, serde_json::to_vec(&json).unwrap()).unwrap();
    let base = dir.path().to_path_buf();
    ranks(SIZE, PER_NODE, move |comm| {
        let mut cfg = cfg.clone();
        cfg.storage.local_dir = node_dir(&base, comm.node());
        let mut ckpt = Checkpointer::init(&cfg, &comm).unwrap();
        let step = ckpt.protect(0, 0u64);
        let data = ckpt.protect(1, Vec::<f64>::new());
        assert_eq!(ckpt.recover().unwrap(), 3);
        assert_eq!(step.get(), 3);
        assert_eq!(
            *data.read(),
            field(comm.rank(), 3, USUAL.len),
            "rank {}",
            comm.rank()
        );
    });
    stop_managers("l4count");
}
