//! VeloC programs on frame's libveloc (`--features mpi`), under `mpiexec`
//! with 8 ranks as 4 virtual nodes: the heat program written against
//! `veloc.h` only (`benches/side_by_side/veloc_heat.c`), with its memory
//! regions and with a file per rank through `VELOC_Route_file`, killed
//! and run again with nodes' scratch directories lost; and bad
//! configuration files, each one clear error.

use crate::common;

use common::veloc::{self, Heat};
use common::{scratch, serial};
use std::sync::OnceLock;

fn heat() -> &'static Heat {
    static HEAT: OnceLock<Heat> = OnceLock::new();
    HEAT.get_or_init(|| {
        Heat::new(veloc::compile(
            "benches/side_by_side/veloc_heat.c",
            "veloc_heat",
        ))
    })
}

#[test]
fn memory_regions_come_back_bit_exact_from_scratch_sets_and_the_persistent_directory() {
    let _serial = serial();
    let heat = heat();
    heat.reference();
    // The newest checkpoint, the 6th, is version 119.
    heat.killed_and_resumed("", &[], &[], "L1", 119);
    heat.killed_and_resumed("", &[], &[1], "L3", 119);
    heat.killed_and_resumed("ec_interval = -1\n", &[], &[0, 1, 2, 3], "L4", 119);
}

#[test]
fn a_file_per_rank_through_route_file_comes_back_bit_exact() {
    let _serial = serial();
    let heat = heat();
    let file = [("HEAT_FILE", "1")];
    heat.killed_and_resumed("", &file, &[], "L1", 119);
    heat.killed_and_resumed("", &file, &[2], "L3", 119);
    heat.killed_and_resumed("", &file, &[0, 1, 2, 3], "L4", 119);
}

#[test]
fn a_missing_or_wrong_key_is_one_clear_error() {
    let _serial = serial();
    let heat = heat();
    let dir = scratch();
    let scratch_dir = dir.path().join("scratch");
    std::fs::create_dir_all(&scratch_dir).unwrap();
    let at = format!("scratch = {}\n", scratch_dir.display());
    for (text, needles) in [
        ("", ["mode", "missing"]),
        ("mode = fast\n", ["mode", "fast"]),
        ("mode = sync\nscrach = /t\n", ["scrach", "line 3"]),
    ] {
        let text = format!("{at}{text}");
        let config = dir.path().join("bad.cfg");
        std::fs::write(&config, &text).unwrap();
        let job = heat.run(dir.path(), &config, None, &[]);
        assert!(!job.status.success(), "{text}:\n{}", job.out);
        let said: Vec<&str> = job
            .out
            .lines()
            .filter(|l| l.starts_with("frame: error: VeloC: VELOC_Init: "))
            .filter(|l| needles.iter().all(|n| l.contains(n)) && l.contains("bad.cfg"))
            .collect();
        assert_eq!(said.len(), 1, "{text}:\n{}", job.out);
    }
}

#[test]
fn a_restart_learns_a_regions_size_then_restores_it_into_new_memory() {
    let _serial = serial();
    let program = veloc::compile("tests/c/veloc_sizes.c", "veloc_sizes");
    let dir = scratch();
    let config = veloc::config(dir.path(), "");
    let run = |args: &[&str]| {
        let mut cmd = std::process::Command::new("mpiexec");
        cmd.args(["-n", "8"])
            .arg(&program)
            .args(args)
            .current_dir(dir.path())
            .env("FRAME_TOPOLOGY_RANKS_PER_NODE", "2");
        common::mpirun::in_group(cmd, common::mpirun::JOB_DEADLINE, dir.path())
    };
    let config = config.to_str().unwrap();
    let written = run(&["write", config, "1000"]);
    assert!(
        written.status.success() && written.out.contains("sizes: written"),
        "{}",
        written.out
    );
    let read = run(&["read", config]);
    assert!(
        read.status.success() && read.out.contains("sizes: back"),
        "{}",
        read.out
    );
}
