//! Programs written for SCR and VeloC that run their work inside frame's
//! resilient entry recover online: `examples/c/scr_heat.c` and
//! `benches/side_by_side/veloc_heat.c` built with `-DHEAT_ONLINE`
//! (`examples/c/heat_online.h`: `frame_run_ulfm`, `MPI_COMM_WORLD` the
//! working ranks' communicator) against libscr and libveloc built with
//! their `ulfm` feature. 8 working ranks on 4 virtual nodes and 2 spare
//! processes; at step 130 the last rank dies (its node's level-1 copies
//! stay), or node 3's two ranks die with their node's storage. A spare
//! takes each dead rank's place, the survivors keep their processes, the
//! library finds the newest checkpoint in the new entry (level 1, or the
//! partner copies and erasure-coded sets for the lost node) and the job
//! ends with the checksum of its fault-free run, in the same MPI job.

use crate::common;

use common::mpirun::{mpirun_ulfm_in, MpiJob};
use common::{final_checksum, libframe_with, scratch, serial, CHILD_DEADLINE, C_FLAGS};
use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// 8 working ranks and 2 spares.
const PROCS: usize = 10;

/// Compiles the heat program `source` for online recovery against the
/// interface library `lib` (`-l<lib>` in `lib_dir`) and libframe, its
/// `MPI_COMM_WORLD` the entry's working ranks (`FRAME_MPI_WORLD`) unless
/// `name` ends in `_world` (then MPI's own, spares and all).
fn compile_online(source: &str, name: &str, include: &str, lib_dir: &Path, lib: &str) -> PathBuf {
    let frame = libframe_with(&["ulfm"]);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("online-programs");
    std::fs::create_dir_all(&dir).expect("programs directory");
    let out = dir.join(name);
    let root = Path::new(ROOT);
    let mut cmd = std::process::Command::new("mpicc");
    cmd.args(C_FLAGS).arg("-DHEAT_ONLINE");
    if !name.ends_with("_world") {
        cmd.arg("-DFRAME_MPI_WORLD");
    }
    cmd.arg("-include")
        .arg(root.join("ffi/include/frame_mpi.h"));
    for inc in ["ffi/include", include, "examples/c"] {
        cmd.arg("-I").arg(root.join(inc));
    }
    cmd.arg(root.join(source));
    for d in [lib_dir, &frame] {
        cmd.arg("-L")
            .arg(d)
            .arg(format!("-Wl,-rpath,{}", d.display()));
    }
    cmd.arg(format!("-l{lib}"))
        .args(["-lframe", "-o"])
        .arg(&out);
    let (status, stdout, err) = common::run(&mut cmd, CHILD_DEADLINE);
    assert!(status.success(), "mpicc {source} failed:\n{stdout}{err}");
    out
}

/// frame's layout of the job: 2 ranks a virtual node, 2 spares.
fn layout() -> Vec<(String, String)> {
    [
        ("FRAME_TOPOLOGY_RANKS_PER_NODE", "2"),
        ("FRAME_ULFM_SPARES", "2"),
        ("FRAME_ULFM_SPAWN", "false"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// Runs `program` `args` in `dir` with `env`.
fn run(dir: &Path, program: &Path, args: &[&str], env: &[(String, String)]) -> MpiJob {
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    mpirun_ulfm_in(dir, PROCS, program, args, &env)
}

/// The job recovered online from `failed` (rank 0's line), restarted at
/// step 119 from `level` (`L1`: nothing fetched) and computed `reference`.
fn recovered(job: &MpiJob, failed: &str, level: &str, reference: &str, what: &str) {
    assert!(job.status.success(), "{what}:\n{}", job.out);
    assert!(
        job.out.contains("crashing at step 130"),
        "{what}: no rank died:\n{}",
        job.out
    );
    let entered = format!("entered state 1 ({failed})");
    assert!(
        job.out.contains(&entered),
        "{what}: no `{entered}` (online recovery):\n{}",
        job.out
    );
    // A library call that met the failure left the entry rather than
    // fail (the program would have called MPI_Abort).
    assert!(
        !job.out.contains("frame: error:"),
        "{what}: a call failed:\n{}",
        job.out
    );
    common::fti::restarted_from(job, 119, level, what);
    assert_eq!(final_checksum(&job.out), reference, "{what}:\n{}", job.out);
}

/// A program `go(dir, crash_at, env)` run fault-free, then with rank 7
/// killed at step 130 (recovered from level 1 at step 119, the newest
/// checkpoint), then with node 3 lost with its storage
/// (`<storage>/node-3` in the job's directory; recovered from
/// `node_level`), every run with `env`, every recovery online and with the
/// fault-free checksum.
fn rank_then_node(
    name: &str,
    go: impl Fn(&Path, Option<&str>, &[(String, String)]) -> MpiJob,
    env: &[(String, String)],
    storage: &str,
    node_level: &str,
) {
    let dir = scratch();
    let job = go(dir.path(), None, env);
    assert!(job.status.success(), "{name}:\n{}", job.out);
    assert!(!job.out.contains("entered state"), "{name}:\n{}", job.out);
    let reference = final_checksum(&job.out);

    let dir = scratch();
    let job = go(dir.path(), Some("130"), env);
    let what = format!("{name}, rank 7 killed");
    recovered(&job, "1 failed rank(s), first 7", "L1", &reference, &what);

    let dir = scratch();
    let node = dir.path().join(storage).join("node-3");
    let mut lost = env.to_vec();
    lost.push(("HEAT_CRASH_NODE".into(), node.display().to_string()));
    let job = go(dir.path(), Some("130"), &lost);
    let what = format!("{name}, node 3 lost");
    let moved = node.with_extension("lost");
    assert!(
        moved.is_dir(),
        "{what}: node 3's storage stayed:\n{}",
        job.out
    );
    recovered(
        &job,
        "2 failed rank(s), first 6",
        node_level,
        &reference,
        &what,
    );
}

/// The SCR heat program: a file per rank through `SCR_Route_file`, a
/// checkpoint every 20 steps (the newest before step 130 is step 119's),
/// recovered from the dead rank's node (level 1), then with node 3 lost
/// from its partner copies (level 2). The rank dies before the step's
/// first call, `SCR_Need_checkpoint`, so every survivor meets the failure
/// inside libscr and must leave the entry from there.
#[test]
fn an_scr_program_under_frame_run_ulfm_recovers_online_bit_exact() {
    let _serial = serial();
    let lib = common::scr::libscr_with("ulfm");
    let exe = compile_online(
        "examples/c/scr_heat.c",
        "scr_heat_online",
        "ffi/scr/include",
        &lib,
        "scr",
    );
    let go = |dir: &Path, crash: Option<&str>, extra: &[(String, String)]| {
        let mut env = common::scr::base_env(dir);
        env.extend(layout());
        env.push(("SCR_DEBUG".into(), "1".into()));
        env.extend(extra.iter().cloned());
        let mut args = vec!["96", "80", "200"];
        args.extend(crash);
        run(dir, &exe, &args, &env)
    };
    let partner = [("SCR_COPY_TYPE".to_string(), "PARTNER".to_string())];
    rank_then_node("scr_heat", go, &partner, "cache", "L2");
}

/// The VeloC heat program: memory regions (`VELOC_Checkpoint`), a
/// checkpoint every 20 steps (the newest before step 130 is version 119),
/// recovered from the dead rank's node (level 1), then with node 3 lost
/// from its erasure-coded set (level 3).
#[test]
fn a_veloc_program_under_frame_run_ulfm_recovers_online_bit_exact() {
    let _serial = serial();
    let lib = common::veloc::libveloc_with("ulfm");
    let exe = compile_online(
        "benches/side_by_side/veloc_heat.c",
        "veloc_heat_online",
        "ffi/veloc/include",
        &lib,
        "veloc-client",
    );
    let go = |dir: &Path, crash: Option<&str>, extra: &[(String, String)]| {
        let config = common::veloc::config(dir, "");
        let mut env = layout();
        env.push(("HEAT_EVERY".into(), "20".into()));
        env.push(("RUST_LOG".into(), "info".into()));
        env.extend(extra.iter().cloned());
        let config = config.display().to_string();
        let mut args = vec![config.as_str(), "96", "80", "200"];
        args.extend(crash);
        run(dir, &exe, &args, &env)
    };
    rank_then_node("veloc_heat", go, &[], "scratch", "L3");
}

/// A session the libraries cannot keep inside `frame_run_ulfm` is one
/// clear error, and the job ends: VeloC's on MPI's own `MPI_COMM_WORLD`
/// (10 processes, the spares with the 8 working ranks; the spares never
/// call `VELOC_Init`), and SCR's from a libscr built without its `ulfm`
/// feature (its calls could wait for a rank that left for the recovery).
#[test]
fn a_session_inside_frame_run_ulfm_on_the_wrong_communicator_or_build_is_refused() {
    let _serial = serial();
    let lib = common::veloc::libveloc_with("ulfm");
    let exe = compile_online(
        "benches/side_by_side/veloc_heat.c",
        "veloc_heat_online_world",
        "ffi/veloc/include",
        &lib,
        "veloc-client",
    );
    let dir = scratch();
    let config = common::veloc::config(dir.path(), "").display().to_string();
    let job = run(dir.path(), &exe, &[&config, "96", "80", "20"], &layout());
    assert!(!job.status.success(), "{}", job.out);
    let said = "the communicator given (10 processes) is not the entry's working ranks (8,";
    assert!(job.out.contains(said), "no `{said}` in:\n{}", job.out);

    let lib = common::scr::libscr_with("mpi");
    let exe = compile_online(
        "examples/c/scr_heat.c",
        "scr_heat_online_plain_lib",
        "ffi/scr/include",
        &lib,
        "scr",
    );
    let dir = scratch();
    let mut env = common::scr::base_env(dir.path());
    env.extend(layout());
    let job = run(dir.path(), &exe, &["96", "80", "20"], &env);
    assert!(!job.status.success(), "{}", job.out);
    let said = "built without the ulfm feature";
    assert!(job.out.contains(said), "no `{said}` in:\n{}", job.out);
}
