//! A job that checkpointed never starts over silently: under `frame run`
//! with level 1 only (the default), a lost node takes its ranks'
//! checkpoints with it, and the job must end with an error on every rank
//! that names the rank, the levels tried and what would have survived, and
//! must delete nothing. Online (the node killed, or only its daemon),
//! redeployed (a crash, then a node directory
//! removed), and when the lost node held every rank (only the runtime's
//! record of the commits is left). Starting over is the user's explicit
//! act: `frame clean`, then the same command.

use crate::common;

use common::heat2d::Heat2d;
use common::{final_checksum, frame_bin, run, scratch, serial, Job};
use std::path::{Path, PathBuf};
use std::time::Duration;

const GRID: [&str; 8] = [
    "--nx", "96", "--ny", "90", "--steps", "300", "--every", "10",
];

fn heat2d(dir: &Path, layout: &[&str], extra: &[&str], program_extra: &[&str]) -> Job {
    Heat2d::new(GRID)
        .args(program_extra)
        .frame_run(dir, &[layout, extra].concat())
}

const TWO_NODES: [&str; 6] = [
    "--nodes",
    "2",
    "--ranks-per-node",
    "1",
    "--spare-nodes",
    "1",
];

fn reference() -> String {
    let dir = scratch();
    let job = heat2d(dir.path(), &TWO_NODES, &[], &[]);
    assert!(job.status.success(), "{}", job.out);
    final_checksum(&job.out)
}

/// The checkpoint files a node's directory holds for heat2d.
fn checkpoints_of(local: &Path, node: u32) -> Vec<PathBuf> {
    common::files_under(&local.join(format!("node-{node}/heat2d/l1")))
        .into_iter()
        .filter(|p| {
            p.extension().is_some_and(|e| e == "fck") && !p.to_string_lossy().contains("/spare/")
        })
        .collect()
}

/// The refusal every rank must print: the rank that cannot restore, the
/// levels tried and the hint; no fresh start, no result.
fn assert_refused(job: &Job, rank: &str, what: &str) {
    assert!(
        !job.status.success(),
        "{what}: the job succeeded:\n{}",
        job.out
    );
    for needle in [
        "not recoverable",
        rank,
        "levels tried: L1",
        "Level 1 keeps no copy off a node",
        "Nothing was deleted",
        "frame clean",
    ] {
        assert!(
            job.out.contains(needle),
            "{what}: no {needle:?} in:\n{}",
            job.out
        );
    }
    assert!(
        !job.out
            .contains("entered REINITED (epoch 2); starting at step 0")
            && !job.out.contains("final checksum"),
        "{what}: the job started over:\n{}",
        job.out
    );
}

#[test]
fn level_1_only_a_node_lost_online_is_an_error_that_deletes_nothing() {
    let _g = serial();
    let dir = scratch();
    let job = heat2d(
        dir.path(),
        &TWO_NODES,
        &["--inject", "node:1@iter=155"],
        &[],
    );
    assert!(job.out.contains("node 1 died"), "{}", job.out);
    assert_refused(&job, "rank 1: holds no checkpoint", "node lost online");
    // The survivor's checkpoints are still there, 14 and 15 (keep_last 2).
    let kept = checkpoints_of(&dir.path().join("local"), 0);
    assert_eq!(kept.len(), 2, "{kept:?}");
    assert!(kept
        .iter()
        .any(|p| p.to_string_lossy().contains("ckpt-00000000000000000015")));
}

/// The pid of the daemon of the node rank `rank` runs on, once the node's
/// pointer names a checkpoint (waited for with a deadline).
fn daemon_of_rank_after_a_commit(run_dir: &Path, pointer: &Path, rank: u32) -> i32 {
    common::patience::poll(Duration::from_secs(60), Duration::from_millis(5), || {
        std::fs::read_to_string(pointer)
            .is_ok_and(|t| t.contains("checkpoint_id"))
            .then_some(())
    })
    .unwrap_or_else(|why| panic!("no commit: {why}"));
    for pid in common::processes_mentioning(run_dir) {
        let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        let env = String::from_utf8_lossy(&env);
        let is = |kv: &str| env.split('\0').any(|e| e == kv);
        if is("FRAME_RT_ROLE=rank") && is(&format!("FRAME_RANK={rank}")) {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // The parent's pid is the 2nd field after the command's ")".
            let ppid = stat
                .rsplit(')')
                .next()
                .and_then(|rest| rest.split_whitespace().nth(1))
                .and_then(|p| p.parse().ok())
                .expect("parent pid");
            return ppid;
        }
    }
    panic!("rank {rank} not found");
}

#[test]
fn level_1_only_a_node_whose_daemon_alone_was_killed_is_an_error() {
    let _g = serial();
    let dir = scratch();
    let (run_dir, local) = (dir.path().join("run"), dir.path().join("local"));
    // Long enough to be running when the daemon is killed.
    let long = [
        "--nx",
        "96",
        "--ny",
        "90",
        "--steps",
        "100000000",
        "--every",
        "200",
    ];
    let mut cmd = Heat2d::new(long).frame_run_command(dir.path(), &TWO_NODES);
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    use std::os::unix::process::CommandExt;
    cmd.process_group(0);
    let mut child = cmd.spawn().expect("frame run");
    let output = common::Output::collect(&mut child);
    let pointer = local.join("node-1/heat2d/l1/LATEST");
    let daemon = daemon_of_rank_after_a_commit(&run_dir, &pointer, 1);
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(daemon).unwrap(),
        rustix::process::Signal::KILL,
    )
    .expect("kill the daemon");
    use wait_timeout::ChildExt;
    let status = common::Patience::new(Duration::from_secs(120))
        .wait(|slice| child.wait_timeout(slice).expect("wait"))
        .unwrap_or_else(|why| {
            let group = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
            let _ = child.wait();
            panic!("the job did not end: {why}")
        });
    common::assert_no_survivors(&run_dir, Duration::from_secs(30));
    let (out, err) = output.join();
    let job = Job {
        status,
        out: out + &err,
        metrics: Vec::new(),
    };
    assert!(job.out.contains("node 1 died"), "{}", job.out);
    assert_refused(&job, "rank 1: holds no checkpoint", "daemon killed");
    // The survivor keeps its checkpoints.
    assert!(!checkpoints_of(&local, 0).is_empty());
}

#[test]
fn a_job_whose_only_node_was_lost_is_an_error_from_the_runtime_record() {
    let _g = serial();
    let dir = scratch();
    let job = heat2d(
        dir.path(),
        &[
            "--nodes",
            "1",
            "--ranks-per-node",
            "2",
            "--spare-nodes",
            "1",
        ],
        &["--inject", "node:0@iter=155"],
        &[],
    );
    assert!(job.out.contains("node 0 died"), "{}", job.out);
    assert_refused(
        &job,
        "holds no checkpoint, although checkpoint 15 is recorded as committed",
        "the only node lost",
    );
}

#[test]
fn redeployed_after_a_crash_without_a_node_directory_is_an_error_then_clean_starts_over() {
    let _g = serial();
    let want = reference();
    let dir = scratch();
    let local = dir.path().join("local");
    let crash = ["--crash-at", "155"];
    let crashed = heat2d(dir.path(), &TWO_NODES, &[], &crash);
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(crashed.status.signal(), Some(9), "{}", crashed.out);
    std::fs::remove_dir_all(local.join("node-1")).expect("remove node 1");
    let before = common::file_hashes(&local);
    assert!(!before.is_empty());
    let job = heat2d(dir.path(), &TWO_NODES, &[], &crash);
    assert_refused(&job, "rank 1: holds no checkpoint", "redeployed");
    assert!(
        !job.out
            .contains("entered NEW (epoch 1); starting at step 0"),
        "{}",
        job.out
    );
    // Nothing was removed or changed, and a second try refuses the same way.
    let after = common::file_hashes(&local);
    for file in &before {
        assert!(after.contains(file), "{file:?} is gone or changed");
    }
    let again = heat2d(dir.path(), &TWO_NODES, &[], &crash);
    assert_refused(&again, "rank 1", "redeployed again");
    // Starting over is explicit.
    let (status, out, err) = run(
        std::process::Command::new(frame_bin())
            .arg("clean")
            .arg(&local)
            .args(["--job", "heat2d", "--yes"]),
        Duration::from_secs(60),
    );
    assert!(status.success(), "{out}{err}");
    let fresh = heat2d(dir.path(), &TWO_NODES, &[], &crash);
    assert!(
        fresh
            .out
            .contains("entered NEW (epoch 1); starting at step 0"),
        "{}",
        fresh.out
    );
    // It crashes again at 155 (no recovery); the run after resumes.
    let resumed = heat2d(dir.path(), &TWO_NODES, &[], &crash);
    assert!(resumed.status.success(), "{}", resumed.out);
    assert_eq!(final_checksum(&resumed.out), want);
}
