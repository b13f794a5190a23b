//! Choosing the checkpoint a job restarts from: an older one named with
//! `--restart-from` (or `recovery.restart_from`), the fallback to an older
//! checkpoint when the newest is damaged on one rank, `frame ls` and
//! `frame drop`. The program is heat2d under its embedded launcher (real
//! rank processes); every recovered run must end with the fault-free
//! run's checksum, and nothing newer than the restored checkpoint may be
//! deleted.

use crate::common;

use common::heat2d::Heat2d;
use common::{final_checksum, frame_bin, run, scratch, serial};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const DEADLINE: Duration = Duration::from_secs(300);
/// Checkpoint k holds step 25 k.
const GRID: [&str; 8] = ["--nx", "96", "--ny", "80", "--every", "25", "--nodes", "2"];

/// Runs heat2d on storage `dir` keeping the newest four checkpoints;
/// returns (exit status, stdout and stderr).
fn heat2d(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> (std::process::ExitStatus, String) {
    (Heat2d::new(GRID).args(args).storage_in(dir))
        .env("FRAME_RETENTION_KEEP_LAST", "4")
        .envs(env.iter().copied())
        .run(DEADLINE)
}

/// The fault-free checksum after `steps` steps.
fn reference(steps: &str) -> String {
    let dir = scratch();
    let (status, out) = heat2d(dir.path(), &["--steps", steps], &[]);
    assert!(status.success(), "{out}");
    final_checksum(&out)
}

/// Runs to step 140 and kills the job: checkpoints 2 to 5 stay.
fn crash_at_140(dir: &Path) {
    let (status, out) = heat2d(dir, &["--steps", "300", "--crash-at", "140"], &[]);
    assert_eq!(
        status.signal(),
        Some(9),
        "the run must die by SIGKILL:\n{out}"
    );
}

fn frame(args: &[&str]) -> (i32, String) {
    let (status, out, err) = run(Command::new(frame_bin()).args(args), DEADLINE);
    (status.code().unwrap_or(-1), out + &err)
}

/// The ids `frame ls` lists under `dir`.
fn listed(dir: &Path) -> Vec<u64> {
    let (code, out) = frame(&["ls", "--json", &dir.to_string_lossy()]);
    assert_eq!(code, 0, "{out}");
    let rows: Vec<serde_json::Value> = serde_json::from_str(&out).expect(&out);
    rows.iter().filter_map(|r| r["id"].as_u64()).collect()
}

/// Every file of checkpoint `id` under `dir`.
fn files_of(dir: &Path, id: u64) -> Vec<PathBuf> {
    let name = format!("ckpt-{id:020}");
    common::files_under(dir)
        .into_iter()
        .filter(|p| p.components().any(|c| c.as_os_str() == name.as_str()))
        .collect()
}

fn rank_file(dir: &Path, id: u64, suffix: &str) -> PathBuf {
    let name = format!("ckpt-{id:020}");
    files_of(dir, id)
        .into_iter()
        .find(|p| {
            p.to_string_lossy().contains(&name)
                && p.file_name()
                    .is_some_and(|n| n.to_string_lossy() == format!("rank-000002{suffix}"))
        })
        .unwrap_or_else(|| {
            panic!(
                "rank 2's {suffix} of checkpoint {id} under {}",
                dir.display()
            )
        })
}

#[test]
fn a_restart_from_an_older_checkpoint_gives_its_state_and_keeps_the_newer_ones() {
    let _g = serial();
    let (at_110, at_300) = (reference("110"), reference("300"));
    let dir = scratch();
    crash_at_140(dir.path());
    assert_eq!(listed(dir.path()), [2, 3, 4, 5]);

    // Checkpoint 3 (step 75) comes back although 4 and 5 are newer; the
    // run commits its checkpoint of step 100 as 6 and keeps everything.
    let keep = [("FRAME_RETENTION_KEEP_ON_FINALIZE", "true")];
    let (status, out) = heat2d(
        dir.path(),
        &["--steps", "110", "--restart-from", "3"],
        &keep,
    );
    assert!(status.success(), "{out}");
    assert!(
        out.contains("rank 0 restored checkpoint 3 (step 75) from L1"),
        "{out}"
    );
    assert!(
        out.contains("restarting from checkpoint 3 as asked"),
        "{out}"
    );
    assert!(out.contains("new ones are numbered from 6"), "{out}");
    assert_eq!(final_checksum(&out), at_110, "restarted from checkpoint 3");
    assert_eq!(
        listed(dir.path()),
        [3, 4, 5, 6],
        "nothing newer than 3 was deleted"
    );

    // Without the flag the newest comes back: 6, the step-100 state.
    let (status, out) = heat2d(dir.path(), &["--steps", "300"], &[]);
    assert!(status.success(), "{out}");
    assert!(
        out.contains("rank 0 restored checkpoint 6 (step 100) from L1"),
        "{out}"
    );
    assert_eq!(final_checksum(&out), at_300);
}

#[test]
fn online_failures_go_back_to_the_named_checkpoint_until_a_newer_one_commits() {
    let _g = serial();
    let at_300 = reference("300");
    let dir = scratch();
    crash_at_140(dir.path());
    // Rank 1 dies at step 90, before the run's first checkpoint (step
    // 100): checkpoint 3 again. Rank 2 dies at step 110: checkpoint 6.
    let (status, out) = heat2d(
        dir.path(),
        &[
            "--steps",
            "300",
            "--restart-from",
            "3",
            "--inject",
            "rank:1@iter=90",
            "--inject",
            "rank:2@iter=110",
        ],
        &[],
    );
    assert!(status.success(), "{out}");
    for line in [
        "rank 0 restored checkpoint 3 (step 75) from L1, entered NEW in epoch 1",
        "rank 0 restored checkpoint 3 (step 75) from L1, entered REINITED in epoch 2",
        "rank 0 restored checkpoint 6 (step 100) from L1, entered REINITED in epoch 3",
    ] {
        assert!(out.contains(line), "expected {line:?} in:\n{out}");
    }
    assert_eq!(final_checksum(&out), at_300);
}

#[test]
fn a_damaged_newest_checkpoint_on_one_rank_falls_back_with_a_message_and_deletes_nothing() {
    let _g = serial();
    let (at_140, at_300) = (reference("140"), reference("300"));
    // A chunk of the data flipped (found while loading) and the record
    // cut (found while planning).
    for (suffix, says) in [
        (".fck", "checkpoint 5 failed to load (rank 2: "),
        (".meta.json", "(rank 2: checkpoint 5 is unusable: "),
    ] {
        let dir = scratch();
        crash_at_140(dir.path());
        let victim = rank_file(dir.path(), 5, suffix);
        let mut bytes = std::fs::read(&victim).unwrap();
        if suffix == ".fck" {
            let at = bytes.len() - 5;
            bytes[at] ^= 0x01;
        } else {
            // Cut in half: no longer a record.
            bytes.truncate(bytes.len() / 2);
        }
        std::fs::write(&victim, &bytes).unwrap();
        let before = files_of(dir.path(), 5);
        if suffix == ".meta.json" {
            // `frame ls` reads records: it sees this damage (a chunk's
            // needs `frame verify`).
            let (code, text) = frame(&["ls", &dir.path().to_string_lossy()]);
            assert_eq!(code, 0, "{text}");
            let row = text
                .lines()
                .find(|l| l.split_whitespace().next() == Some("5"));
            assert!(
                row.is_some_and(|r| r.ends_with("L1 damaged (rank 2)")),
                "{text}"
            );
        }

        let keep = [("FRAME_RETENTION_KEEP_ON_FINALIZE", "true")];
        let (status, out) = heat2d(dir.path(), &["--steps", "140"], &keep);
        assert!(status.success(), "{suffix}: {out}");
        assert!(out.contains(says), "{suffix}: expected {says:?} in:\n{out}");
        assert!(
            out.contains("restoring checkpoint 4, the newest older one every rank can restore. Nothing was deleted"),
            "{suffix}: {out}"
        );
        assert!(
            out.contains("rank 0 restored checkpoint 4 (step 100) from L1"),
            "{out}"
        );
        assert_eq!(final_checksum(&out), at_140, "{suffix}");
        assert_eq!(
            files_of(dir.path(), 5),
            before,
            "{suffix}: checkpoint 5 was touched"
        );
        assert_eq!(std::fs::read(&victim).unwrap(), bytes, "{suffix}");
        // The run's checkpoint of step 125 is 6, past the damaged one;
        // retention counts what the run restored or committed (4 and 6),
        // so 3 goes and 5 stays.
        assert_eq!(listed(dir.path()), [4, 5, 6], "{suffix}");

        let (status, out) = heat2d(dir.path(), &["--steps", "300"], &[]);
        assert!(status.success(), "{out}");
        assert!(
            out.contains("rank 0 restored checkpoint 6 (step 125) from L1"),
            "{out}"
        );
        assert_eq!(final_checksum(&out), at_300, "{suffix}");
    }
}

#[test]
fn naming_a_checkpoint_no_older_one_of_which_is_restorable_is_an_error_not_a_fresh_start() {
    let _g = serial();
    let dir = scratch();
    crash_at_140(dir.path());
    let before = common::file_hashes(dir.path());
    // Retention removed checkpoint 1.
    let (status, out) = heat2d(
        dir.path(),
        &["--steps", "300"],
        &[("FRAME_RECOVERY_RESTART_FROM", "1")],
    );
    assert!(!status.success(), "{out}");
    assert!(
        out.contains("`recovery.restart_from` = 1 (from environment variable FRAME_RECOVERY_RESTART_FROM) asks for checkpoint 1 or an older one"),
        "{out}"
    );
    assert!(!out.contains("final checksum"), "{out}");
    assert_eq!(
        common::file_hashes(dir.path()),
        before,
        "nothing may change"
    );

    let (status, out) = heat2d(dir.path(), &["--steps", "300", "--restart-from", "0"], &[]);
    assert!(!status.success(), "0 is not a checkpoint id: {out}");
    assert!(out.contains("--restart-from"), "{out}");
}

#[test]
fn ls_shows_each_level_and_drop_removes_a_checkpoint_from_all_of_them() {
    let _g = serial();
    let at_300 = reference("300");
    let dir = scratch();
    let levels = concat!(env!("CARGO_MANIFEST_DIR"), "/config/levels.toml");
    // 4 nodes of one rank; level 1 every 25 steps keeps 2, level 2 every
    // checkpoint keeps 1, level 3 every second keeps 1, level 4 every
    // fifth keeps 2; finalize waits for the promotions and keeps it all.
    let env = [
        ("FRAME_CONFIG", levels),
        ("FRAME_RETENTION_KEEP_ON_FINALIZE", "true"),
        ("FRAME_RETENTION_KEEP_LAST", "2"),
    ];
    let args = ["--steps", "300", "--nodes", "4", "--ranks-per-node", "1"];
    let grid_args: Vec<&str> = GRID[..6].iter().chain(args.iter()).copied().collect();
    let run_heat = |env: &[(&str, &str)]| {
        let heat = Heat2d::new(&grid_args).storage_in(dir.path());
        let (status, out) = heat.envs(env.iter().copied()).run(DEADLINE);
        assert!(status.success(), "{out}");
        out
    };
    let out = run_heat(&env);
    assert_eq!(final_checksum(&out), at_300);

    let (code, text) = frame(&["ls", &dir.path().to_string_lossy()]);
    assert_eq!(code, 0, "{text}");
    let row = |id: u64| {
        text.lines()
            .find(|l| l.split_whitespace().next() == Some(&id.to_string()))
            .unwrap_or_else(|| panic!("no row {id} in:\n{text}"))
            .to_string()
    };
    assert!(row(5).ends_with("L4 committed"), "{text}");
    assert!(row(10).ends_with("L4 committed"), "{text}");
    assert!(row(11).ends_with("L1 committed"), "{text}");
    assert!(
        row(12).ends_with("L1 committed, L2 committed, L3 committed"),
        "{text}"
    );
    assert!(
        text.contains("a restart restores checkpoint 12 if every rank can"),
        "{text}"
    );

    // Without --yes and no terminal: nothing happens.
    let (code, text) = frame(&["drop", "12", &dir.path().to_string_lossy()]);
    assert_ne!(code, 0, "{text}");
    assert!(text.contains("pass --yes"), "{text}");
    assert_eq!(listed(dir.path()), [5, 10, 11, 12]);

    let (code, text) = frame(&["drop", "12", &dir.path().to_string_lossy(), "--yes"]);
    assert_eq!(code, 0, "{text}");
    assert!(files_of(dir.path(), 12).is_empty(), "{text}");
    assert_eq!(listed(dir.path()), [5, 10, 11]);
    let (code, text) = frame(&["verify", &dir.path().to_string_lossy()]);
    assert_eq!(code, 0, "what is left verifies:\n{text}");
    let (code, text) = frame(&["drop", "12", &dir.path().to_string_lossy(), "--yes"]);
    assert_ne!(code, 0, "{text}");
    assert!(text.contains("no checkpoint 12"), "{text}");

    // The next run restores 11 (step 275) from level 1.
    let out = run_heat(&[("FRAME_CONFIG", levels)]);
    assert!(
        out.contains("restored checkpoint 11 (step 275) from L1"),
        "{out}"
    );
    assert_eq!(final_checksum(&out), at_300);
}
