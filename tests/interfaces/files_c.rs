//! File checkpoints from C under `frame run`: `examples/c/files.c` keeps
//! its state in one file per rank written with `fwrite` (a different size
//! on every rank) and reads it back with `fread`. With every level on (6
//! nodes of one rank, partner = next node, groups {0,1,2} and {3,4,5} with
//! one parity share, 2 spares) it is killed and recovered online from each
//! level, and redeployed after the whole job is killed; every run must end
//! with the fault-free checksum, and each recovery must use its level. A
//! file of 1 GiB on one rank goes through levels 2 to 4 with every
//! manager's peak memory under a quarter of it, and comes back from level
//! 2 after its node is lost. With level 1 alone, the files a checkpoint
//! holds as written come back online after a rank is killed.

use crate::common;

use common::{compile_c, frame_run_with, scratch, serial, Job, CHILD_DEADLINE as DEADLINE};
use std::path::{Path, PathBuf};

const NODES: [&str; 6] = [
    "--nodes",
    "6",
    "--ranks-per-node",
    "1",
    "--spare-nodes",
    "2",
];
const PROGRAM: [&str; 6] = ["--steps", "240", "--every", "10", "--cells", "20000"];

fn program() -> (tempfile::TempDir, PathBuf) {
    let bin = scratch();
    let exe = bin.path().join("files_c");
    compile_c("examples/c/files.c", &exe);
    (bin, exe)
}

/// Runs the program under `frame run` with every level on, storage in
/// `dir`.
fn files(exe: &Path, dir: &Path, args: &[&str], program_args: &[&str]) -> Job {
    let metrics = dir.join("metrics.jsonl");
    let global = dir.join("global");
    let env = [
        ("FRAME_STORAGE_GLOBAL_DIR", Some(global.to_str().unwrap())),
        ("FRAME_METRICS_FILE", Some(metrics.to_str().unwrap())),
        ("FRAME_L2_INTERVAL", Some("1")),
        ("FRAME_L3_INTERVAL", Some("2")),
        ("FRAME_L3_GROUP_SIZE", Some("3")),
        ("FRAME_L3_PARITY", Some("1")),
        ("FRAME_L4_INTERVAL", Some("3")),
        ("FRAME_L4_CHUNK_SIZE", Some("64 KiB")),
        ("FRAME_SNAPSHOT_CHUNK_SIZE", Some("64 KiB")),
        ("FRAME_CONFIG", None),
    ];
    let mut all = NODES.to_vec();
    all.extend(args);
    let mut prog = PROGRAM.to_vec();
    prog.extend(program_args);
    frame_run_with(dir, &all, exe, &prog, &env)
}

#[test]
fn a_file_per_rank_is_recovered_from_every_level_online_and_redeployed() {
    let _g = serial();
    let (_bin, exe) = program();
    let dir = scratch();
    let clean = files(&exe, dir.path(), &[], &[]);
    assert!(clean.status.success(), "{}", clean.out);
    assert!(clean.recovery_levels().is_empty(), "{}", clean.out);
    let reference = common::final_checksum(&clean.out);

    let cases: [(&str, &[&str], &[u64]); 4] = [
        ("L1: a rank", &["rank:2@iter=155"], &[1]),
        ("L2: a node", &["node:1@iter=155"], &[2]),
        ("L3: a node and its partner", &["node:2,3@iter=155"], &[3]),
        ("L4: two nodes of one group", &["node:0,1@iter=155"], &[4]),
    ];
    for (name, inject, want) in cases {
        let dir = scratch();
        let mut args = Vec::new();
        for i in inject {
            args.extend(["--inject", i]);
        }
        let job = files(&exe, dir.path(), &args, &[]);
        assert!(job.status.success(), "{name}:\n{}", job.out);
        assert_eq!(job.recovery_levels(), want, "{name}:\n{}", job.out);
        // The step depends on how far the managers got (a level commits
        // in the background); the file is read back either way.
        assert!(job.out.contains(" from its file"), "{name}:\n{}", job.out);
        assert_eq!(
            common::final_checksum(&job.out),
            reference,
            "{name}:\n{}",
            job.out
        );
    }

    // Redeployed: the whole job killed by the runtime's redeploy after a
    // node failure, started again on the spare, from level 2.
    let dir = scratch();
    let job = files(
        &exe,
        dir.path(),
        &["--recovery", "redeploy", "--inject", "node:4@iter=155"],
        &[],
    );
    assert!(job.status.success(), "redeploy:\n{}", job.out);
    assert_eq!(job.recovery_levels(), [2], "redeploy:\n{}", job.out);
    assert_eq!(
        common::final_checksum(&job.out),
        reference,
        "redeploy:\n{}",
        job.out
    );
}

#[test]
fn files_held_at_level_1_are_recovered_online() {
    let _g = serial();
    let (_bin, exe) = program();
    // Level 1 only: every checkpoint holds its file as the program wrote
    // it, sealed in the background.
    let run = |dir: &Path, inject: &[&str]| {
        let metrics = dir.join("metrics.jsonl");
        let env = [
            ("FRAME_METRICS_FILE", Some(metrics.to_str().unwrap())),
            ("FRAME_SNAPSHOT_CHUNK_SIZE", Some("64 KiB")),
            ("FRAME_CONFIG", None),
        ];
        let mut args = vec!["--nodes", "2", "--ranks-per-node", "2"];
        for i in inject {
            args.extend(["--inject", i]);
        }
        frame_run_with(dir, &args, &exe, &PROGRAM, &env)
    };
    let dir = scratch();
    let clean = run(dir.path(), &[]);
    assert!(clean.status.success(), "{}", clean.out);
    let reference = common::final_checksum(&clean.out);
    let dir = scratch();
    let job = run(dir.path(), &["rank:2@iter=155"]);
    assert!(job.status.success(), "{}", job.out);
    assert_eq!(job.recovery_levels(), [1], "{}", job.out);
    assert!(job.out.contains(" from its file"), "{}", job.out);
    assert_eq!(common::final_checksum(&job.out), reference, "{}", job.out);
}

/// Peak resident memory (VmHWM) of every manager process of the job whose
/// environment mentions `marker`, in bytes.
fn managers_peak(marker: &Path) -> Vec<u64> {
    common::processes_mentioning(marker)
        .into_iter()
        .filter(|pid| {
            let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            String::from_utf8_lossy(&env)
                .split('\0')
                .any(|v| v == "FRAME_RT_ROLE=manager")
        })
        .filter_map(|pid| {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
            let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
            let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kib << 10)
        })
        .collect()
}

#[test]
fn a_file_of_1_gib_on_one_rank_is_recovered_with_the_managers_memory_bounded() {
    let _g = serial();
    let (_bin, exe) = program();
    const MIB: u64 = 1024;
    // Rank 1 of 2 holds 1 GiB; levels 2, 3 (a group of both nodes) and 4
    // take every checkpoint. Once the checkpoint of step 10 is promoted
    // the ranks hold: the managers' peak memory is read then. Node 1 dies
    // at step 11, and its rank restarts on the spare from level 2.
    let run = |inject: &[&str]| {
        let dir = scratch();
        let hold = dir.path().join("go");
        let global = dir.path().join("global");
        let metrics = dir.path().join("metrics.jsonl");
        let env = [
            ("FRAME_STORAGE_GLOBAL_DIR", Some(global.to_str().unwrap())),
            ("FRAME_METRICS_FILE", Some(metrics.to_str().unwrap())),
            ("FRAME_L2_INTERVAL", Some("1")),
            ("FRAME_L3_INTERVAL", Some("1")),
            ("FRAME_L3_GROUP_SIZE", Some("2")),
            ("FRAME_L3_PARITY", Some("1")),
            ("FRAME_L4_INTERVAL", Some("1")),
            ("FRAME_CONFIG", None),
        ];
        let mut args = vec![
            "--nodes",
            "2",
            "--ranks-per-node",
            "1",
            "--spare-nodes",
            "1",
        ];
        for i in inject {
            args.extend(["--inject", i]);
        }
        let big = MIB.to_string();
        let hold_path = hold.to_str().unwrap().to_string();
        let prog = [
            "--steps",
            "12",
            "--every",
            "5",
            "--cells",
            "5000",
            "--big-rank",
            "1",
            "--big-mib",
            &big,
            "--hold-after",
            "10",
            "--hold-file",
            &hold_path,
        ];
        let mut cmd = common::frame_run_command(dir.path(), &args, &exe, &prog, &env);
        let job = common::Watched::spawn(&mut cmd);
        job.wait_for(
            &["rank 1: checkpoint", "of step 10 promoted, holding"],
            DEADLINE,
        );
        let peaks = managers_peak(dir.path());
        std::fs::write(&hold, b"go").expect("release the ranks");
        let (status, out) = job.finish_status(DEADLINE);
        let job = common::finished_run(dir.path(), status, out);
        assert!(job.status.success(), "{}", job.out);
        (job, peaks, dir)
    };
    let (clean, peaks, _dir) = run(&[]);
    assert_eq!(
        peaks.len(),
        3,
        "two nodes and a spare, one manager each: {peaks:?}"
    );
    let bound = (MIB << 20) / 4;
    assert!(
        peaks.iter().all(|p| *p < bound),
        "a manager's peak memory {peaks:?} passed {bound} bytes while moving a 1 GiB file"
    );
    eprintln!(
        "managers' peak memory with a 1 GiB file: {:?} MiB",
        peaks.iter().map(|p| p >> 20).collect::<Vec<_>>()
    );
    let reference = common::final_checksum(&clean.out);
    let (failed, _, _dir) = run(&["node:1@iter=11"]);
    assert_eq!(failed.recovery_levels(), [2], "{}", failed.out);
    assert!(
        failed
            .out
            .contains("rank 1 recovered step 10 from its file"),
        "{}",
        failed.out
    );
    assert_eq!(
        common::final_checksum(&failed.out),
        reference,
        "{}",
        failed.out
    );
}
