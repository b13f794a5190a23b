//! Failure detection on virtual nodes (heat2d on 2 nodes of 2 ranks and a
//! spare): a daemon stopped past its lease is declared dead only after its
//! ranks ended by themselves (at no instant do a rank's old incarnation
//! and its replacement both run), and the recovery's record says how long
//! the node was silent; a daemon stalled for half the heartbeat timeout is
//! no failure. Recovered ranks move the fence of the global directory to
//! their epoch.

use crate::common;

use common::heat2d::Heat2d;
use common::{processes_mentioning, scratch, serial, Watched};
use std::path::Path;
use std::time::Duration;

const DEADLINE: Duration = Duration::from_secs(240);
const SHAPE: [&str; 6] = [
    "--nodes",
    "2",
    "--ranks-per-node",
    "2",
    "--spare-nodes",
    "1",
];
/// 300 steps, a checkpoint every 25.
const GRID: [&str; 8] = [
    "--nx", "96", "--ny", "80", "--steps", "300", "--every", "25",
];

/// heat2d under `frame run` with `args` after the shape, and `heat2d`
/// after the grid, each rank saying what it commits; level 2 every
/// checkpoint.
fn start(dir: &Path, args: &[&str], heat2d: &[&str]) -> Watched {
    let heat = (Heat2d::new(GRID).args(heat2d))
        .env("RUST_LOG", "frame::checkpoint=info")
        // A lost node's ranks come back from their partner's copies.
        .env("FRAME_L2_INTERVAL", "1")
        .env("FRAME_L4_INTERVAL", "2")
        .env("FRAME_STORAGE_GLOBAL_DIR", dir.join("global"))
        .env("FRAME_RETENTION_KEEP_ON_FINALIZE", "true")
        .unset("FRAME_CONFIG");
    Watched::spawn(&mut heat.frame_run_command(dir, &[&SHAPE[..], args].concat()))
}

/// The pid of node `node`'s daemon in the job whose run directory is in
/// `dir`.
fn daemon_of(dir: &Path, node: u32) -> i32 {
    let spec = format!("\"node\":{node},");
    processes_mentioning(&dir.join("run"))
        .into_iter()
        .find(|pid| {
            let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            let env = String::from_utf8_lossy(&env);
            env.split('\0').any(|v| v == "FRAME_RT_ROLE=daemon") && env.contains(&spec)
        })
        .unwrap_or_else(|| panic!("no daemon of node {node}"))
}

fn signal(pid: i32, sig: rustix::process::Signal) {
    let pid = rustix::process::Pid::from_raw(pid).unwrap();
    rustix::process::kill_process(pid, sig).unwrap();
}

fn reference() -> String {
    let dir = scratch();
    let (ok, out) = start(dir.path(), &[], &[]).finish(DEADLINE);
    assert!(ok, "{out}");
    common::final_checksum(&out)
}

#[test]
fn a_stopped_daemons_ranks_end_by_their_lease_before_the_node_is_declared_dead() {
    let _g = serial();
    let dir = scratch();
    let want = reference();
    // The ranks hold before step 150 (after checkpoint 6) until the
    // recovery interrupts them.
    let job = start(
        dir.path(),
        &["--heartbeat-timeout", "2s"],
        &["--hold-at", "150"],
    );
    job.wait_for(&["checkpoint committed", "checkpoint=6 "], DEADLINE);
    signal(daemon_of(dir.path(), 1), rustix::process::Signal::STOP);
    let (status, out) = job.finish_status(DEADLINE);
    let job = common::finished_run(dir.path(), status, out);
    assert!(job.status.success(), "{}", job.out);
    assert_eq!(common::final_checksum(&job.out), want, "{}", job.out);
    let died = job
        .out
        .find("node 1 died (its daemon stopped sending heartbeats)")
        .unwrap_or_else(|| panic!("{}", job.out));
    for rank in [2, 3] {
        let ended = job
            .out
            .find(&format!("frame: rank {rank} (pid "))
            .filter(|at| job.out[*at..].contains("heard nothing from its daemon within its lease"))
            .unwrap_or_else(|| panic!("rank {rank} did not end by its lease:\n{}", job.out));
        assert!(
            ended < died,
            "rank {rank} ended after its replacement could start:\n{}",
            job.out
        );
    }
    let record = job
        .metrics
        .iter()
        .find(|m| m["event"] == "runtime_recovery")
        .unwrap_or_else(|| panic!("no recovery record"));
    let silent = record["silent_ms"].as_f64().unwrap_or(0.0);
    let threshold = record["threshold_ms"].as_f64().unwrap_or(0.0);
    assert!(threshold >= 2000.0 && silent > threshold, "{record}");
    // The recovered ranks moved the fence of the global directory to
    // their epoch: a late write of the old one is refused.
    let fence = dir.path().join("global/heat2d/l4/FENCE");
    let fence: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&fence).unwrap_or_default()).unwrap_or_default();
    assert_eq!(fence["epoch"], 2, "{fence}");
    assert!(fence["launch"].as_u64().unwrap_or(0) > 0, "{fence}");
}

#[test]
fn a_daemon_stalled_for_half_the_heartbeat_timeout_is_no_failure() {
    let _g = serial();
    let dir = scratch();
    let want = reference();
    let job = start(dir.path(), &["--heartbeat-timeout", "4s"], &[]);
    job.wait_for(&["checkpoint committed", "checkpoint=2 "], DEADLINE);
    let daemon = daemon_of(dir.path(), 1);
    signal(daemon, rustix::process::Signal::STOP);
    // The stall itself lasts this long: half the timeout.
    std::thread::sleep(Duration::from_secs(2));
    signal(daemon, rustix::process::Signal::CONT);
    let (status, out) = job.finish_status(DEADLINE);
    let job = common::finished_run(dir.path(), status, out);
    assert!(job.status.success(), "{}", job.out);
    assert!(!job.out.contains("died"), "{}", job.out);
    assert!(!job.out.contains("lease"), "{}", job.out);
    assert!(job.out.contains("0 failure(s) recovered"), "{}", job.out);
    assert_eq!(common::final_checksum(&job.out), want, "{}", job.out);
}
