//! Absurd numbers, huge lines, wrappers and unusable directories: each a
//! quick, clear error (or, for wrappers, a job that runs as without one),
//! never a hang, an abort or a silent failure.

use crate::common;

use common::{config, final_value, frame_bin, frame_run, ranks, reference, run, scratch, serial};
use frame::comm::Comm;
use frame::config::Interval;
use frame::Checkpointer;
use std::process::Command;
use std::time::Duration;

const DEADLINE: Duration = Duration::from_secs(60);

/// Runs `frame ARGS`; (success, stdout + stderr).
fn frame(args: &[&str]) -> (bool, String) {
    let (status, out, err) = run(Command::new(frame_bin()).args(args), DEADLINE);
    (status.success(), out + &err)
}

#[test]
fn absurd_counts_on_the_command_line_are_refused_naming_the_option() {
    for (args, named) in [
        (
            vec!["--spare-nodes", "4294967296"],
            "--spare-nodes 4294967296",
        ),
        (vec!["--nodes", "0"], "--nodes 0"),
        (vec!["--nodes", "100000"], "--nodes 100000"),
        (
            vec!["--ranks-per-node", "100000"],
            "--ranks-per-node 100000",
        ),
        (
            vec!["--nodes", "4000", "--ranks-per-node", "1000"],
            "--ranks-per-node 1000",
        ),
        (vec!["--standby", "1000000"], "--standby 1000000"),
    ] {
        let mut all = vec!["run"];
        all.extend(&args);
        all.extend(["--", "true"]);
        let (ok, out) = frame(&all);
        assert!(!ok, "{args:?} was accepted: {out}");
        assert!(out.contains(named), "{args:?}: {out}");
    }
}

#[test]
fn simulations_too_large_or_meaningless_are_refused_with_the_figure() {
    for (args, says) in [
        (
            vec!["--retrieval", "test-machine", "--step", "0"],
            "--step 0",
        ),
        (
            vec![
                "--retrieval",
                "test-machine",
                "--mtbf",
                "0,0",
                "--checkpoint",
                "1,6",
            ],
            "--mtbf",
        ),
        (vec!["--step", "1e-300"], "steps"),
        (vec!["--planned", "1e300"], "steps"),
        (vec!["--planned", "inf"], "--planned"),
        (vec!["--runs", "18446744073709551615"], "--runs"),
        (
            vec!["--retrieval", "test-machine", "--step", "1e-9"],
            "steps",
        ),
        (
            vec!["--project-scale", "test-machine", "--latency-us", "0"],
            "--latency-us 0",
        ),
        (
            vec!["--project-scale", "test-machine", "--latency-us", "nan"],
            "--latency-us NaN",
        ),
        (
            vec!["--project-scale", "/nonexistent/scale.json"],
            "cannot read /nonexistent/scale.json",
        ),
    ] {
        let mut all = vec!["sim"];
        all.extend(&args);
        let (ok, out) = frame(&all);
        assert!(!ok, "{args:?} was accepted: {out}");
        assert!(out.contains(says), "{args:?}: {out}");
    }
}

#[test]
fn a_huge_metrics_line_is_refused_with_its_number() {
    let dir = scratch();
    let file = dir.path().join("metrics.jsonl");
    let mut text = String::from("{\"event\":\"checkpoint\",\"blocked_us_max\":1500}\n");
    // 96 MiB of numbers on one line.
    text.push('[');
    text.push_str(&"1,".repeat(48 << 20));
    text.push_str("1]\n");
    std::fs::write(&file, text).unwrap();
    let (ok, out) = frame(&["report", file.to_str().unwrap()]);
    assert!(!ok, "{out}");
    assert!(out.contains("line 2"), "{out}");
    // A file of ordinary lines still reads.
    std::fs::write(
        &file,
        "{\"event\":\"checkpoint\",\"blocked_us_max\":1500}\n",
    )
    .unwrap();
    let (ok, out) = frame(&["report", file.to_str().unwrap()]);
    assert!(ok, "{out}");
}

#[test]
fn programs_under_forking_wrappers_join_and_recover() {
    let _g = serial();
    let program_args = ["--iterations", "40"];
    let expected = reference(&program_args);
    let ring = common::example("ring");
    let ring = ring.to_str().unwrap();
    let line = format!("{ring} {}; true", program_args.join(" "));
    // .ci/run installs strace and GNU time.
    let wrappers: Vec<Vec<String>> = vec![
        vec!["bash".into(), "-c".into(), line.clone()],
        vec!["/usr/bin/time".into(), ring.into()],
        vec![
            "/usr/bin/strace".into(),
            "-f".into(),
            "-qq".into(),
            "-e".into(),
            "trace=none".into(),
            ring.into(),
        ],
    ];
    for w in wrappers {
        let dir = scratch();
        let (program, rest) = w.split_first().unwrap();
        let mut args: Vec<&str> = rest.iter().map(String::as_str).collect();
        if program != "bash" {
            args.extend(program_args);
        }
        // A rank killed under the wrapper is recovered like any other.
        let job = frame_run(
            dir.path(),
            &[
                "--nodes",
                "2",
                "--ranks-per-node",
                "2",
                "--inject",
                "rank:1@iter=20",
            ],
            std::path::Path::new(program),
            &args,
        );
        assert!(job.status.success(), "{w:?}: {}", job.out);
        assert!(
            job.out.contains("1 failure(s) recovered"),
            "{w:?}: {}",
            job.out
        );
        assert_eq!(final_value(&job.out), expected, "{w:?}");
    }
}

#[test]
fn a_global_directory_others_can_write_is_refused_when_the_checkpointer_opens() {
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch();
    let global = dir.path().join("global");
    std::fs::create_dir(&global).unwrap();
    std::fs::set_permissions(&global, std::fs::Permissions::from_mode(0o777)).unwrap();
    let mut cfg = config(&dir.path().join("local"), "open");
    cfg.storage.global_dir = global.clone();
    cfg.l4.interval = Interval::Calls(1);
    let errors = ranks(2, 1, move |comm| {
        let mut cfg = cfg.clone();
        cfg.storage.local_dir = cfg.storage.local_dir.join(format!("node-{}", comm.node()));
        match Checkpointer::init(&cfg, &comm) {
            Ok(_) => String::new(),
            Err(e) => e.to_string(),
        }
    });
    for e in errors {
        assert!(e.contains("global_dir"), "{e}");
        assert!(e.contains("writable by other users"), "{e}");
    }
}
