//! The Python package: its own tests (`ffi/python/tests`: what `protect`
//! accepts, every dtype and files through a restart, errors), and the
//! numpy heat program (`examples/python/heat.py`) under `frame run`,
//! killed (a rank, a node) and recovered online with its state in
//! protected arrays and in a file checkpoint, and in a logged recovery
//! (only the failed rank goes back): every run must end with the
//! fault-free checksum, after restoring a checkpoint (not starting over),
//! from the level the failure leaves.

use crate::common;

use common::python::{heat_program, python, top};
use common::{final_checksum, frame_run_with, scratch, serial, Job};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

#[test]
fn the_package_passes_its_own_tests() {
    let _g = serial();
    let py = python();
    let mut cmd = Command::new(&py);
    cmd.args(["-m", "unittest", "discover", "-v", "-s", "ffi/python/tests"])
        .current_dir(top());
    let (status, out, err) = common::run(&mut cmd, Duration::from_secs(600));
    assert!(status.success(), "{out}\n{err}");
    assert!(err.contains("\nOK"), "{out}\n{err}");
}

/// 2 nodes of 2 ranks and a spare; a checkpoint every 10 steps, each
/// promoted to the partner node; the ranks wait at step 120 until its
/// checkpoint is there (the failures come at step 125).
fn heat(dir: &Path, args: &[&str], program_args: &[&str]) -> Job {
    let py = python();
    let metrics = dir.join("metrics.jsonl");
    let env = [
        ("FRAME_METRICS_FILE", Some(metrics.to_str().unwrap())),
        ("FRAME_SNAPSHOT_INTERVAL", Some("10")),
        ("FRAME_L2_INTERVAL", Some("1")),
        ("FRAME_CONFIG", None),
    ];
    let mut all = vec![
        "--nodes",
        "2",
        "--ranks-per-node",
        "2",
        "--spare-nodes",
        "1",
    ];
    all.extend(args);
    let mut prog = heat_program();
    prog.extend(["--settle-at", "120"].map(String::from));
    prog.extend(program_args.iter().map(|a| a.to_string()));
    let prog: Vec<&str> = prog.iter().map(String::as_str).collect();
    frame_run_with(dir, &all, &py, &prog, &env)
}

/// The program's flags that keep its state in a file checkpoint.
const FILES: [&str; 3] = ["--files", "--every", "10"];

/// One failure of the heat program and what its recovery must show.
struct Case {
    name: &'static str,
    /// What `--inject` kills.
    inject: &'static str,
    /// More flags of `frame run`, and of the program.
    runtime: &'static [&'static str],
    program: &'static [&'static str],
    /// The level of the global restart; `None`: a logged recovery, in
    /// which the replacement alone restores (its `rejoin` record) and
    /// nobody restarts globally.
    level: Option<u64>,
    /// What the output must say: a global restart's rank 0 restores step
    /// 120's checkpoint (promoted before the failure); in a logged
    /// recovery only the replacement goes back.
    says: &'static str,
}

impl Case {
    fn new(
        name: &'static str,
        inject: &'static str,
        level: Option<u64>,
        says: &'static str,
    ) -> Self {
        Case {
            name,
            inject,
            runtime: &[],
            program: &[],
            level,
            says,
        }
    }
}

#[test]
fn numpy_heat_recovers_a_rank_and_a_node_online_bit_for_bit() {
    let _g = serial();
    let dir = scratch();
    let clean = heat(dir.path(), &[], &[]);
    assert!(clean.status.success(), "{}", clean.out);
    assert!(clean.recovery_levels().is_empty(), "{}", clean.out);
    let reference = final_checksum(&clean.out);

    let global = "recovered step 120 ";
    let cases = [
        Case::new("arrays, a rank", "rank:1@iter=125", Some(1), global),
        Case::new("arrays, a node", "node:1@iter=125", Some(2), global),
        Case {
            program: &FILES,
            ..Case::new("a file, a rank", "rank:2@iter=125", Some(1), global)
        },
        Case {
            program: &FILES,
            ..Case::new("a file, a node", "node:0@iter=125", Some(2), global)
        },
        Case {
            runtime: &["--recovery", "logged"],
            ..Case::new(
                "arrays, a rank, logged",
                "rank:1@iter=125",
                None,
                "only its replacement goes back",
            )
        },
    ];
    for Case {
        name,
        inject,
        runtime: runtime_args,
        program: program_args,
        level,
        says,
    } in cases
    {
        let dir = scratch();
        let mut args = vec!["--inject", inject];
        args.extend(runtime_args);
        let job = heat(dir.path(), &args, program_args);
        assert!(job.status.success(), "{name}:\n{}", job.out);
        assert!(job.out.contains(says), "{name}:\n{}", job.out);
        let used = job.recovery_levels();
        match level {
            Some(level) => assert!(
                !used.is_empty() && used.iter().all(|l| *l == level),
                "{name}: recovered from levels {used:?}, not {level}:\n{}",
                job.out
            ),
            None => {
                let rejoined: Vec<_> = job
                    .metrics
                    .iter()
                    .filter(|m| m["event"] == "rejoin")
                    .map(|m| (m["rank"].as_u64(), m["checkpoint"].as_u64()))
                    .collect();
                assert!(
                    used.is_empty()
                        && rejoined.len() == 1
                        && rejoined[0].0 == Some(1)
                        && rejoined[0].1 >= Some(1),
                    "{name}: global recoveries {used:?}, rejoins {rejoined:?}:\n{}",
                    job.out
                );
            }
        }
        assert_eq!(final_checksum(&job.out), reference, "{name}:\n{}", job.out);
    }
}
