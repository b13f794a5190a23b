//! frame inside real MPI jobs (`--features mpi`): heat2d on `MpiComm`
//! under `mpiexec`, 8 ranks as 4 virtual nodes, against heat2d on frame's
//! own communicator, and resumed after the job is killed, with and without
//! lost node directories.

use crate::common;

use common::heat2d::Heat2d;
use common::mpirun::{mpi_example, mpiexec};
use common::{final_checksum, scratch, serial};
use std::path::Path;

const GRID: [&str; 6] = ["--nx", "96", "--ny", "80", "--steps", "400"];

/// The levels of `config/levels.toml` (L2 every checkpoint, L3 every 2nd,
/// L4 every 5th), with a checkpoint every 20 steps.
fn levels_args(dir: &Path) -> Vec<String> {
    let mut args: Vec<String> = GRID.iter().map(|s| s.to_string()).collect();
    args.extend(
        [
            "--every",
            "20",
            "--ranks-per-node",
            "2",
            "--config",
            concat!(env!("CARGO_MANIFEST_DIR"), "/config/levels.toml"),
        ]
        .map(String::from),
    );
    args.push("--job".into());
    args.push(job_of(dir));
    args
}

/// The job id of the runs in `dir`.
fn job_of(dir: &Path) -> String {
    format!("mpi-{}", dir.file_name().unwrap().to_string_lossy())
}

fn storage_env(dir: &Path) -> Vec<(&'static str, String)> {
    vec![
        (
            "FRAME_STORAGE_LOCAL_DIR",
            dir.join("l1").display().to_string(),
        ),
        (
            "FRAME_STORAGE_GLOBAL_DIR",
            dir.join("global").display().to_string(),
        ),
    ]
}

/// Runs heat2d_mpi on 8 ranks with `args`, storage in `dir`.
fn heat2d_mpi(dir: &Path, args: &[String]) -> common::mpirun::MpiJob {
    let env = storage_env(dir);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    mpiexec(dir, 8, &mpi_example("heat2d_mpi"), &args, &env)
}

/// The checksum of heat2d on frame's own communicator and runtime, 4 nodes
/// of 2 ranks.
fn own_comm_checksum() -> String {
    let dir = scratch();
    let job = Heat2d::new(GRID).frame_run(dir.path(), &["--nodes", "4", "--ranks-per-node", "2"]);
    assert!(job.status.success(), "{}", job.out);
    final_checksum(&job.out)
}

#[test]
fn heat2d_on_mpi_matches_frames_own_communicator() {
    let _serial = serial();
    let reference = own_comm_checksum();
    let dir = scratch();
    let mut args: Vec<String> = GRID.iter().map(|s| s.to_string()).collect();
    args.extend(["--ranks-per-node", "2", "--every", "50"].map(String::from));
    let job = heat2d_mpi(dir.path(), &args);
    assert!(job.status.success(), "{}", job.out);
    assert!(job.out.contains("wrote 8 checkpoint(s)"), "{}", job.out);
    assert_eq!(final_checksum(&job.out), reference);
    for node in 0..4 {
        assert!(
            dir.path().join("l1").join(format!("node-{node}")).is_dir(),
            "virtual node {node} has no directory of its own"
        );
    }
}

#[test]
fn heat2d_on_mpi_with_a_manager_rank_per_node() {
    let _serial = serial();
    let reference = levels_reference();
    killed_and_resumed_with(&["--dedicated"], &[1], &[], "L2", &reference);
}

/// Kills the job at step 290 (checkpoint 14 is the newest: at L1, L2 and
/// L3; L4 holds checkpoint 10), removes `lost` virtual nodes' directories
/// and the `also` paths (relative to the job's L1 storage), runs it again,
/// and checks the level it resumed from and the checksum.
fn killed_and_resumed(lost: &[u32], also: &[&str], expected_level: &str, reference: &str) {
    killed_and_resumed_with(&[], lost, also, expected_level, reference);
}

/// [`killed_and_resumed`] with more arguments for heat2d_mpi.
fn killed_and_resumed_with(
    extra: &[&str],
    lost: &[u32],
    also: &[&str],
    expected_level: &str,
    reference: &str,
) {
    let dir = scratch();
    let mut args = levels_args(dir.path());
    args.extend(extra.iter().map(|s| s.to_string()));
    args.extend(["--crash-at", "290", "--settle"].map(String::from));
    let crashed = heat2d_mpi(dir.path(), &args);
    assert!(
        !crashed.status.success(),
        "the job did not crash:\n{}",
        crashed.out
    );
    assert!(
        crashed.out.contains("crashing at step 290"),
        "{}",
        crashed.out
    );
    for node in lost {
        let d = dir.path().join("l1").join(format!("node-{node}"));
        std::fs::remove_dir_all(&d).unwrap_or_else(|e| panic!("remove {}: {e}", d.display()));
    }
    let job = job_of(dir.path());
    for path in also {
        let d = dir.path().join("l1").join(path.replace("{job}", &job));
        let removed = if d.is_dir() {
            std::fs::remove_dir_all(&d)
        } else {
            std::fs::remove_file(&d)
        };
        removed.unwrap_or_else(|e| panic!("remove {}: {e}", d.display()));
    }
    let resumed = heat2d_mpi(dir.path(), &args);
    assert!(resumed.status.success(), "lost {lost:?}:\n{}", resumed.out);
    let line = resumed
        .out
        .lines()
        .find(|l| l.starts_with("recovered checkpoint"))
        .unwrap_or_else(|| panic!("no recovery after losing {lost:?}:\n{}", resumed.out));
    assert!(
        line.contains(&format!("from {expected_level} ")),
        "lost {lost:?}: expected {expected_level}: {line}\n--- crashed run:\n{}\n--- resumed run:\n{}",
        crashed.out,
        resumed.out
    );
    assert_eq!(final_checksum(&resumed.out), reference, "lost {lost:?}");
}

#[test]
fn killed_mpi_job_resumes_bit_exact_from_the_lowest_level_left() {
    let _serial = serial();
    let reference = levels_reference();
    // Nodes 0-3 form one L3 group with one parity; node n's partner is n+1.
    killed_and_resumed(&[], &[], "L1", &reference);
    killed_and_resumed(&[1], &[], "L2", &reference);
    // Node 1's partner copies live on node 2.
    killed_and_resumed(&[1], &["node-2/{job}/l2"], "L3", &reference);
    killed_and_resumed(&[1, 2], &[], "L4", &reference);
}

/// The checksum of an uninterrupted run with [`levels_args`].
fn levels_reference() -> String {
    let dir = scratch();
    let run = heat2d_mpi(dir.path(), &levels_args(dir.path()));
    assert!(run.status.success(), "{}", run.out);
    final_checksum(&run.out)
}

/// A kill between two nodes' writes of one commit leaves the newest
/// checkpoint marked on some nodes only (and the one before it already
/// removed there): the node without the marker still holds whole copies,
/// and they count.
#[test]
fn a_commit_marked_on_some_nodes_only_still_restores() {
    let _serial = serial();
    let reference = levels_reference();
    let l2 = "node-2/{job}/l2/ckpt-00000000000000000014/COMMITTED";
    let l3 = "node-2/{job}/l3/ckpt-00000000000000000014/COMMITTED";
    killed_and_resumed(&[1], &[l2], "L2", &reference);
    killed_and_resumed(&[1], &["node-2/{job}/l2", l3], "L3", &reference);
}
