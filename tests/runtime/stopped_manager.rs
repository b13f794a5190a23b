//! A node's manager stopped with SIGSTOP does not stall the job: the
//! daemon finds it silent, kills and restarts it, the promotions it held
//! fail with a message, and the job goes on to the fault-free result.

use crate::common;

use common::heat2d::Heat2d;
use common::{final_checksum, run, scratch, serial, ChildGuard};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

const DEADLINE: Duration = Duration::from_secs(240);
const SHAPE: [&str; 6] = [
    "--nodes",
    "6",
    "--ranks-per-node",
    "1",
    "--spare-nodes",
    "2",
];
const GRID: [&str; 8] = [
    "--nx", "64", "--ny", "60", "--steps", "2000", "--every", "10",
];

fn heat2d(dir: &Path) -> Command {
    (Heat2d::new(SHAPE).args(GRID).args(["--rank-timeout", "4s"]))
        .storage_in(dir)
        .env("FRAME_L2_INTERVAL", "1")
        .env("FRAME_L3_INTERVAL", "2")
        .env("FRAME_L4_INTERVAL", "3")
        .metrics_in(dir)
        .command()
}

/// The pid of node `node`'s manager process in the job whose local
/// directory is under `dir`.
fn manager_of(dir: &Path, node: u32) -> Option<i32> {
    let marker = dir.join("local").join(format!("node-{node}"));
    let wanted = [
        b"FRAME_RT_ROLE=manager".to_vec(),
        format!("FRAME_NODE={node}").into_bytes(),
        marker.as_os_str().as_encoded_bytes().to_vec(),
    ];
    common::processes_mentioning(&marker)
        .into_iter()
        .find(|pid| {
            let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            env.split(|b| *b == 0).any(|v| v == wanted[0].as_slice())
                && env.split(|b| *b == 0).any(|v| v == wanted[1].as_slice())
        })
}

/// Waits until `file` holds a line containing `needle`.
fn wait_for_record(file: &Path, needle: &str, deadline: Duration) {
    common::patience::poll(deadline, Duration::from_millis(20), || {
        std::fs::read_to_string(file)
            .is_ok_and(|t| t.contains(needle))
            .then_some(())
    })
    .unwrap_or_else(|why| panic!("no {needle} in {}: {why}", file.display()));
}

#[test]
fn a_stopped_manager_is_replaced_and_the_job_finishes() {
    let _g = serial();
    let reference = {
        let dir = scratch();
        let (status, out, err) = run(&mut heat2d(dir.path()), DEADLINE);
        assert!(status.success(), "{out}{err}");
        final_checksum(&out)
    };
    let dir = scratch();
    let err_file = dir.path().join("stderr");
    let mut cmd = heat2d(dir.path());
    cmd.stdout(Stdio::piped())
        .stderr(std::fs::File::create(&err_file).unwrap());
    let mut job = ChildGuard::spawn(&mut cmd);
    let lines = job.stdout_lines();
    // Once node 1's manager has promoted a checkpoint, stop it.
    wait_for_record(&dir.path().join("metrics.jsonl"), "\"node\":1", DEADLINE);
    let pid = manager_of(dir.path(), 1).expect("node 1's manager");
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pid).unwrap(),
        rustix::process::Signal::STOP,
    )
    .unwrap();
    let status = job.wait(DEADLINE);
    let out: String = lines.try_iter().collect::<Vec<_>>().join("\n");
    let err = std::fs::read_to_string(&err_file).unwrap();
    assert!(status.success(), "{out}\n{err}");
    assert!(
        err.contains(&format!("manager (pid {pid}) has not answered")),
        "{err}"
    );
    assert_eq!(final_checksum(&out), reference, "{err}");
    // The stopped process is gone with the job.
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists() || {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            stat.contains(") Z")
        }
    );
}
