//! frame's global restart inside real MPI jobs through User-Level Failure
//! Mitigation (`--features ulfm`, with Open MPI 5's `mpirun --with-ft ulfm`
//! first on the `PATH`: `.ci/run` installs it from PyPI). heat2d runs as 8
//! working ranks on 4 virtual nodes of 2, plus spare processes on a node
//! of their own; ranks and whole nodes SIGKILL themselves at a known step
//! (a node's level-1 storage goes with it), the survivors repair the job
//! in place, and the final checksum must be the fault-free one, which must
//! be what frame's own runtime computes.

use crate::common;

use common::mpirun::{mpirun_ulfm, mpirun_ulfm_within, MpiJob};
use common::{
    compile_c_against, example_with, final_checksum, frame_run_with, libframe_with, run, scratch,
    serial, CHILD_DEADLINE,
};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

const GRID: [&str; 6] = ["--nx", "96", "--ny", "80", "--steps", "400"];

/// heat2d built with the `ulfm` feature (it runs under frame's own runtime
/// as well).
fn heat2d() -> PathBuf {
    example_with("heat2d", &["ulfm"])
}

/// heat2d under `mpirun --with-ft ulfm` on `procs` processes, `spares` of
/// them spare, a checkpoint every 20 steps at the levels of
/// `config/levels.toml`, storage in `dir`, and `extra` arguments.
fn ulfm_heat(dir: &Path, procs: usize, spares: usize, extra: &[&str]) -> MpiJob {
    let spares = spares.to_string();
    let mut args = vec!["--ulfm-spares", &spares, "--ulfm-ranks-per-node", "2"];
    args.extend(extra);
    ulfm_heat_on(dir, procs, &args)
}

/// heat2d under `mpirun --with-ft ulfm` on `procs` processes as
/// [`ulfm_heat`] does, the spares and nodes as `args` say. A kill waits
/// until every node's manager has done the promotions asked of it (every
/// rank waits at the step of the kill), so the levels a recovery finds do
/// not depend on how fast the machine is.
fn ulfm_heat_on(dir: &Path, procs: usize, args: &[&str]) -> MpiJob {
    ulfm_heat_configured(dir, procs, LEVELS, args, &[])
}

/// The configuration with all four levels.
const LEVELS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/config/levels.toml");

/// [`ulfm_heat_on`] with the configuration file `config` and the
/// configuration variables `vars`.
fn ulfm_heat_configured(
    dir: &Path,
    procs: usize,
    config: &str,
    args: &[&str],
    vars: &[(&str, &str)],
) -> MpiJob {
    let job = format!("ulfm-{}", dir.file_name().unwrap().to_string_lossy());
    let mut all: Vec<&str> = GRID.to_vec();
    all.extend(["--every", "20", "--config", config, "--job", &job]);
    all.extend(args);
    if args.contains(&"--die-at") {
        all.push("--die-after-promotions");
    }
    let args = all;
    let (local, global) = (dir.join("l1"), dir.join("global"));
    let mut env = vec![
        ("FRAME_STORAGE_LOCAL_DIR", local.to_str().unwrap()),
        ("FRAME_STORAGE_GLOBAL_DIR", global.to_str().unwrap()),
    ];
    env.extend(vars);
    mpirun_ulfm(dir, procs, &heat2d(), &args, &env)
}

/// The fault-free checksum: heat2d on frame's own runtime (4 nodes of 2
/// ranks), which the fault-free job under ULFM must match.
fn reference() -> &'static str {
    static SUM: OnceLock<String> = OnceLock::new();
    SUM.get_or_init(|| {
        let dir = scratch();
        // Outside mpirun, the program finds Open MPI's library by the path
        // mpirun would give it.
        let lib = mpi_library_dir();
        let own = frame_run_with(
            dir.path(),
            &["--nodes", "4", "--ranks-per-node", "2"],
            &heat2d(),
            &GRID,
            &[("LD_LIBRARY_PATH", Some(lib.to_str().unwrap()))],
        );
        assert!(own.status.success(), "{}", own.out);
        let dir = scratch();
        let job = ulfm_heat(dir.path(), 10, 2, &[]);
        assert!(job.status.success(), "{}", job.out);
        let sum = final_checksum(&job.out);
        assert_eq!(sum, final_checksum(&own.out), "{}", job.out);
        sum
    })
}

/// The `lib` directory beside the `bin` directory of the `mpirun` on the
/// `PATH`.
fn mpi_library_dir() -> PathBuf {
    common::mpirun::mpi_prefix().join("lib")
}

/// The job succeeded, entered the epoch that `entered` describes (rank 0's
/// line), and computed the fault-free result.
fn recovered(job: &MpiJob, entered: &str) {
    assert!(job.status.success(), "{}", job.out);
    assert!(job.out.contains(entered), "no `{entered}` in:\n{}", job.out);
    assert_eq!(final_checksum(&job.out), reference(), "{}", job.out);
}

#[test]
fn a_killed_rank_is_replaced_by_a_spare_and_recovered_online_bit_exact() {
    let _serial = serial();
    let expected = reference();
    let dir = scratch();
    let job = ulfm_heat(dir.path(), 10, 2, &["--die-at", "50", "--die-rank", "5"]);
    recovered(
        &job,
        "entered REINITED (epoch 2, failed ranks [5], failed nodes [])",
    );
    assert_eq!(final_checksum(&job.out), expected);
}

/// With a spare on every node (4 nodes of 3 processes, the last of each
/// a spare), rank 5's replacement is node 2's spare, which finds rank 5's
/// level-1 files there: recovered from L1, not the partner copies. The
/// layout comes from the configuration (`[ulfm]`, `[topology]`, here
/// through their variables), not from heat2d's options.
#[test]
fn a_killed_rank_is_replaced_on_its_own_node_and_recovered_from_level_1() {
    let _serial = serial();
    let dir = scratch();
    let job = ulfm_heat_configured(
        dir.path(),
        12,
        LEVELS,
        &["--ulfm", "--die-at", "50", "--die-rank", "5"],
        &[
            ("FRAME_ULFM_SPARES", "1"),
            ("FRAME_ULFM_SPARE_LAYOUT", "per-node"),
            ("FRAME_TOPOLOGY_RANKS_PER_NODE", "3"),
        ],
    );
    recovered(
        &job,
        "entered REINITED (epoch 2, failed ranks [5], failed nodes [])",
    );
    assert!(job.out.contains("from L1"), "{}", job.out);
}

/// With level 1 only, rank 5 dies and its replacement, a spare on
/// another node, holds nothing: node 2, which lives on, sends it rank 5's
/// level-1 files, and the job recovers from level 1 (before, a failure
/// the job could not survive).
#[test]
fn a_killed_rank_replaced_on_another_node_gets_its_level_1_files_from_its_node() {
    let _serial = serial();
    let dir = scratch();
    let l1_only = concat!(env!("CARGO_MANIFEST_DIR"), "/config/default.toml");
    let job = ulfm_heat_configured(
        dir.path(),
        10,
        l1_only,
        &[
            "--ulfm-spares",
            "2",
            "--ulfm-ranks-per-node",
            "2",
            "--die-at",
            "50",
            "--die-rank",
            "5",
        ],
        &[],
    );
    recovered(
        &job,
        "entered REINITED (epoch 2, failed ranks [5], failed nodes [])",
    );
    assert!(job.out.contains("from L1"), "{}", job.out);
}

/// Both ranks of node 1 die and its level-1 storage is gone: a failed
/// node, recovered from the partner copies (level 2) by two spares.
#[test]
fn a_killed_node_is_recovered_online_from_its_partner_copies() {
    let _serial = serial();
    let dir = scratch();
    let job = ulfm_heat(dir.path(), 10, 2, &["--die-at", "50", "--die-node", "1"]);
    recovered(
        &job,
        "entered REINITED (epoch 2, failed ranks [2, 3], failed nodes [1])",
    );
    assert!(job.out.contains("from L2"), "{}", job.out);
}

/// With no spares and `ulfm.spawn`, each failure gets new processes
/// (`MPI_Comm_spawn`): rank 5's on its own node 2, which still holds its
/// level-1 files; then, in a second job, node 1's two ranks' on a new node,
/// from their partner copies.
#[test]
fn failed_ranks_get_new_processes_and_recover_online_bit_exact() {
    let _serial = serial();
    let cases = [
        (
            "--die-rank",
            "5",
            "failed ranks [5], failed nodes []",
            "from L1",
        ),
        (
            "--die-node",
            "1",
            "failed ranks [2, 3], failed nodes [1]",
            "from L2",
        ),
    ];
    for (what, which, failed, level) in cases {
        let dir = scratch();
        let job = ulfm_heat(
            dir.path(),
            8,
            0,
            &["--ulfm-spawn", "--die-at", "50", what, which],
        );
        recovered(&job, &format!("entered REINITED (epoch 2, {failed})"));
        assert!(job.out.contains(level), "{}", job.out);
        assert!(job.out.contains("start "), "{}", job.out);
    }
}

/// The C heat2d (examples/c/heat2d.c) on `frame_run_ulfm`, libframe
/// built with the `ulfm` feature: rank 2 dies at step 275 and a spare
/// takes its place, then in a second job node 1's ranks (2 and 3) die and
/// new processes take theirs (no spares, `ulfm.spawn`). The ranks die
/// once every manager promoted the checkpoints so far
/// (`frame_wait_promotions`), so both recover checkpoint 250 (the node's
/// from its partner copies) however slow the machine, online, with the
/// checksum of the program run alone, on one rank without MPI's failure
/// handling.
#[test]
fn the_c_heat2d_recovers_online_under_ulfm_from_a_rank_and_a_node_failure() {
    let _serial = serial();
    let lib = libframe_with(&["ulfm"]);
    let bin = scratch();
    let exe = bin.path().join("heat2d_c");
    // libframe built with `ulfm` leaves MPI to the program: `mpicc` links it.
    compile_c_against("mpicc", "examples/c/heat2d.c", &exe, &lib);
    let args = ["--nx", "96", "--ny", "80", "--steps", "400"];
    let alone = {
        let dir = scratch();
        let (status, out, err) = run(
            std::process::Command::new(&exe)
                .args(args)
                .env("FRAME_STORAGE_LOCAL_DIR", dir.path())
                .env("LD_LIBRARY_PATH", mpi_library_dir())
                .env_remove("FRAME_CONFIG"),
            CHILD_DEADLINE,
        );
        assert!(status.success(), "{out}{err}");
        final_checksum(&out)
    };
    let cases = [
        (
            10,
            "2",
            false,
            &["--die-rank", "2"][..],
            "state 1 (1 failed rank(s), first 2); recovered step 250",
        ),
        (
            8,
            "0",
            true,
            &["--die-rank", "2", "--die-rank", "3"][..],
            "state 1 (2 failed rank(s), first 2); recovered step 250",
        ),
    ];
    for (procs, spares, spawn, dying, entered) in cases {
        let dir = scratch();
        let (local, global) = (dir.path().join("l1"), dir.path().join("global"));
        let mut all = args.to_vec();
        all.extend(["--ulfm", "--die-at", "275"]);
        all.extend(dying);
        let env = [
            ("FRAME_STORAGE_LOCAL_DIR", local.to_str().unwrap()),
            ("FRAME_STORAGE_GLOBAL_DIR", global.to_str().unwrap()),
            ("FRAME_SNAPSHOT_INTERVAL", "50"),
            ("FRAME_L2_INTERVAL", "1"),
            ("FRAME_TOPOLOGY_RANKS_PER_NODE", "2"),
            ("FRAME_ULFM_SPARES", spares),
            ("FRAME_ULFM_SPAWN", if spawn { "true" } else { "false" }),
        ];
        let job = mpirun_ulfm(dir.path(), procs, &exe, &all, &env);
        assert!(job.status.success(), "{}", job.out);
        assert!(job.out.contains(entered), "no `{entered}` in:\n{}", job.out);
        assert_eq!(final_checksum(&job.out), alone, "{}", job.out);
    }
}

/// Rank 5 dies twice (its replacement too): at step 50, then at step 120
/// of the second epoch, and in another job on entering the second epoch,
/// before the checkpoint is loaded (a failure during the recovery), that
/// job's program on a communicator of universe error scope with uniform
/// errors.
#[test]
fn two_failures_in_sequence_and_one_during_the_recovery() {
    let _serial = serial();
    let modes = ["--ulfm-error-scope", "universe", "--ulfm-uniform-errors"];
    for (second, modes) in [("120", &[][..]), ("0", &modes[..])] {
        let dir = scratch();
        let mut args = vec!["--die-at", "50", "--die-at", second, "--die-rank", "5"];
        args.extend(modes);
        let job = ulfm_heat(dir.path(), 10, 2, &args);
        recovered(
            &job,
            "entered REINITED (epoch 3, failed ranks [5], failed nodes [])",
        );
    }
}

/// With `ulfm.max_failures = 1` the second failure (the replacement of
/// rank 5 dying as it enters) ends the job: every survivor names it and
/// the key, and nobody is replaced again.
#[test]
fn a_job_repairs_itself_at_most_max_failures_times() {
    let _serial = serial();
    let dir = scratch();
    let args = ["--ulfm-spares", "2", "--ulfm-ranks-per-node", "2"];
    let args = [
        &args[..],
        &["--die-at", "50", "--die-at", "0", "--die-rank", "5"],
    ]
    .concat();
    let job = ulfm_heat_configured(
        dir.path(),
        10,
        LEVELS,
        &args,
        &[("FRAME_ULFM_MAX_FAILURES", "1")],
    );
    assert!(!job.status.success(), "{}", job.out);
    let said = job
        .out
        .lines()
        .filter(|l| l.contains("failure 2 (rank(s) [5]) is more than ulfm.max_failures (1) allows"))
        .count();
    assert_eq!(said, 8, "each of the 8 survivors says so:\n{}", job.out);
    assert!(!job.out.contains("epoch 3"), "{}", job.out);
}

/// Two ranks die with one spare left: every survivor says which ranks
/// failed and that the job cannot go on, and the job ends with an error
/// (`mpirun` deadlocked in 1 run of 2 when the survivors all exited with
/// an error, or aborted, at once).
#[test]
fn more_failures_than_spares_end_the_job_naming_the_ranks_on_every_survivor() {
    let _serial = serial();
    let dir = scratch();
    let job = ulfm_heat(dir.path(), 9, 1, &["--die-at", "50", "--die-node", "1"]);
    assert!(!job.status.success(), "{}", job.out);
    let said = job
        .out
        .lines()
        .filter(|l| l.contains("rank(s) 2, 3 failed and 1 spare process(es) are left"))
        .count();
    assert_eq!(said, 7, "each of the 7 survivors says so:\n{}", job.out);
}

/// examples/error_scopes.rs on 6 processes with `args`: each survivor's
/// line, by rank. A rank the scope should reach but does not never stops,
/// and the deadline fails the test.
fn error_scopes(args: &[&str]) -> std::collections::BTreeMap<u32, String> {
    let dir = scratch();
    let program = example_with("error_scopes", &["ulfm"]);
    let job = mpirun_ulfm_within(Duration::from_secs(90), dir.path(), 6, &program, args, &[]);
    job.out
        .lines()
        .filter_map(|l| {
            let (rank, said) = l.strip_prefix("rank ")?.split_once(": ")?;
            Some((rank.parse().ok()?, said.to_string()))
        })
        .collect()
}

/// Rank 3 of ranks 0-3 dies; rank 2 was receiving from it, ranks 0-1 and
/// 4-5 exchange messages in their own groups. Operation scope: only rank 2
/// sees an error; communicator scope: ranks 0-2 (rank 3's group);
/// universe scope: every survivor.
#[test]
fn each_error_scope_reaches_exactly_its_ranks() {
    let _serial = serial();
    for (scope, reached) in [
        ("operation", vec![2]),
        ("communicator", vec![0, 1, 2]),
        ("universe", vec![0, 1, 2, 4, 5]),
    ] {
        let lines = error_scopes(&["--scope", scope]);
        let survivors: Vec<u32> = lines.keys().copied().collect();
        assert_eq!(survivors, [0, 1, 2, 4, 5], "{scope}: {lines:#?}");
        let erred: Vec<u32> = lines
            .iter()
            .filter(|(_, said)| said.starts_with("error: "))
            .map(|(r, _)| *r)
            .collect();
        assert_eq!(erred, reached, "{scope}: {lines:#?}");
    }
}

/// Rank 5 dies before the 11th broadcast from rank 0. With uniform error
/// reporting every survivor fails at that broadcast and no other; without,
/// each rank learns when its part of the broadcast needs rank 5 (printed,
/// not asserted: MPI's broadcast tree decides).
#[test]
fn uniform_errors_fail_a_collective_at_every_survivor_or_none() {
    let _serial = serial();
    let lines = error_scopes(&["--uniform", "on"]);
    assert_eq!(lines.len(), 5, "{lines:#?}");
    for (rank, said) in &lines {
        assert!(
            said.starts_with("first error at broadcast 10: "),
            "rank {rank}: {lines:#?}"
        );
    }
    let lines = error_scopes(&["--uniform", "off"]);
    assert_eq!(lines.len(), 5, "{lines:#?}");
    eprintln!("without uniform errors: {lines:#?}");
}

/// Rank 5 dies before barrier 10 and rank 1, instead of that barrier,
/// fails on a receive from rank 5, revokes the communicator and leaves it:
/// in uniform mode every other survivor's barrier 10 fails, though its
/// agreement never gets rank 1's part (it waited forever, and with it a
/// job whose program left a collective after an error).
#[test]
fn a_rank_leaving_after_an_error_fails_the_others_uniform_collective() {
    let _serial = serial();
    let lines = error_scopes(&["--leave"]);
    assert_eq!(
        lines.keys().copied().collect::<Vec<_>>(),
        [0, 1, 2, 3, 4],
        "{lines:#?}"
    );
    assert!(
        lines[&1].starts_with("left at barrier 10: error: "),
        "{lines:#?}"
    );
    for rank in [0, 2, 3, 4] {
        assert!(
            lines[&rank].starts_with("first error at barrier 10: "),
            "rank {rank}: {lines:#?}"
        );
    }
}

/// An FTI program on libfti (built against Open MPI) under ULFM: the last
/// of 8 ranks dies at step 130 and the survivors' next MPI call reports
/// the failure; the job ends with an error and no process left (it waited
/// forever: Open MPI's fatal handler aborted the survivors but `mpirun
/// --with-ft ulfm` did not end the job), and the same command run again
/// restarts from the checkpoints with the fault-free checksum.
#[test]
fn an_fti_program_whose_rank_dies_ends_under_ulfm_and_restarts_bit_exact() {
    let _serial = serial();
    let program = common::fti::compile("examples/c/fti_heat.c", "fti_heat_ulfm");
    // The configuration is written once per job: libfti records the
    // restart in it.
    let run = |dir: &Path, crash_at: Option<&str>| {
        let config = dir.join("config.fti");
        if !config.exists() {
            common::fti::config(dir, 0, 2, 1);
        }
        let mut args = vec![config.to_str().unwrap().to_string()];
        args.extend(["96", "80", "200"].map(String::from));
        args.extend(crash_at.map(String::from));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        mpirun_ulfm(dir, 8, &program, &args, &common::fti::LEVELS)
    };
    let fresh = scratch();
    let clean = run(fresh.path(), None);
    assert!(clean.status.success(), "{}", clean.out);
    let expected = final_checksum(&clean.out);
    let dir = scratch();
    let crashed = run(dir.path(), Some("130"));
    assert!(!crashed.status.success(), "{}", crashed.out);
    assert!(
        crashed
            .out
            .contains("MPI reported an error on the program's communicator"),
        "{}",
        crashed.out
    );
    let again = run(dir.path(), Some("130"));
    assert!(again.status.success(), "{}", again.out);
    assert!(again.out.contains("restarted at step"), "{}", again.out);
    assert_eq!(final_checksum(&again.out), expected, "{}", again.out);
}

/// `tests/c/ulfm_waits.c` with `args` on `procs` processes, one of them a
/// spare: the last working rank dies on its first entry while the
/// survivors wait (see the program). Asserts the job recovered, every rank
/// in the next entry.
fn waits_recovered(procs: usize, args: &[&str]) -> MpiJob {
    let lib = libframe_with(&["ulfm"]);
    let bin = scratch();
    let exe = bin.path().join("ulfm_waits");
    compile_c_against("mpicc", "tests/c/ulfm_waits.c", &exe, &lib);
    let dir = scratch();
    let local = dir.path().join("l1");
    let env = [
        ("FRAME_STORAGE_LOCAL_DIR", local.to_str().unwrap()),
        ("FRAME_ULFM_SPARES", "1"),
    ];
    // Starting 68 processes on two busy cores is slow: the deadline is
    // for a job that hangs.
    let deadline = Duration::from_secs(180).max(Duration::from_secs(5) * procs as u32);
    let job = mpirun_ulfm_within(deadline, dir.path(), procs, &exe, args, &env);
    assert!(job.status.success(), "{}", job.out);
    let ranks = procs - 1;
    // Rank 0 survived: it enters again as FRAME_STATE_REINITED (1).
    let line = format!(
        "ulfm_waits: entry 1, {ranks} ranks (sum {}), 1 failed, first {}",
        ranks * (ranks - 1) / 2,
        ranks - 1
    );
    assert!(job.out.contains(&line), "no `{line}` in:\n{}", job.out);
    job
}

/// No survivor's call involves the rank that dies: rank 1 tests a receive
/// from rank 0 (MPI's own `MPI_Test`), the others wait in `MPI_Recv` for
/// rank 1. The job repairs because those waiting by `frame_mpi.h` ask
/// frame, which asks MPI whether a process of the communicator failed;
/// before, they only asked whether it was revoked, nobody revoked it, and
/// the job waited until its deadline.
#[test]
fn survivors_waiting_for_live_peers_leave_when_another_rank_dies() {
    let _serial = serial();
    waits_recovered(5, &[]);
}

/// A recovered job of 68 processes holding 48 MiB each ends with success
/// and its launcher quiet: after a recovery each process tells the
/// launcher it is done before it ends itself. Before, each vanished like
/// a failed process, Open MPI's `prterun` told the others and met
/// processes that had already ended (1 to 20 failed writes in each of
/// three jobs here); once it took more than 10 SIGPIPEs it ended the
/// recovered job with an error (LULESH on 64 ranks did, after its right
/// answer). Rank 0 waits for the rank that dies (`--direct`), so that the
/// job recovers whoever learns of the failure.
#[test]
fn a_recovered_job_of_many_processes_ends_with_success() {
    let _serial = serial();
    let job = waits_recovered(68, &["--direct", "--hold", "48"]);
    for noise in ["SIGPIPE", "write failed"] {
        assert!(!job.out.contains(noise), "`{noise}` in:\n{}", job.out);
    }
}

/// The baseline frame's ULFM mode is measured against (benches/ulfm.rs):
/// heat2d recovered by hand, in-memory buddy copies and two spares,
/// computes heat2d's own result whichever rank dies. A checkpoint cut off
/// by the failure must not be rolled back to on some ranks only.
#[test]
fn heat2d_recovered_by_hand_matches_heat2d_whichever_rank_dies() {
    let _serial = serial();
    let expected = reference();
    let program = example_with("heat2d_buddy", &["ulfm"]);
    for rank in 0..8 {
        let dir = scratch();
        let rank = rank.to_string();
        let mut args: Vec<&str> = GRID.to_vec();
        args.extend(["--every", "20", "--die-at", "50", "--die-rank", &rank]);
        let job = mpirun_ulfm(dir.path(), 10, &program, &args, &[]);
        assert!(job.status.success(), "rank {rank} killed:\n{}", job.out);
        assert!(
            job.out.contains("rank 0 restored step 40 from memory"),
            "rank {rank} killed:\n{}",
            job.out
        );
        assert_eq!(final_checksum(&job.out), expected, "rank {rank} killed");
    }
}
