//! `frame inspect` and `frame verify` on real checkpoint directories.

use crate::common;

use common::{config, frame_bin, ranks, run, scratch};
use frame::comm::Comm;
use frame::Checkpointer;
use std::process::Command;
use std::time::Duration;

const DEADLINE: Duration = Duration::from_secs(60);

fn frame(args: &[&str], dir: &std::path::Path) -> (i32, String) {
    let (status, out, err) = run(Command::new(frame_bin()).args(args).arg(dir), DEADLINE);
    (status.code().unwrap_or(-1), out + &err)
}

fn write(dir: &std::path::Path, job: &str, compression: frame::config::Compression) {
    let mut cfg = config(dir, job);
    cfg.snapshot.compression = compression;
    ranks(3, 2, move |comm| {
        let mut ckpt = Checkpointer::init(&cfg, &comm).unwrap();
        let v = ckpt.protect(1, vec![0.5f64; 20_000 + comm.rank()]);
        let _s = ckpt.protect(0, comm.rank() as u32);
        for _ in 0..3 {
            v.write()[0] += 1.0;
            ckpt.snapshot().unwrap();
        }
    });
}

#[test]
fn inspect_lists_checkpoints_regions_and_ratio() {
    let dir = scratch();
    write(dir.path(), "plain", frame::config::Compression::None);
    write(dir.path(), "squeezed", frame::config::Compression::Zstd);
    let (code, out) = frame(&["inspect", "--ranks"], dir.path());
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("job plain, level L1, latest committed checkpoint: 3"),
        "{out}"
    );
    assert!(out.contains("job squeezed, level L1"), "{out}");
    assert!(out.contains("checkpoint 2: 3 of 3 rank record(s)"), "{out}");
    assert!(!out.contains("checkpoint 1:"), "retention keeps 2:\n{out}");
    assert!(
        out.contains("region 1: f64 x 60003 (20000 to 20002 per rank)"),
        "{out}"
    );
    assert!(out.contains("region 0: u32 x 3 (1 per rank)"), "{out}");
    assert!(out.contains("compression zstd (ratio"), "{out}");
    assert!(out.contains("rank 2: node 1"), "{out}");
    let ratio: f64 = out
        .lines()
        .find(|l| l.contains("compression zstd"))
        .and_then(|l| l.split("(ratio ").nth(1))
        .and_then(|r| r.split(')').next())
        .and_then(|r| r.parse().ok())
        .expect("ratio");
    assert!(ratio > 10.0, "constant data compresses well: {ratio}");

    let (code, json) = frame(&["inspect", "--json"], dir.path());
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v.as_array().map(Vec::len), Some(2));
}

#[test]
fn verify_passes_sound_checkpoints_and_names_damage() {
    let dir = scratch();
    write(dir.path(), "v", frame::config::Compression::Zstd);
    let (code, out) = frame(&["verify"], dir.path());
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("ok: 6 file(s) in 2 checkpoint(s)"), "{out}");

    let victim = dir
        .path()
        .join("v/l1/ckpt-00000000000000000003/rank-000002.fck");
    let mut bytes = std::fs::read(&victim).unwrap();
    let last = bytes.len() - 3;
    bytes[last] ^= 0xff;
    std::fs::write(&victim, bytes).unwrap();
    let (code, out) = frame(&["verify"], dir.path());
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("CORRUPT") && out.contains("rank-000002.fck"),
        "{out}"
    );
    assert!(out.contains("region 1, chunk"), "{out}");
    assert!(out.contains("1 problem(s)"), "{out}");

    std::fs::remove_file(
        dir.path()
            .join("v/l1/ckpt-00000000000000000002/rank-000001.fck"),
    )
    .unwrap();
    let (code, out) = frame(&["verify"], dir.path());
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("rank-000001.meta.json: record without its data file"),
        "{out}"
    );
}

#[test]
fn a_missing_directory_is_a_usage_error() {
    let dir = scratch();
    let (code, out) = frame(&["verify"], &dir.path().join("nope"));
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("cannot read") && out.contains("nope"), "{out}");
    let (code, out) = frame(&["inspect"], &dir.path().join("nope"));
    assert_eq!(code, 2, "{out}");
}

#[test]
fn clean_removes_a_jobs_checkpoints_after_confirmation_and_spares_a_running_job() {
    let dir = scratch();
    write(dir.path(), "gone", frame::config::Compression::None);
    write(dir.path(), "stays", frame::config::Compression::None);
    std::fs::write(dir.path().join("gone/l1/notes.txt"), b"mine").unwrap();
    // A checkpoint directory a move of the fence set aside, with what a
    // late writer left in it.
    let aside = dir
        .path()
        .join("gone/l1/.ckpt-00000000000000000009.tmp-fenced-1-2");
    std::fs::create_dir(&aside).unwrap();
    std::fs::write(aside.join("rank-000000.l4.json"), b"{}").unwrap();
    // Several jobs and no --job: refused.
    let (code, out) = frame(&["clean", "--yes"], dir.path());
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains("several jobs") && out.contains("--job"),
        "{out}"
    );
    // Without a terminal and without --yes: refused, nothing removed.
    let (code, out) = frame(&["clean", "--job", "gone"], dir.path());
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("pass --yes"), "{out}");
    assert!(dir
        .path()
        .join("gone/l1/ckpt-00000000000000000003")
        .exists());
    let (code, out) = frame(&["clean", "--job", "gone", "--yes"], dir.path());
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("removed 2 checkpoint(s)"), "{out}");
    assert!(out.contains("kept") && out.contains("notes.txt"), "{out}");
    let left = common::files_under(&dir.path().join("gone"));
    assert_eq!(left, vec![dir.path().join("gone/l1/notes.txt")], "{left:?}");
    assert!(dir
        .path()
        .join("stays/l1/ckpt-00000000000000000003")
        .exists());

    // A job whose rank is running (holding its lock) is not touched.
    let cfg = config(dir.path(), "stays");
    let (held_tx, held_rx) = std::sync::mpsc::channel();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let done_rx = std::sync::Mutex::new(done_rx);
    let holder = std::thread::spawn(move || {
        ranks(3, 2, move |comm| {
            let _ckpt = Checkpointer::init(&cfg, &comm).unwrap();
            held_tx.send(()).unwrap();
            let _ = done_rx.lock().unwrap().recv_timeout(DEADLINE);
        })
    });
    for _ in 0..3 {
        common::Patience::new(DEADLINE)
            .wait(|slice| held_rx.recv_timeout(slice).ok())
            .unwrap();
    }
    let (code, out) = frame(&["clean", "--job", "stays", "--yes"], dir.path());
    for _ in 0..3 {
        done_tx.send(()).unwrap();
    }
    holder.join().unwrap();
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("is running"), "{out}");
    assert!(dir
        .path()
        .join("stays/l1/ckpt-00000000000000000003")
        .exists());
}

#[test]
fn fti_config_prints_frames_toml_and_warns_about_ignored_keys() {
    let dir = scratch();
    let file = dir.path().join("config.fti");
    std::fs::write(
        &file,
        "[Basic]\nHead = 1\nNode_size = 3\nCkpt_dir = /tmp/fti-l1\nCkpt_L2 = 2\nCkpt_io = 5\n\
         [Advanced]\nLocal_test = 1\n",
    )
    .unwrap();
    let (status, out, err) = run(
        Command::new(frame_bin()).arg("fti-config").arg(&file),
        DEADLINE,
    );
    assert!(status.success(), "{out}{err}");
    let cfg = frame::Config::from_toml_str(&out, "converted.toml").unwrap();
    assert_eq!(cfg.storage.local_dir, std::path::Path::new("/tmp/fti-l1"));
    assert_eq!(cfg.topology.ranks_per_node, 3);
    assert_eq!(cfg.l2.interval.to_string(), "every 2m");
    assert!(out.contains("(head): yes"), "{out}");
    assert!(err.contains("ckpt_io = 5 is not implemented"), "{err}");
    let (status, _, err) = run(
        Command::new(frame_bin())
            .arg("fti-config")
            .arg(dir.path().join("missing.fti")),
        DEADLINE,
    );
    assert_eq!(status.code(), Some(2));
    assert!(err.contains("missing.fti"), "{err}");
}

/// `frame sim ARGS`, which must succeed: its JSON lines, and its output.
fn sim_json(args: &[&str]) -> (Vec<serde_json::Value>, String) {
    let (status, out, err) = run(Command::new(frame_bin()).arg("sim").args(args), DEADLINE);
    assert!(status.success(), "{err}");
    let rows = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    (rows, out)
}

#[test]
fn sim_reproduces_table_3_as_json_lines() {
    let (rows, out) = sim_json(&["--reproduce", "table3", "--json", "--runs", "400"]);
    assert_eq!(rows.len(), frame_cli::sim::table3::MTBF.len(), "{out}");
    for ((row, mtbf), paper) in rows
        .iter()
        .zip(frame_cli::sim::table3::MTBF)
        .zip(frame_cli::sim::table3::PAPER)
    {
        let f = |k: &str| row[k].as_f64().unwrap_or_else(|| panic!("{k} in {row}"));
        assert_eq!((f("mtbf1"), f("mtbf2")), mtbf);
        let (c, k2, k5) = (f("coordinated_s"), f("async_k2_s"), f("async_k5_s"));
        // 400 runs: a wider band than the library's 2000-run test.
        assert!((c - paper.0).abs() / paper.0 < 0.1, "{c} vs {}", paper.0);
        assert!(k5 < k2 && k2 < c, "{row}");
        let readings = row["readings"].as_array().expect("the readings");
        let names: Vec<&str> = readings
            .iter()
            .filter_map(|r| r["reading"].as_str())
            .collect();
        assert_eq!(
            names,
            ["literal", "table2", "one-window", "one-window-checkpoint"],
            "{row}"
        );
    }
}

#[test]
fn sim_reproduces_the_data_flow_rollback_runs_as_json_lines() {
    let (rows, out) = sim_json(&["--reproduce", "dfr", "--json", "--seeds", "20"]);
    // Both stencils, every node count.
    let nodes = frame_cli::sim::localised::NODES;
    assert_eq!(rows.len(), 2 * nodes.len(), "{out}");
    for (row, n) in rows.iter().zip(nodes.iter().chain(nodes.iter())) {
        assert_eq!(row["nodes"].as_u64(), Some(*n as u64), "{row}");
        let r = |i: usize| {
            row["recomputed"][i]
                .as_f64()
                .unwrap_or_else(|| panic!("{row}"))
        };
        assert!(r(0) > r(1) && r(1) > r(2), "{row}");
    }
    let (status, _, err) = run(
        Command::new(frame_bin()).args(["sim", "--reproduce", "dfr", "--seeds", "0"]),
        DEADLINE,
    );
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(err.contains("--seeds 0"), "{err}");
}

/// Level 2 with two partner copies on three nodes: `inspect` names the
/// scheme and parameters each level-2 checkpoint was committed under, and
/// `ls` the job's.
#[test]
fn inspect_names_the_scheme_each_checkpoint_was_committed_under() {
    let _serial = common::serial();
    let dir = scratch();
    let base = dir.path().to_path_buf();
    let mut cfg = config(dir.path(), "schemes");
    cfg.l2.interval = frame::config::Interval::Calls(1);
    cfg.l2.copies = 2;
    ranks(6, 2, move |comm| {
        let mut cfg = cfg.clone();
        cfg.storage.local_dir = common::node_dir(&base, comm.node());
        let mut ckpt = Checkpointer::init(&cfg, &comm).unwrap();
        let v = ckpt.protect(1, vec![0.25f64; 1000]);
        for _ in 0..2 {
            v.write()[0] += 1.0;
            ckpt.snapshot().unwrap();
        }
        ckpt.wait_for_promotions().unwrap();
    });
    frame::internals::manager::inline::stop("schemes");
    let node = common::node_dir(dir.path(), 1);
    let (code, out) = frame(&["inspect"], &node);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("checkpoint 2: 6 of 6 rank record(s)")
            && out.contains("(committed, partner copies=2)"),
        "{out}"
    );
    let (code, out) = frame(&["ls"], dir.path());
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("redundancy as recorded: L2 partner copies=2"),
        "{out}"
    );
}
