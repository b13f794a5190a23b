//! FTI programs on frame's libfti (`--features mpi`), under `mpiexec` with
//! 8 ranks as 4 virtual nodes: a heat-diffusion program written against
//! `fti.h` only, killed and run again, with node directories lost, with
//! dedicated manager ranks (`head = 1`), with intervals frame chooses
//! (`[frame] mtbf`); FTI's calls for variables; and bad
//! configurations, each a clear error rather than a hang.

use crate::common;

use common::fti::Heat;
use common::mpirun::{mpiexec, MpiJob};
use common::{final_checksum, fti, scratch, serial};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The C programs, compiled once with `mpicc` against `fti.h` and libfti.
struct Programs {
    heat: PathBuf,
    vars: PathBuf,
}

fn programs() -> &'static Programs {
    static BUILT: OnceLock<Programs> = OnceLock::new();
    BUILT.get_or_init(|| Programs {
        heat: fti::compile("examples/c/fti_heat.c", "fti_heat"),
        vars: fti::compile("tests/c/fti_vars.c", "fti_vars"),
    })
}

/// The C heat program on 8 ranks.
fn heat(dir: &Path, config: &Path, crash_at: Option<u32>) -> MpiJob {
    c_heat().run(dir, config, crash_at)
}

/// The C heat program with the levels `env` sets instead of `fti::LEVELS`.
fn heat_with(dir: &Path, config: &Path, crash_at: Option<u32>, env: &[(&str, &str)]) -> MpiJob {
    c_heat().run_with(dir, config, crash_at, env)
}

/// `examples/c/fti_heat.c` as a [`Heat`].
fn c_heat() -> &'static Heat {
    static HEAT: OnceLock<Heat> = OnceLock::new();
    HEAT.get_or_init(|| Heat::new(programs().heat.clone()))
}

/// Checks that `out` holds exactly one line of libfti's containing
/// `needle`, an error line in FTI's style, and no line in `tracing`'s own
/// format (a timestamp, a module path).
fn said_once(out: &str, needle: &str) {
    let all: Vec<&str> = out.lines().collect();
    let at: Vec<usize> = (0..all.len())
        .filter(|i| all[*i].contains(needle))
        .collect();
    assert_eq!(at.len(), 1, "{needle:?} is said {} times:\n{out}", at.len());
    // A message of several lines continues on indented ones.
    let first = (0..=at[0])
        .rev()
        .find(|i| !all[*i].starts_with(' '))
        .map_or("", |i| all[i]);
    assert!(
        first.starts_with("[ frame-FTI  Error ] : "),
        "not an FTI-style line: {first}\n{out}"
    );
    for l in out.lines() {
        let stamp = l.len() > 20 && l.as_bytes()[4] == b'-' && l.as_bytes()[10] == b'T';
        assert!(
            !stamp && !l.contains("frame::"),
            "a tracing line: {l}\n{out}"
        );
    }
}

#[test]
fn fti_init_returns_nrec_when_checkpoints_the_job_had_cannot_be_restored_and_deletes_nothing() {
    let _serial = serial();
    let l1_only = [
        ("FRAME_SNAPSHOT_INTERVAL", "20"),
        ("FRAME_L2_INTERVAL", "0"),
        ("FRAME_L3_INTERVAL", "0"),
        ("FRAME_L4_INTERVAL", "0"),
    ];
    let l2_only = [
        ("FRAME_SNAPSHOT_INTERVAL", "20"),
        ("FRAME_L2_INTERVAL", "1"),
        ("FRAME_L3_INTERVAL", "0"),
        ("FRAME_L4_INTERVAL", "0"),
    ];
    /// What is lost after the crash.
    type Lose = fn(&Path);
    /// A case: its name, the levels' settings, the loss, what the error names.
    type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], Lose, &'a [&'a str]);
    let cases: [Case<'_>; 2] = [
        (
            "level 1: rank 3's files and records removed",
            &l1_only,
            |local| {
                for f in common::files_under(&local.join("node-1")) {
                    let name = f.file_name().unwrap().to_string_lossy().into_owned();
                    if name.starts_with("rank-000003.") && !f.to_string_lossy().contains("/spare/")
                    {
                        std::fs::remove_file(f).unwrap();
                    }
                }
            },
            &["rank 3:", "Level 1 keeps no copy off a node"],
        ),
        (
            "level 2: adjacent nodes 0 and 1 removed (both copies of ranks 0-3)",
            &l2_only,
            |local| {
                for n in [0, 1] {
                    std::fs::remove_dir_all(local.join(format!("node-{n}"))).unwrap();
                }
            },
            &["rank 0:", "rank 3:", "levels tried: L1, L2", "Only level 4"],
        ),
    ];
    for (what, env, lose, named) in cases {
        let dir = scratch();
        let config = fti::config(dir.path(), 0, 2, 1);
        let crashed = heat_with(dir.path(), &config, Some(130), env);
        assert!(
            crashed.out.contains("crashing at step 130"),
            "{what}:\n{}",
            crashed.out
        );
        let local = dir.path().join("local");
        lose(&local);
        let before = common::file_hashes(&local);
        assert!(!before.is_empty(), "{what}");
        let again = heat_with(dir.path(), &config, Some(130), env);
        assert!(!again.status.success(), "{what}:\n{}", again.out);
        assert!(
            again.out.contains("FTI_Init returned -2"),
            "{what}: FTI_Init must return FTI_NREC (mpiexec ended with {}):\n{}",
            again.status,
            again.out
        );
        for needle in named
            .iter()
            .chain(&["not recoverable", "Nothing was deleted"])
        {
            assert!(
                again.out.contains(needle),
                "{what}: no {needle:?} in:\n{}",
                again.out
            );
        }
        assert!(
            !again.out.contains("final checksum"),
            "{what}:\n{}",
            again.out
        );
        // Every rank hit the same error: rank 0 says it, once, as FTI's
        // users read their logs.
        said_once(&again.out, "FTI_Init: not recoverable");
        let after = common::file_hashes(&local);
        for file in &before {
            assert!(after.contains(file), "{what}: {file:?} is gone or changed");
        }
    }
}

#[test]
fn fti_heat_killed_and_run_again_resumes_bit_exact_from_the_lowest_level_left() {
    let _serial = serial();
    c_heat().killed_and_resumed_at_every_level(0);
}

#[test]
fn fti_heat_with_a_dedicated_manager_rank_per_node() {
    let _serial = serial();
    let dir = scratch();
    let job = heat(dir.path(), &fti::config(dir.path(), 1, 2, 1), None);
    assert!(job.status.success(), "{}", job.out);
    // 4 program ranks instead of 8: the same grid, the same result.
    assert_eq!(final_checksum(&job.out), c_heat().reference());
    c_heat().killed_and_resumed(1, &[1], &[], "L2", 119);
}

#[test]
fn fti_heat_with_automatic_intervals_from_the_frame_section() {
    let _serial = serial();
    let dir = scratch();
    let config = fti::config(dir.path(), 0, 2, 1);
    // Short MTBFs: intervals of a fraction of a second on this small grid.
    let text = std::fs::read_to_string(&config).unwrap() + "[Frame]\nMTBF = 4s, 8s, 16s, 32s\n";
    std::fs::write(&config, text).unwrap();
    let steps = "600";
    let run = |crash_at: Option<&str>| {
        let mut args = vec![config.to_str().unwrap(), "96", "80", steps];
        args.extend(crash_at);
        // No interval overrides: the section alone decides.
        mpiexec(dir.path(), 8, &programs().heat, &args, &[])
    };
    let clean = run(None);
    assert!(clean.status.success(), "{}", clean.out);
    assert!(
        clean.out.contains("automatic intervals chosen"),
        "no interval choice logged:\n{}",
        clean.out
    );
    let written: u32 = clean
        .out
        .lines()
        .find_map(|l| l.strip_prefix("checkpoints: "))
        .and_then(|rest| rest.split(',').next()?.parse().ok())
        .expect("checkpoint count");
    assert!(written >= 2, "only {written} checkpoint(s):\n{}", clean.out);
    // The measured costs replaced the assumed one.
    assert!(
        clean
            .out
            .contains("automatic intervals chosen again from the measured costs"),
        "{}",
        clean.out
    );
    let crashed = run(Some("500"));
    assert!(!crashed.status.success(), "{}", crashed.out);
    let resumed = run(Some("500"));
    assert!(resumed.status.success(), "{}", resumed.out);
    assert!(
        resumed.out.contains("restarted at step "),
        "{}",
        resumed.out
    );
    assert_eq!(final_checksum(&resumed.out), final_checksum(&clean.out));
}

#[test]
fn fti_calls_for_changing_sizes_single_variables_and_incremental_checkpoints() {
    let _serial = serial();
    let dir = scratch();
    let config = fti::config(dir.path(), 0, 2, 1);
    let config = config.to_str().unwrap();
    let first = mpiexec(dir.path(), 4, &programs().vars, &[config], &[]);
    assert!(!first.status.success(), "{}", first.out);
    assert!(first.out.contains("vars: first run done"), "{}", first.out);
    assert!(!first.out.contains("FAIL"), "{}", first.out);
    let second = mpiexec(dir.path(), 4, &programs().vars, &[config], &[]);
    assert!(second.status.success(), "{}", second.out);
    assert!(!second.out.contains("FAIL"), "{}", second.out);
    assert!(
        second.out.contains("vars: all checks passed"),
        "{}",
        second.out
    );
}

#[test]
fn bad_configurations_are_clear_errors_on_every_rank_never_a_hang() {
    let _serial = serial();
    let dir = scratch();
    let good = fti::config(dir.path(), 0, 2, 1);
    let text = std::fs::read_to_string(&good).unwrap();
    let cases: Vec<(String, String, &str)> = vec![
        (
            "missing.fti".into(),
            String::new(),
            "cannot read config file",
        ),
        (
            "broken.fti".into(),
            text.replace("[Advanced]", "[Advanced"),
            "invalid INI",
        ),
        (
            "badvalue.fti".into(),
            text.replace("Head = 0", "Head = yes"),
            "[basic] head",
        ),
        (
            "wholenodes.fti".into(),
            text.replace("Node_size = 2", "Node_size = 3"),
            "do not form whole nodes",
        ),
        (
            "nodesize.fti".into(),
            text.replace("Local_test = 1", "Local_test = 0")
                .replace("Node_size = 2", "Node_size = 3"),
            "node_size = 3: node 0 runs 8 ranks",
        ),
    ];
    for (name, body, expected) in cases {
        let path = dir.path().join(&name);
        if !body.is_empty() {
            std::fs::write(&path, body).unwrap();
        }
        let job = heat(dir.path(), &path, None);
        assert!(!job.status.success(), "{name}:\n{}", job.out);
        assert!(
            job.out.contains(expected),
            "{name}: no {expected:?} in:\n{}",
            job.out
        );
        assert!(
            job.out.contains("FTI_Init returned -1"),
            "{name}:\n{}",
            job.out
        );
        said_once(&job.out, expected);
        if name != "missing.fti" {
            assert!(
                job.out.contains(path.to_str().unwrap()),
                "{name}: the file is not named:\n{}",
                job.out
            );
        }
    }
}

/// 8 ranks of `FRAME_TEST_BIG_MIB` MiB each (64 by default) through
/// libfti under `mpiexec`, every level, 10 checkpoints, the global
/// directory on disk: the job completes and every node's directory stays
/// within the formula of docs/STORAGE.md the whole run.
#[test]
fn large_ranks_through_libfti_complete_within_the_formula() {
    use common::storage::Watch;
    use frame::config::fti::FtiFile;
    use frame::config::NodeData;
    let _g = serial();
    let mib: u64 = std::env::var("FRAME_TEST_BIG_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    let dir = scratch();
    let disk = tempfile::Builder::new()
        .prefix("frame-test-global-")
        .tempdir()
        .unwrap();
    let config = fti::config(dir.path(), 0, 2, 1);
    let text = std::fs::read_to_string(&config).unwrap().replace(
        &format!("Glbl_dir = {}", dir.path().join("global").display()),
        &format!("Glbl_dir = {}", disk.path().display()),
    );
    std::fs::write(&config, text).unwrap();
    // Rows of 16386 doubles (the grid and its halo), `mib` MiB per rank.
    let ny = 16384u64;
    let rows = (mib << 20) / 8 / (ny + 2) - 2;
    let (nx, ny) = ((rows * 8).to_string(), ny.to_string());
    let env = [
        ("FRAME_SNAPSHOT_INTERVAL", "1"),
        ("FRAME_L2_INTERVAL", "1"),
        ("FRAME_L3_INTERVAL", "2"),
        ("FRAME_L4_INTERVAL", "4"),
    ];
    let local = dir.path().join("local");
    let watch = Watch::start(local, 4);
    let args = [config.to_str().unwrap(), &nx, &ny, "10"];
    // Three seconds per MiB of each rank: about three times what the
    // 2-core test machine takes.
    let deadline = std::time::Duration::from_secs(180.max(3 * mib));
    let job =
        common::mpirun::mpiexec_within(deadline, dir.path(), 8, &programs().heat, &args, &env);
    let peaks = watch.finish();
    assert!(job.status.success(), "{}", job.out);
    let cfg = FtiFile::load(&config, env).unwrap().config;
    // Each rank's file: its rows and halo, the step, and the file's
    // header and chunk table (well within a MiB).
    let file = (rows + 2) * (ny.parse::<u64>().unwrap() + 2) * 8 + (1 << 20);
    let own = 2 * file;
    for (n, peak) in peaks {
        let need = cfg.storage_need(NodeData {
            own,
            partner: own,
            largest_blob: own + (64 << 10),
            group: 4,
        });
        println!("node {n}: peak {peak} bytes, formula {}", need.total());
        assert!(peak >= own, "node {n}: the watch saw only {peak} bytes");
        assert!(
            peak <= need.total(),
            "node {n} held {peak} bytes, above the {} the formula allows ({need:?})",
            need.total()
        );
    }
}
