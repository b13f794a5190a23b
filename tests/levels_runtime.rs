//! Levels 2 to 4 under the runtime, with real processes: node failures
//! recovered from partner copies (twice in a row), the README demo, and
//! managers killed at every file-system call of a promotion.

mod common;

use common::{example, run, scratch, serial};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const DEADLINE: Duration = Duration::from_secs(300);
const GRID: [&str; 8] = [
    "--nx", "64", "--ny", "60", "--steps", "240", "--every", "10",
];

/// Runs heat2d on `dir` with the levels on (through the environment), plus
/// `args` and `env`; returns (success, output).
fn heat2d(dir: &Path, args: &[&str], env: &[(&str, String)]) -> (bool, String) {
    heat2d_with(&GRID, dir, args, env)
}

fn heat2d_with(grid: &[&str], dir: &Path, args: &[&str], env: &[(&str, String)]) -> (bool, String) {
    let mut cmd = Command::new(example("heat2d"));
    cmd.args(grid)
        .args(args)
        .env("FRAME_STORAGE_LOCAL_DIR", dir.join("local"))
        .env("FRAME_STORAGE_GLOBAL_DIR", dir.join("global"))
        .env("FRAME_L2_INTERVAL", "1")
        .env("FRAME_L3_INTERVAL", "2")
        .env("FRAME_L4_INTERVAL", "3")
        .env("FRAME_L4_CHUNK_SIZE", "64 KiB");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let (status, out, err) = run(&mut cmd, DEADLINE);
    (status.success(), out + &err)
}

fn checksum(out: &str) -> String {
    common::final_checksum(out)
}

fn fault_free(dir: &Path, shape: &[&str]) -> String {
    let (ok, out) = heat2d(dir, shape, &[]);
    assert!(ok, "{out}");
    checksum(&out)
}

#[test]
fn two_node_failures_in_sequence_are_each_recovered_from_partner_copies() {
    let _g = serial();
    let dir = scratch();
    let shape = [
        "--nodes",
        "3",
        "--ranks-per-node",
        "2",
        "--spare-nodes",
        "2",
    ];
    let reference = fault_free(dir.path(), &shape);
    let mut args = shape.to_vec();
    args.extend(["--inject", "node:1@iter=95", "--inject", "node:2@iter=175"]);
    let metrics = dir.path().join("metrics.jsonl");
    let (ok, out) = heat2d(
        dir.path(),
        &args,
        &[("FRAME_METRICS_FILE", metrics.display().to_string())],
    );
    assert!(ok, "{out}");
    // One line per checkpoint, and lines per node and level promoted.
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&metrics)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let checkpoints = lines.iter().filter(|l| l["event"] == "checkpoint").count();
    assert!(checkpoints >= 24, "{checkpoints} checkpoint lines");
    for level in 2..=4 {
        assert!(
            lines
                .iter()
                .any(|l| l["event"] == "promotion" && l["level"] == level && l["ok"] == true),
            "no promotion to level {level} in the metrics"
        );
    }
    // One line per recovery: the failure-aware strategy found level 2 in a
    // single round, for the node the runtime reported.
    let recovered: Vec<&serde_json::Value> =
        lines.iter().filter(|l| l["event"] == "recovery").collect();
    assert_eq!(recovered.len(), 2, "{lines:?}");
    for (line, node) in recovered.iter().zip([1, 2]) {
        assert_eq!(line["strategy"], "frame", "{line}");
        assert_eq!(line["level"], 2, "{line}");
        assert_eq!(line["rounds"], 1, "{line}");
        assert_eq!(line["failed_nodes"], serde_json::json!([node]), "{line}");
        assert!(
            line["application_recovery_ms"].as_f64().unwrap() > 0.0,
            "{line}"
        );
    }
    std::fs::remove_file(&metrics).unwrap();
    let recoveries: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("recovered checkpoint"))
        .collect();
    assert_eq!(recoveries.len(), 2, "{out}");
    // Promotion runs behind the program: the checkpoint just before a failure
    // may not have its partner copies yet, the one before it has.
    assert!(
        recoveries[0].contains("failed nodes [1]") && recoveries[0].contains("from L2"),
        "{out}"
    );
    assert!(
        recoveries[1].contains("failed nodes [2]") && recoveries[1].contains("from L2"),
        "{out}"
    );
    assert_eq!(checksum(&out), reference, "{out}");
    // The job removed its files at every level.
    assert!(
        common::files_under(dir.path()).is_empty(),
        "{:?}",
        common::files_under(dir.path())
    );
}

/// The README demo: a fault-free reference, then a failure recovered from
/// each level in turn (rank, node, node and partner, two nodes of one
/// group); each recovery used its level in one round, and every run ends
/// with the reference's checksum.
#[test]
fn the_readme_demo_recovers_a_failure_from_each_level_to_the_fault_free_checksum() {
    let _g = serial();
    let mut cmd = Command::new(example("heat2d"));
    cmd.env_remove("FRAME_CONFIG");
    let (status, out, err) = run(&mut cmd, DEADLINE);
    assert!(status.success(), "{out}{err}");
    let sums: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("final checksum "))
        .map(|l| l.rsplit(' ').next().unwrap_or(""))
        .collect();
    assert_eq!(sums.len(), 5, "{out}");
    assert!(
        sums.iter().all(|s| *s == sums[0] && s.starts_with("0x")),
        "{out}"
    );
    // The table: the level and rounds of each failure's recovery.
    for (title, level) in [
        ("rank 2 killed", "L1"),
        ("node 1 killed", "L2"),
        ("node 2 and its partner 3 killed", "L3"),
        ("nodes 0 and 1 of one group killed", "L4"),
    ] {
        let row = out
            .lines()
            .find(|l| l.starts_with(title) && !l.starts_with("final"))
            .unwrap_or_else(|| panic!("no row for {title}: {out}"));
        let cols: Vec<&str> = row[title.len()..].split_whitespace().collect();
        assert_eq!(cols.first(), Some(&level), "{row}");
        assert_eq!(cols.get(1), Some(&"1"), "one round: {row}");
        // Runtime, application and full recovery are measured.
        assert!(
            cols.len() >= 9
                && cols[cols.len() - 3..]
                    .iter()
                    .all(|c| c.parse::<f64>().is_ok()),
            "{row}"
        );
    }
    assert!(err.contains("frame: progress: iteration"), "{err}");
    assert!(
        out.contains("failed nodes [2, 3]") && out.contains("from L3"),
        "{out}"
    );
    assert!(out.contains("equal: yes"), "{out}");
}

/// Kills node 1's manager process at each of its file-system calls during
/// the job, every one of them, with node 1 killed later in the run. Each
/// time the daemon restarts the manager and the job goes on; the node
/// failure is recovered from the levels, and the result is the fault-free
/// one: whatever the kill interrupted, every level kept a usable commit.
#[test]
fn a_manager_killed_at_any_call_of_a_promotion_loses_nothing() {
    let _g = serial();
    let dir = scratch();
    let run_with = |extra: &[&str], env: &[(&str, String)]| {
        let mut args = vec![
            "--nodes",
            "3",
            "--ranks-per-node",
            "1",
            "--spare-nodes",
            "1",
        ];
        args.extend(extra);
        let mut env = env.to_vec();
        // Every level promotes every checkpoint: each call of every
        // level's protocol is in the sweep.
        env.push(("FRAME_L3_INTERVAL", "1".into()));
        env.push(("FRAME_L4_INTERVAL", "1".into()));
        // Five checkpoints before node 1 dies: one whose promotion the kill
        // broke still leaves later ones to commit (a commit is learned at
        // the next checkpoint).
        let grid = ["--nx", "64", "--ny", "60", "--steps", "60", "--every", "10"];
        heat2d_with(&grid, dir.path(), &args, &env)
    };
    let (ok, out) = run_with(&[], &[]);
    assert!(ok, "{out}");
    let reference = checksum(&out);
    // Count node 1's manager's crash points in a traced fault-free run.
    let trace = dir.path().join("trace");
    let (ok, out) = run_with(&[], &[("FRAME_CRASH_TRACE", trace.display().to_string())]);
    assert!(ok, "{out}");
    let who = frame::internals::safefs::crash::manager(1).to_string();
    let text = std::fs::read_to_string(&trace).unwrap_or_default();
    let points = text
        .lines()
        .filter(|l| l.split(' ').next() == Some(who.as_str()))
        .count();
    assert!(
        points > 50,
        "too few manager points traced ({points}):\n{text}"
    );
    let mut kills = 0;
    for n in 1..=points {
        let env = [("FRAME_TEST_MANAGER_CRASH_AT", format!("{who}:{n}"))];
        let (ok, out) = run_with(&["--inject", "node:1@iter=55"], &env);
        assert!(ok, "manager killed at point {n}:\n{out}");
        assert!(out.contains("failed nodes [1]"), "point {n}:\n{out}");
        // Whether the kill happened: promotion runs behind the program, so
        // the later points may lie after node 1's death.
        if out.contains("node 1's manager killed by signal 9") {
            kills += 1;
        }
        assert_eq!(
            checksum(&out),
            reference,
            "manager killed at point {n}:\n{out}"
        );
    }
    eprintln!("manager kill sweep: {kills} of {points} points were reached before node 1 died");
    assert!(
        kills * 3 >= points,
        "only {kills} of {points} runs killed the manager"
    );
    assert!(common::files_under(&dir.path().join("local")).is_empty());
}
