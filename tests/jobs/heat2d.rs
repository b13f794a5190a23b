//! The heat2d example, fault-free and crashed-then-recovered, must end with the
//! same checksum of the whole grid.

use crate::common;

use common::heat2d::Heat2d;
use common::{frame_bin, run, scratch, serial};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const DEADLINE: Duration = Duration::from_secs(300);
const GRID: [&str; 8] = [
    "--nx", "96", "--ny", "80", "--steps", "300", "--every", "25",
];

/// Runs heat2d with `args` on storage `dir`; returns (exit status, stdout).
fn heat2d(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> (std::process::ExitStatus, String) {
    Heat2d::new(GRID)
        .args(args)
        .local(dir)
        .envs(env.iter().copied())
        .run(DEADLINE)
}

fn checksum(out: &str) -> String {
    let sum = common::final_checksum(out);
    assert!(
        sum.len() == 18 && sum.starts_with("0x"),
        "not a 64-bit checksum: {sum}"
    );
    sum
}

/// Runs heat2d fault-free on `nodes` x `per_node` ranks.
fn fault_free(dir: &Path, nodes: &str, per_node: &str) -> String {
    let (status, out) = heat2d(dir, &["--nodes", nodes, "--ranks-per-node", per_node], &[]);
    assert!(status.success(), "{out}");
    checksum(&out)
}

#[test]
fn the_checksum_does_not_depend_on_the_decomposition() {
    let _g = serial();
    let dir = scratch();
    let four = fault_free(dir.path(), "2", "2");
    assert_eq!(fault_free(dir.path(), "1", "1"), four);
    assert_eq!(fault_free(dir.path(), "3", "1"), four);
    // finalize removed every checkpoint of the job.
    assert!(common::files_under(dir.path()).is_empty());
}

fn crash_and_recover(env: &[(&str, &str)], crash_at: &str, expect_recovery: Option<&str>) {
    let dir = scratch();
    let reference = fault_free(dir.path(), "2", "2");
    let args = ["--nodes", "2", "--crash-at", crash_at];
    let (status, out) = heat2d(dir.path(), &args, env);
    assert_eq!(
        status.signal(),
        Some(9),
        "the first run must die by SIGKILL:\n{out}"
    );
    if expect_recovery.is_some() {
        let (st, verify_out, _) = run(
            Command::new(frame_bin()).arg("verify").arg(dir.path()),
            DEADLINE,
        );
        assert!(
            st.success(),
            "checkpoints left by the crash must verify:\n{verify_out}"
        );
    }
    // Same arguments again; without a checkpoint a fresh run would crash at
    // the same step again, so that case drops --crash-at.
    let again: &[&str] = if expect_recovery.is_some() {
        &args
    } else {
        &args[..2]
    };
    let (status, out) = heat2d(dir.path(), again, env);
    assert!(status.success(), "{out}");
    match expect_recovery {
        Some(line) => assert!(out.contains(line), "expected {line:?} in:\n{out}"),
        None => assert!(!out.contains("recovered checkpoint"), "{out}"),
    }
    assert_eq!(
        checksum(&out),
        reference,
        "recovered run differs from the fault-free run"
    );
    assert!(common::files_under(dir.path()).is_empty());
}

#[test]
fn a_crashed_run_recovers_to_the_same_checksum() {
    let _g = serial();
    crash_and_recover(&[], "140", Some("recovered checkpoint 5 (step 125)"));
}

#[test]
fn a_crashed_compressed_run_recovers_to_the_same_checksum() {
    let _g = serial();
    crash_and_recover(
        &[
            ("FRAME_SNAPSHOT_COMPRESSION", "zstd"),
            ("FRAME_SNAPSHOT_CHUNK_SIZE", "64KiB"),
        ],
        "260",
        Some("recovered checkpoint 10 (step 250)"),
    );
}

#[test]
fn a_crash_before_the_first_checkpoint_starts_over() {
    let _g = serial();
    crash_and_recover(&[], "10", None);
}
