//! SCR programs on frame's libscr (`--features mpi`), under `mpiexec` with
//! 8 ranks as 4 virtual nodes: a heat program written against `scr.h`
//! only (`examples/c/scr_heat.c`), killed and run again with each copy
//! type's checkpoints and nodes' caches lost, and its Fortran twin on
//! `scrf.h`; a restart the program finds
//! invalid, a checkpoint chosen by name, output datasets, a halt, and bad
//! parameters, each a clear error rather than a hang.

use crate::common;

use common::scr::{self, Heat};
use common::{final_checksum, scratch, serial};
use std::sync::OnceLock;

fn heat() -> &'static Heat {
    static HEAT: OnceLock<Heat> = OnceLock::new();
    HEAT.get_or_init(|| Heat::new(scr::compile("examples/c/scr_heat.c", "scr_heat")))
}

/// Checks that `out` holds exactly one error line of libscr's containing
/// every one of `needles`.
fn said_once(out: &str, needles: &[&str]) {
    let lines: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("frame: error: SCR: ") && needles.iter().all(|n| l.contains(n)))
        .collect();
    assert_eq!(
        lines.len(),
        1,
        "{needles:?} is said {} times:\n{out}",
        lines.len()
    );
}

#[test]
fn a_killed_job_resumes_bit_exact_from_every_copy_type_and_level() {
    let _serial = serial();
    let heat = heat();
    heat.reference();
    // The newest checkpoint, the 6th, saved step 119.
    heat.killed_and_resumed(&[("SCR_COPY_TYPE", "SINGLE")], &[], "L1", 119);
    heat.killed_and_resumed(&[("SCR_COPY_TYPE", "PARTNER")], &[1], "L2", 119);
    heat.killed_and_resumed(
        &[("SCR_COPY_TYPE", "XOR"), ("SCR_SET_SIZE", "4")],
        &[2],
        "L3",
        119,
    );
    let rs = [
        ("SCR_COPY_TYPE", "RS"),
        ("SCR_SET_SIZE", "4"),
        ("SCR_SET_FAILURES", "2"),
    ];
    heat.killed_and_resumed(&rs, &[1, 2], "L3", 119);
    // Every 5th checkpoint reaches the prefix: the 5th saved step 99.
    let flushed = [("SCR_COPY_TYPE", "SINGLE"), ("SCR_FLUSH", "5")];
    heat.killed_and_resumed(&flushed, &[0, 1, 2, 3], "L4", 99);
}

#[test]
fn a_fortran_program_on_scrf_h_resumes_bit_exact_from_partner_copies_and_sets() {
    let _serial = serial();
    let heat = Heat::new(scr::compile_fortran(
        "examples/fortran/scr_heat.f90",
        "scr_heat_f90",
    ));
    heat.reference();
    heat.killed_and_resumed(&[("SCR_COPY_TYPE", "PARTNER")], &[1], "L2", 119);
    heat.killed_and_resumed(
        &[("SCR_COPY_TYPE", "XOR"), ("SCR_SET_SIZE", "4")],
        &[2],
        "L3",
        119,
    );
}

#[test]
fn a_restart_a_rank_finds_invalid_falls_back_to_the_older_checkpoint() {
    let _serial = serial();
    let heat = heat();
    let dir = scratch();
    let env = [("SCR_COPY_TYPE", "SINGLE"), ("SCR_CACHE_SIZE", "2")];
    let crashed = heat.run(dir.path(), Some(130), &env);
    assert!(!crashed.status.success(), "{}", crashed.out);
    let mut again = env.to_vec();
    again.push(("HEAT_REJECT", "ckpt.119"));
    let resumed = heat.run(dir.path(), Some(130), &again);
    assert!(resumed.status.success(), "{}", resumed.out);
    assert!(
        resumed.out.contains("rejects ckpt.119")
            && resumed.out.contains("restarted at step 99 in "),
        "{}",
        resumed.out
    );
    assert_eq!(final_checksum(&resumed.out), heat.reference());
}

#[test]
fn a_restart_refused_with_nothing_older_left_starts_afresh() {
    let _serial = serial();
    let heat = heat();
    let dir = scratch();
    // The cache keeps one checkpoint (SCR's default), and nothing else
    // holds an older one.
    let env = [("SCR_COPY_TYPE", "SINGLE"), ("SCR_FLUSH", "0")];
    let crashed = heat.run(dir.path(), Some(130), &env);
    assert!(!crashed.status.success(), "{}", crashed.out);
    let mut again = env.to_vec();
    again.push(("HEAT_REJECT", "ckpt.119"));
    let afresh = heat.run(dir.path(), None, &again);
    assert!(afresh.status.success(), "{}", afresh.out);
    assert!(
        afresh.out.contains("rejects ckpt.119")
            && afresh.out.contains("starts afresh")
            && !afresh.out.contains("restarted at step"),
        "{}",
        afresh.out
    );
    assert_eq!(final_checksum(&afresh.out), heat.reference());
}

#[test]
fn scr_current_picks_an_older_checkpoint_by_name() {
    let _serial = serial();
    let heat = heat();
    let dir = scratch();
    let env = [("SCR_COPY_TYPE", "PARTNER"), ("SCR_CACHE_SIZE", "3")];
    let crashed = heat.run(dir.path(), Some(130), &env);
    assert!(!crashed.status.success(), "{}", crashed.out);
    let mut again = env.to_vec();
    again.push(("SCR_CURRENT", "ckpt.79"));
    let resumed = heat.run(dir.path(), Some(130), &again);
    assert!(resumed.status.success(), "{}", resumed.out);
    assert!(
        resumed.out.contains("restarted at step 79 in "),
        "{}",
        resumed.out
    );
    assert_eq!(final_checksum(&resumed.out), heat.reference());
    // A name the job never wrote is an error naming it and those it has.
    let wrong = heat.run(dir.path(), None, &[("SCR_CURRENT", "ckpt.80")]);
    assert!(!wrong.status.success(), "{}", wrong.out);
    said_once(&wrong.out, &["SCR_Init", "\"ckpt.80\"", "ckpt.79"]);
}

#[test]
fn output_datasets_reach_their_paths_in_the_prefix() {
    let _serial = serial();
    let heat = heat();
    let dir = scratch();
    let job = heat.run(dir.path(), None, &[("HEAT_OUTPUT", "1")]);
    assert!(job.status.success(), "{}", job.out);
    assert_eq!(final_checksum(&job.out), heat.reference());
    // Ten checkpoints (steps 19 to 199), each also output: one file per
    // rank, holding the step and the rank's rows (12 of 96, plus halos,
    // of 82 columns).
    let bytes = 4 + (12 + 2) * 82 * 8;
    for step in (19i32..200).step_by(20) {
        for rank in 0..8 {
            let path = dir
                .path()
                .join(format!("ckpt.{step}"))
                .join(format!("rank_{rank}.ckpt"));
            let data = std::fs::read(&path)
                .unwrap_or_else(|e| panic!("{}: {e}\n{}", path.display(), job.out));
            assert_eq!(data.len(), bytes, "{}", path.display());
            assert_eq!(data[..4], step.to_ne_bytes(), "{}", path.display());
        }
    }
}

#[test]
fn a_halt_file_stops_the_job_after_a_checkpoint_and_the_next_run_resumes() {
    let _serial = serial();
    let heat = heat();
    let dir = scratch();
    let halt = dir.path().join(".scr").join("halt");
    std::fs::create_dir_all(halt.parent().unwrap()).unwrap();
    std::fs::write(&halt, b"").unwrap();
    let halted = heat.run(dir.path(), None, &[]);
    assert!(halted.status.success(), "{}", halted.out);
    assert!(halted.out.contains("halted at step 0"), "{}", halted.out);
    std::fs::remove_file(&halt).unwrap();
    let resumed = heat.run(dir.path(), None, &[]);
    assert!(resumed.status.success(), "{}", resumed.out);
    assert!(
        resumed.out.contains("restarted at step 0 in "),
        "{}",
        resumed.out
    );
    assert_eq!(final_checksum(&resumed.out), heat.reference());
}

#[test]
fn bad_parameters_are_one_clear_error_naming_the_key_and_where_it_was_set() {
    let _serial = serial();
    let heat = heat();
    let dir = scratch();
    let job = heat.run(dir.path(), None, &[("SCR_COPY_TYPE", "MIRROR")]);
    assert!(!job.status.success(), "{}", job.out);
    said_once(&job.out, &["environment variable SCR_COPY_TYPE", "MIRROR"]);
    let conf = dir.path().join("my.conf");
    std::fs::write(&conf, "SCR_FLUSH=2\nSCR_CACHE_SIZ=2\n").unwrap();
    let named = conf.to_str().unwrap();
    let job = heat.run(dir.path(), None, &[("SCR_CONF_FILE", named)]);
    assert!(!job.status.success(), "{}", job.out);
    said_once(&job.out, &["my.conf", "SCR_CACHE_SIZ"]);
    let missing = dir.path().join("none.conf");
    let job = heat.run(
        dir.path(),
        None,
        &[("SCR_CONF_FILE", missing.to_str().unwrap())],
    );
    assert!(!job.status.success(), "{}", job.out);
    said_once(&job.out, &["none.conf"]);
    let job = heat.run(dir.path(), None, &[("SCR_SET_SIZE", "1")]);
    assert!(!job.status.success(), "{}", job.out);
    said_once(&job.out, &["SCR_SET_SIZE", "outside"]);
}
