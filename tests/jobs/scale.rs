//! 1024 ranks on this machine: heat2d under `frame run` on 128 virtual
//! nodes of 8 ranks, with a CPU hog on every core, starts, runs and
//! finishes fault-free, no node declared dead and no recovery, with the
//! checksum the same grid has on 4 ranks.
//!
//! It takes minutes of a 2-core machine, so `cargo test` leaves it out
//! (ignored); `scripts/test --scale` runs it.

use crate::common;

use common::heat2d::Heat2d;
use common::{final_checksum, run, scratch, serial, ChildGuard};
use std::process::Command;
use std::time::Duration;

const DEADLINE: Duration = Duration::from_secs(1800);
/// 32 by 32 blocks of 8 by 8 cells on 1024 ranks.
const GRID: [&str; 8] = [
    "--nx", "256", "--ny", "256", "--steps", "60", "--every", "20",
];

#[test]
#[ignore = "minutes of a 2-core machine: scripts/test --scale runs it"]
fn a_thousand_ranks_under_a_cpu_hog_finish_with_no_node_declared_dead() {
    let _g = serial();
    let reference = {
        let dir = scratch();
        let mut cmd = (Heat2d::new(GRID).args(["--nodes", "2", "--ranks-per-node", "2"]))
            .storage_in(dir.path())
            .command();
        let (status, out, err) = run(&mut cmd, DEADLINE);
        assert!(status.success(), "{out}{err}");
        final_checksum(&out)
    };
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let _hogs: Vec<ChildGuard> = (0..cores)
        .map(|_| ChildGuard::spawn(Command::new("bash").args(["-c", "while :; do :; done"])))
        .collect();
    let dir = scratch();
    let mut cmd = (Heat2d::new(GRID))
        .env("FRAME_STORAGE_GLOBAL_DIR", dir.path().join("global"))
        .unset("FRAME_CONFIG")
        .frame_run_command(dir.path(), &["--nodes", "128", "--ranks-per-node", "8"]);
    let (status, out, err) = run(&mut cmd, DEADLINE);
    let out = out + &err;
    assert!(status.success(), "{out}");
    assert!(!out.contains("died"), "{out}");
    assert!(out.contains("0 failure(s) recovered"), "{out}");
    assert_eq!(final_checksum(&out), reference, "{out}");
    let metrics = std::fs::read_to_string(dir.path().join("metrics.jsonl")).unwrap_or_default();
    assert!(!metrics.contains("runtime_recovery"), "{metrics}");
}
