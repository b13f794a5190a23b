//! The Python package under MPI (feature `mpi`): the numpy heat program
//! run by `mpiexec` with `Checkpointer(comm=MPI.COMM_WORLD)` (mpi4py) on
//! 4 ranks in virtual nodes of 2, killed once a checkpoint reached the
//! partner node, and run again: it resumes from level 1, or from level 2
//! when node 1's storage went with the failure, bit for bit.

use crate::common;

use common::mpirun::{mpiexec, MpiJob};
use common::python::{heat_program, python_mpi};
use common::{final_checksum, scratch, serial};
use std::path::Path;

fn heat(dir: &Path, extra: &[&str]) -> MpiJob {
    let py = python_mpi();
    let local = dir.join("l1");
    let env = [
        ("FRAME_STORAGE_LOCAL_DIR", local.to_str().unwrap()),
        ("FRAME_SNAPSHOT_INTERVAL", "10"),
        ("FRAME_L2_INTERVAL", "1"),
        ("FRAME_TOPOLOGY_RANKS_PER_NODE", "2"),
    ];
    let mut args = heat_program();
    args.push("--mpi".into());
    args.extend(extra.iter().map(|a| a.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    mpiexec(dir, 4, &py, &args, &env)
}

#[test]
fn numpy_heat_under_mpi_resumes_bit_for_bit_from_level_1_and_level_2() {
    let _g = serial();
    let dir = scratch();
    let clean = heat(dir.path(), &[]);
    assert!(clean.status.success(), "{}", clean.out);
    let reference = final_checksum(&clean.out);
    for (lost, level) in [(None, "L1"), (Some(1), "L2")] {
        let dir = scratch();
        let crashed = heat(dir.path(), &["--crash-at", "120"]);
        assert!(!crashed.status.success(), "{}", crashed.out);
        assert!(
            crashed.out.contains("crashing at step 120"),
            "{}",
            crashed.out
        );
        if let Some(node) = lost {
            let d = dir.path().join("l1").join(format!("node-{node}"));
            std::fs::remove_dir_all(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
        }
        let resumed = heat(dir.path(), &[]);
        assert!(resumed.status.success(), "{}", resumed.out);
        assert!(
            resumed
                .out
                .contains(&format!("recovered step 120 from {level}")),
            "expected step 120 from {level}:\n{}",
            resumed.out
        );
        assert_eq!(final_checksum(&resumed.out), reference, "{}", resumed.out);
    }
}
