//! The applications' runner (`benches/apps/run.sh`, docs/APPS.md) on the
//! stand-in of frame's own (`tests/apps/standin`, a small MPI CG solver
//! with the applications' structure), so that the runner cannot rot while
//! the applications' sources stay out of the repository: it builds the
//! stand-in as published and with `benches/apps/standin/frame.patch`
//! against libframe built with the `ulfm` feature, and runs every
//! measurement once (`--features ulfm`, Open MPI 5 first on the `PATH`).
//! The runner itself fails when a recovered run's answer differs from the
//! fault-free one, or a failure meant to leave a level the lowest
//! recoverable one restores from another.

use crate::common;

use common::mpirun::{in_group, mpi_prefix};
use common::{libframe_with, scratch, serial};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The runner's deadline: about 40 MPI jobs of 4 to 8 processes.
const RUNNER_DEADLINE: Duration = Duration::from_secs(1200);

fn runner() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/apps/run.sh")
}

/// The rows of the markdown table whose title starts with `title`.
fn rows<'a>(out: &'a str, title: &str) -> Vec<Vec<&'a str>> {
    let mut lines = out.lines().skip_while(|l| !l.starts_with(title)).skip(1);
    lines
        .by_ref()
        .skip_while(|l| l.trim().is_empty())
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| l.trim_matches('|').split('|').map(str::trim).collect())
        .collect()
}

#[test]
fn the_runner_builds_fails_and_recovers_the_stand_in_under_every_way() {
    let _serial = serial();
    let lib = libframe_with(&["ulfm"]);
    let marker = scratch();
    let mut cmd = Command::new(runner());
    cmd.args(["standin"])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/apps/standin"))
        .args(["--runs", "1", "--libframe"])
        .arg(&lib)
        .env("FRAME_APPS_MPI", mpi_prefix());
    let job = in_group(cmd, RUNNER_DEADLINE, marker.path());
    assert!(job.status.success(), "{}", job.out);
    let out = &job.out;

    let free = rows(out, "stand-in CG: fault-free");
    assert_eq!(free.len(), 1, "{out}");
    let checkpoints: u32 = free[0][6].parse().expect("a checkpoint count");
    assert_eq!(checkpoints, 300, "a checkpoint per iteration:\n{out}");

    let recovered = rows(out, "stand-in CG: recovery");
    let ways: Vec<(&str, &str, &str)> = recovered.iter().map(|r| (r[1], r[2], r[8])).collect();
    // One rank per node: a rank's failure under ULFM takes its node's
    // level-1 files with it; the relaunch finds them on the node.
    assert_eq!(
        ways,
        [
            ("ulfm", "rank", "L2"),
            ("ulfm", "node", "L2"),
            ("relaunch", "rank", "L1"),
            ("relaunch", "node", "L2"),
        ],
        "{out}"
    );
    for r in &recovered {
        let total: f64 = r[3].parse().expect("a total");
        let part = |i: usize| r[i].parse::<f64>().ok();
        // A relaunch has no MPI repair ("-").
        assert_eq!(part(5).is_none(), r[1] == "relaunch", "{r:?}");
        // Detection and retrieval took time, within the total.
        for i in [4, 6] {
            let p = part(i).expect("a part");
            assert!(p > 0.0 && p < total, "part {i} of {r:?}");
        }
    }

    let levels = rows(out, "stand-in CG: retrieval after failures");
    let names: Vec<&str> = levels.iter().map(|r| r[0]).collect();
    assert_eq!(names, ["L1", "L2", "L3", "L4"], "{out}");
    for r in &levels {
        assert_eq!(r[2], "1", "frame decides in one round: {r:?}");
    }
}

#[test]
fn the_runner_names_what_it_cannot_use() {
    let marker = scratch();
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cases: [(&[&str], &str); 3] = [
        (&["nosuchapp", "."], "no benches/apps/nosuchapp/app.toml"),
        (
            &["standin", "/nonexistent/source"],
            "SOURCE_DIR /nonexistent/source",
        ),
        (&["../standin", "."], "APP must be a directory name"),
    ];
    for (args, says) in cases {
        let mut cmd = Command::new(runner());
        cmd.args(args).current_dir(here);
        let job = in_group(cmd, Duration::from_secs(60), marker.path());
        assert_eq!(job.status.code(), Some(2), "{args:?}: {}", job.out);
        assert!(
            job.out.contains(says),
            "{args:?}: no `{says}` in {}",
            job.out
        );
    }
}
