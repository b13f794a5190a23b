//! Levels 2 and 4 end to end, in one process: rank threads on virtual nodes
//! (each with its own local directory), their inline managers promoting in
//! the background, then the loss of what each level protects against and a
//! bit-exact recovery from that level.

use crate::common;

use common::{node_dir, ranks, scratch};
use frame::comm::Comm;
use frame::config::Interval;
use frame::{Checkpointer, Config};
use std::path::Path;

/// The usual shape: 8 ranks on 4 nodes.
pub(super) const SIZE: usize = 8;
pub(super) const PER_NODE: usize = 2;

/// Ranks and ranks per node of a run.
#[derive(Clone, Copy)]
pub(super) struct Shape {
    pub(super) size: usize,
    pub(super) per_node: usize,
    /// Values in each rank's field.
    pub(super) len: usize,
}

pub(super) const USUAL: Shape = Shape {
    size: SIZE,
    per_node: PER_NODE,
    len: 40_000,
};

pub(super) fn level_config(base: &Path, job: &str, l2: u64, l4: u64) -> Config {
    let mut cfg = common::config(&base.join("unused"), job);
    cfg.storage.global_dir = base.join("global");
    cfg.l2.interval = Interval::Calls(l2);
    cfg.l4.interval = Interval::Calls(l4);
    cfg.l4.block_size = bytesize::ByteSize::kib(64);
    cfg.retention.keep_last = 2;
    cfg
}

/// The state of `rank` after `step` steps: a field that changes a little
/// every step (so level 4 has unchanged chunks to skip).
pub(super) fn field(rank: usize, step: u64, len: usize) -> Vec<f64> {
    (0..len)
        .map(|i| {
            if i % 97 == 0 {
                (i as f64 + step as f64 * 0.5 + rank as f64).sin()
            } else {
                (i * (rank + 1)) as f64
            }
        })
        .collect()
}

/// Runs `steps` steps with a snapshot after each, waits for the managers,
/// and "crashes" (no finalize). Returns the id of the last checkpoint.
pub(super) fn run_and_crash(base: &Path, cfg: &Config, steps: u64) -> u64 {
    run_and_crash_as(base, cfg, steps, USUAL)
}

pub(super) fn run_and_crash_as(base: &Path, cfg: &Config, steps: u64, shape: Shape) -> u64 {
    let base = base.to_path_buf();
    let cfg = cfg.clone();
    let ids = ranks(shape.size, shape.per_node, move |comm| {
        let mut cfg = cfg.clone();
        cfg.storage.local_dir = node_dir(&base, comm.node());
        let mut ckpt = Checkpointer::init(&cfg, &comm).unwrap();
        let step = ckpt.protect(0, 0u64);
        let data = ckpt.protect(1, Vec::<f64>::new());
        assert!(!ckpt.recovering());
        let mut last = 0;
        while step.get() < steps {
            step.set(step.get() + 1);
            *data.write() = field(comm.rank(), step.get(), shape.len);
            if let Some(id) = ckpt.snapshot().unwrap() {
                last = id;
            }
        }
        ckpt.wait_for_promotions().unwrap();
        last
    });
    ids[0]
}

/// Recovers and returns (checkpoint id, step) on every rank, checking the
/// field bit for bit.
fn recover(base: &Path, cfg: &Config) -> Vec<(u64, u64)> {
    recover_as(base, cfg, USUAL)
}

pub(super) fn recover_as(base: &Path, cfg: &Config, shape: Shape) -> Vec<(u64, u64)> {
    let base = base.to_path_buf();
    let cfg = cfg.clone();
    ranks(shape.size, shape.per_node, move |comm| {
        let mut cfg = cfg.clone();
        cfg.storage.local_dir = node_dir(&base, comm.node());
        let mut ckpt = Checkpointer::init(&cfg, &comm).unwrap();
        let step = ckpt.protect(0, 0u64);
        let data = ckpt.protect(1, Vec::<f64>::new());
        assert!(
            ckpt.recovering(),
            "rank {} found nothing to recover",
            comm.rank()
        );
        let id = ckpt.recover().unwrap();
        assert_eq!(
            *data.read(),
            field(comm.rank(), step.get(), shape.len),
            "rank {}",
            comm.rank()
        );
        // Carry on: the next checkpoints work at every level.
        step.set(step.get() + 1);
        *data.write() = field(comm.rank(), step.get(), shape.len);
        ckpt.checkpoint().unwrap();
        ckpt.wait_for_promotions().unwrap();
        ckpt.finalize().unwrap();
        (id, step.get() - 1)
    })
}

pub(super) fn stop_managers(job: &str) {
    frame::internals::manager::inline::stop(job);
}

#[test]
fn level_2_restores_a_lost_node_from_its_partner() {
    let _serial = common::serial();
    let dir = scratch();
    let cfg = level_config(dir.path(), "l2node", 1, 0);
    let last = run_and_crash(dir.path(), &cfg, 6);
    assert_eq!(last, 6);
    stop_managers("l2node");
    // Node 1 is lost with everything it had.
    std::fs::remove_dir_all(node_dir(dir.path(), 1)).unwrap();
    let got = recover(dir.path(), &cfg);
    assert!(
        got.iter().all(|&(id, step)| id == 6 && step == 6),
        "{got:?}"
    );
    stop_managers("l2node");
}

#[test]
fn level_2_rebuilds_copies_so_a_second_node_loss_is_survivable() {
    let _serial = common::serial();
    let dir = scratch();
    let cfg = level_config(dir.path(), "l2twice", 1, 0);
    run_and_crash(dir.path(), &cfg, 4);
    stop_managers("l2twice");
    std::fs::remove_dir_all(node_dir(dir.path(), 2)).unwrap();
    // Recover (copies of checkpoint 4 rebuilt), write 5, crash again.
    let base = dir.path().to_path_buf();
    let c = cfg.clone();
    ranks(SIZE, PER_NODE, move |comm| {
        let mut cfg = c.clone();
        cfg.storage.local_dir = node_dir(&base, comm.node());
        let mut ckpt = Checkpointer::init(&cfg, &comm).unwrap();
        let step = ckpt.protect(0, 0u64);
        let data = ckpt.protect(1, Vec::<f64>::new());
        assert_eq!(ckpt.recover().unwrap(), 4);
        step.set(5);
        *data.write() = field(comm.rank(), 5, USUAL.len);
        ckpt.checkpoint().unwrap();
        ckpt.wait_for_promotions().unwrap();
    });
    stop_managers("l2twice");
    // Now node 3 goes: its partner (node 0) must have its copies of 5.
    std::fs::remove_dir_all(node_dir(dir.path(), 3)).unwrap();
    let got = recover(dir.path(), &cfg);
    assert!(
        got.iter().all(|&(id, step)| id == 5 && step == 5),
        "{got:?}"
    );
    stop_managers("l2twice");
}

/// With two partner copies per node, two neighbouring nodes lost
/// together (node 1 and its first partner): node 1's second partner keeps
/// its copies. Through the failure-aware planner and the iterative
/// baseline alike.
#[test]
fn level_2_with_two_copies_survives_two_neighbouring_nodes() {
    use frame::config::Strategy;
    let _serial = common::serial();
    for strategy in [Strategy::FailureAware, Strategy::Iterative] {
        let dir = scratch();
        let job = format!("l2two-{}", strategy.name());
        let mut cfg = level_config(dir.path(), &job, 1, 0);
        cfg.l2.copies = 2;
        cfg.recovery.strategy = strategy;
        assert_eq!(run_and_crash(dir.path(), &cfg, 5), 5);
        stop_managers(&job);
        for node in [1, 2] {
            std::fs::remove_dir_all(node_dir(dir.path(), node)).unwrap();
        }
        let got = recover(dir.path(), &cfg);
        assert!(
            got.iter().all(|&(id, step)| id == 5 && step == 5),
            "{strategy:?}: {got:?}"
        );
        stop_managers(&job);
    }
}

#[test]
fn level_4_restores_after_every_local_directory_is_lost() {
    let _serial = common::serial();
    let dir = scratch();
    let cfg = level_config(dir.path(), "l4all", 0, 3);
    run_and_crash(dir.path(), &cfg, 7);
    stop_managers("l4all");
    for node in 0..(SIZE / PER_NODE) as u32 {
        std::fs::remove_dir_all(node_dir(dir.path(), node)).unwrap();
    }
    // Level 4 holds checkpoints 3 and 6; 6 is the newest.
    let got = recover(dir.path(), &cfg);
    assert!(
        got.iter().all(|&(id, step)| id == 6 && step == 6),
        "{got:?}"
    );
    stop_managers("l4all");
    // Finalize removed the job's level-4 files.
    let left = common::files_under(&dir.path().join("global"));
    assert!(left.is_empty(), "{left:?}");
}

/// Level 3 on 9 ranks over 5 nodes (the last with one rank): groups of
/// 3 and 2 nodes with one parity shard each, by Reed-Solomon and by XOR.
/// Losing any one node, then any one node of each group at once, is
/// recovered bit for bit, through the failure-aware planner and the
/// iterative baseline.
#[test]
fn level_3_survives_any_lost_node_of_each_group() {
    use frame::config::{L3Scheme, Strategy};
    let _serial = common::serial();
    let shape = Shape {
        size: 9,
        per_node: 2,
        ..USUAL
    };
    let mut lose: Vec<Vec<u32>> = (0..5).map(|n| vec![n]).collect();
    for a in 0..3 {
        for b in 3..5 {
            lose.push(vec![a, b]);
        }
    }
    for scheme in [L3Scheme::ReedSolomon, L3Scheme::Xor] {
        for (i, lost) in lose.iter().enumerate() {
            let strategy = if i % 2 == 0 {
                Strategy::FailureAware
            } else {
                Strategy::Iterative
            };
            let dir = scratch();
            let mut cfg = level_config(dir.path(), "l3any", 0, 0);
            cfg.l3.interval = Interval::Calls(2);
            cfg.l3.scheme = scheme;
            cfg.l3.group_size = 4;
            cfg.l3.parity = 1;
            cfg.recovery.strategy = strategy;
            run_and_crash_as(dir.path(), &cfg, 5, shape);
            stop_managers("l3any");
            // The commit and the group name the scheme that wrote them.
            let name = if scheme == L3Scheme::Xor {
                "xor"
            } else {
                "reed-solomon"
            };
            let ckpt = node_dir(dir.path(), 0).join(format!("l3any/l3/ckpt-{:020}", 4));
            let marker = std::fs::read_to_string(ckpt.join("COMMITTED")).unwrap();
            let manifest = std::fs::read_to_string(ckpt.join("group.json")).unwrap();
            assert!(
                marker.contains(&format!(r#""scheme":"{name}""#)),
                "{marker}"
            );
            assert!(
                manifest.contains(&format!(r#""code":"{name}""#)),
                "{manifest}"
            );
            for n in lost {
                std::fs::remove_dir_all(node_dir(dir.path(), *n)).unwrap();
            }
            let got = recover_as(dir.path(), &cfg, shape);
            assert!(
                got.iter().all(|&(id, step)| id == 4 && step == 4),
                "{scheme:?}, {strategy:?}, lost {lost:?}: {got:?}"
            );
            stop_managers("l3any");
        }
    }
}

/// XOR parity keeps one lost node per group: two of one group lost (and
/// no other level) is refused with an error that says a checkpoint was
/// committed, never a fresh start.
#[test]
fn level_3_by_xor_refuses_two_lost_nodes_of_one_group() {
    let _serial = common::serial();
    let dir = scratch();
    let mut cfg = level_config(dir.path(), "l3xor2", 0, 0);
    cfg.l3.interval = Interval::Calls(1);
    cfg.l3.scheme = frame::config::L3Scheme::Xor;
    cfg.l3.group_size = 4;
    run_and_crash(dir.path(), &cfg, 3);
    stop_managers("l3xor2");
    for n in [1, 2] {
        std::fs::remove_dir_all(node_dir(dir.path(), n)).unwrap();
    }
    let base = dir.path().to_path_buf();
    let errors = ranks(SIZE, PER_NODE, move |comm| {
        let mut cfg = cfg.clone();
        cfg.storage.local_dir = node_dir(&base, comm.node());
        match Checkpointer::init(&cfg, &comm) {
            Ok(mut ckpt) => {
                let _ = ckpt.protect(0, 0u64);
                ckpt.recover().err().map(|e| e.to_string())
            }
            Err(e) => Some(e.to_string()),
        }
    });
    stop_managers("l3xor2");
    for e in &errors {
        let e = e.as_deref().unwrap_or("recovered");
        assert!(
            e.contains("checkpoint 3 is recorded as committed") && e.contains("L3"),
            "{e}"
        );
    }
}

/// Files larger than the windows level 3 moves at a time: parity summed
/// over several windows per shard, and a rebuild paced by the decoder's
/// credits over more windows than it lets members send ahead.
#[test]
fn level_3_rebuilds_files_of_many_windows_bit_for_bit() {
    let _serial = common::serial();
    // 13 MiB per rank, two ranks per node: 26 MiB blobs in pieces of
    // 8.7 MiB (two 8 MiB encoding windows, three 4 MiB decoding windows).
    let shape = Shape {
        size: 8,
        per_node: 2,
        len: 13 << 17,
    };
    let dir = scratch();
    let mut cfg = level_config(dir.path(), "l3big", 0, 0);
    cfg.l3.interval = Interval::Calls(2);
    cfg.l3.group_size = 4;
    cfg.l3.parity = 1;
    run_and_crash_as(dir.path(), &cfg, 2, shape);
    stop_managers("l3big");
    std::fs::remove_dir_all(node_dir(dir.path(), 1)).unwrap();
    let got = recover_as(dir.path(), &cfg, shape);
    assert!(
        got.iter().all(|&(id, step)| id == 2 && step == 2),
        "{got:?}"
    );
    stop_managers("l3big");
}

/// Two parity shards per group: any two of five nodes may go.
#[test]
fn level_3_with_two_parity_shards_survives_any_two_nodes() {
    let _serial = common::serial();
    let shape = Shape {
        size: 10,
        per_node: 2,
        ..USUAL
    };
    for a in 0..5u32 {
        for b in (a + 1)..5 {
            let dir = scratch();
            let mut cfg = level_config(dir.path(), "l3two", 0, 0);
            cfg.l3.interval = Interval::Calls(1);
            cfg.l3.group_size = 5;
            cfg.l3.parity = 2;
            run_and_crash_as(dir.path(), &cfg, 3, shape);
            stop_managers("l3two");
            std::fs::remove_dir_all(node_dir(dir.path(), a)).unwrap();
            std::fs::remove_dir_all(node_dir(dir.path(), b)).unwrap();
            let got = recover_as(dir.path(), &cfg, shape);
            assert!(
                got.iter().all(|&(id, step)| id == 3 && step == 3),
                "lost {a},{b}: {got:?}"
            );
            stop_managers("l3two");
        }
    }
}

/// Damage to one file of one higher level never yields wrong data: with
/// node 1 lost, recovery falls back from the damaged level to the next
/// and restores the newest checkpoint bit for bit, and `frame verify`
/// reports the damage. Each file kind of levels 2 to 4 (partner data copy
/// and record, parity shard, group manifest, a node's own level-3 file,
/// level-4 manifest and chunk) is damaged at evenly spaced bytes.
#[test]
fn a_damaged_level_file_is_caught_and_the_next_level_restores() {
    damaged_level_files(frame::config::L3Scheme::ReedSolomon, 2..=4);
}

/// The same for level 3's files when it keeps XOR parity.
#[test]
fn a_damaged_xor_parity_file_is_caught_and_the_next_level_restores() {
    damaged_level_files(frame::config::L3Scheme::Xor, 3..=3);
}

/// The sweep of damaged files of the levels in `levels`, level 3 by
/// `scheme`.
fn damaged_level_files(scheme: frame::config::L3Scheme, levels: std::ops::RangeInclusive<u8>) {
    let _serial = common::serial();
    let template = scratch();
    let mut cfg = level_config(template.path(), "damage", 1, 1);
    cfg.l3.interval = Interval::Calls(1);
    cfg.l3.scheme = scheme;
    run_and_crash(template.path(), &cfg, 4);
    stop_managers("damage");
    let job = |base: &Path, node: u32, level: &str| {
        node_dir(base, node)
            .join("damage")
            .join(level)
            .join("ckpt-00000000000000000004")
    };
    let t = template.path();
    // Node 1's ranks (2 and 3) are kept at level 2 by node 2. Each kind
    // comes with the level it belongs to: the lower levels are removed too,
    // so that recovery has to read the damaged one.
    let kinds: Vec<(&str, std::path::PathBuf, u8)> = vec![
        ("partner copy", job(t, 2, "l2").join("rank-000002.fck"), 2),
        (
            "partner record",
            job(t, 2, "l2").join("rank-000003.meta.json"),
            2,
        ),
        (
            "parity shard",
            {
                let d = job(t, 0, "l3");
                std::fs::read_dir(&d)
                    .unwrap()
                    .flatten()
                    .map(|e| e.path())
                    .find(|p| p.to_string_lossy().ends_with(".bin"))
                    .unwrap()
            },
            3,
        ),
        ("group manifest", job(t, 0, "l3").join("group.json"), 3),
        (
            "own level-3 file",
            job(t, 3, "l3").join("rank-000006.fck"),
            3,
        ),
        (
            "level-4 manifest",
            t.join("global/damage/l4/ckpt-00000000000000000004/rank-000002.l4.json"),
            4,
        ),
        (
            "level-4 chunk",
            {
                let d = t.join("global/damage/l4/chunks/rank-000003");
                std::fs::read_dir(&d)
                    .unwrap()
                    .flatten()
                    .map(|e| e.path())
                    .next()
                    .unwrap()
            },
            4,
        ),
    ];
    for (kind, file, level) in kinds.into_iter().filter(|k| levels.contains(&k.2)) {
        let len = std::fs::metadata(&file).unwrap().len();
        for i in 0..6u64 {
            let at = len * i / 6 + i;
            let dir = scratch();
            common::copy_tree(t, dir.path());
            let target = dir.path().join(file.strip_prefix(t).unwrap());
            let mut bytes = std::fs::read(&target).unwrap();
            let at = (at as usize).min(bytes.len() - 1);
            bytes[at] ^= 0x5a;
            std::fs::write(&target, &bytes).unwrap();
            let (st, out, _) = common::run(
                std::process::Command::new(common::frame_bin())
                    .arg("verify")
                    .arg(dir.path()),
                std::time::Duration::from_secs(60),
            );
            // Damage, or (a changed stamp) copies of one checkpoint from
            // different runs.
            let caught =
                (!st.success() && out.contains("CORRUPT")) || out.contains("different runs");
            assert!(caught, "{kind} at {at}: verify found nothing:\n{out}");
            std::fs::remove_dir_all(node_dir(dir.path(), 1)).unwrap();
            for below in 2..level {
                for n in [0u32, 2, 3] {
                    let d = node_dir(dir.path(), n)
                        .join("damage")
                        .join(format!("l{below}"));
                    let _ = std::fs::remove_dir_all(d);
                }
            }
            eprintln!("damage: {kind} at byte {at} of {}", target.display());
            let mut c = cfg.clone();
            c.storage.global_dir = dir.path().join("global");
            // The newest checkpoint, or (the iterative baseline stops at the
            // lowest level where every rank has one) the one before it, bit
            // for bit (`recover` compares every rank's state with its step).
            let got = recover(dir.path(), &c);
            assert!(
                got.iter()
                    .all(|&(id, step)| (id == 4 || id == 3) && step == id && id == got[0].0),
                "{kind} at {at}: {got:?}"
            );
            stop_managers("damage");
        }
    }
}

/// `checkpoint_at(L4)` promotes to level 4 even when its interval is off;
/// without any level configured it is refused with the reason.
#[test]
fn an_explicit_level_is_promoted_whatever_the_intervals() {
    let _serial = common::serial();
    let dir = scratch();
    let cfg = level_config(dir.path(), "explicit", 1, 0);
    let base = dir.path().to_path_buf();
    let c = cfg.clone();
    ranks(4, 2, move |comm| {
        let mut cfg = c.clone();
        cfg.storage.local_dir = node_dir(&base, comm.node());
        let mut ckpt = Checkpointer::init(&cfg, &comm).unwrap();
        let _data = ckpt.protect(0, field(comm.rank(), 1, USUAL.len));
        ckpt.checkpoint().unwrap();
        let id = ckpt.checkpoint_at(frame::Level::L4).unwrap();
        ckpt.wait_for_promotions().unwrap();
        assert_eq!(id, 2);
        ckpt.finalize().unwrap();
    });
    stop_managers("explicit");
    // The run's own files are gone; a run without levels refuses L4.
    let plain = common::config(&dir.path().join("plain"), "plainl4");
    let out = ranks(1, 1, move |comm| {
        let mut ckpt = Checkpointer::init(&plain, &comm).unwrap();
        let err = ckpt.checkpoint_at(frame::Level::L4).unwrap_err();
        err.to_string()
    });
    assert!(
        out[0].contains("no level above 1 is configured"),
        "{}",
        out[0]
    );
}

/// Level 4 writes only the blocks that changed, and keeps its newest two
/// checkpoints.
#[test]
fn level_4_writes_only_changed_chunks_and_keeps_the_newest() {
    let _serial = common::serial();
    let dir = scratch();
    let cfg = level_config(dir.path(), "l4diff", 0, 1);
    let base = dir.path().to_path_buf();
    let c = cfg.clone();
    ranks(1, 1, move |comm| {
        let mut cfg = c.clone();
        cfg.storage.local_dir = node_dir(&base, comm.node());
        cfg.retention.keep_on_finalize = true;
        let mut ckpt = Checkpointer::init(&cfg, &comm).unwrap();
        // 1 MiB of data in 64 KiB chunks; one value changes per checkpoint.
        let data = ckpt.protect(0, (0..1 << 17).map(|i| i as f64).collect::<Vec<f64>>());
        for step in 0..4 {
            data.write()[step * 10_000] = step as f64;
            ckpt.checkpoint().unwrap();
            ckpt.wait_for_promotions().unwrap();
        }
        ckpt.finalize().unwrap();
    });
    stop_managers("l4diff");
    let l4 = dir.path().join("global/l4diff/l4");
    let ckpts: Vec<String> = std::fs::read_dir(&l4)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("ckpt-"))
        .collect();
    assert_eq!(ckpts.len(), 2, "{ckpts:?}");
    // Two kept checkpoints of ~17 blocks each share all but a few: what
    // level 4 holds for the rank is one checkpoint and the blocks the
    // three later writes changed (the one with the changed value and the
    // first, with the header, each: at most 8), in one pack per write that
    // still holds a block a kept checkpoint names (full writes: 2 MiB).
    let files: Vec<u64> = std::fs::read_dir(l4.join("chunks/rank-000000"))
        .unwrap()
        .flatten()
        .map(|e| e.metadata().unwrap().len())
        .collect();
    let held: u64 = files.iter().sum();
    let one = 1u64 << 20;
    assert!(
        (one..one + 8 * (64 << 10)).contains(&held),
        "{held} bytes in {} files",
        files.len()
    );
    assert!(files.len() <= 4, "{} packs kept", files.len());
}

/// With `l4.archive`, every level-4 checkpoint stays: the ones newer ones
/// superseded in `l4/archive/`, each with its marker and the chunks its
/// manifest names, also after the job ended and removed its own files.
#[test]
fn level_4_archives_every_checkpoint_it_supersedes() {
    let _serial = common::serial();
    let dir = scratch();
    let mut cfg = level_config(dir.path(), "l4archive", 0, 1);
    cfg.l4.archive = true;
    cfg.l4.keep_last = 1;
    let base = dir.path().to_path_buf();
    let c = cfg.clone();
    ranks(1, 1, move |comm| {
        let mut cfg = c.clone();
        cfg.storage.local_dir = node_dir(&base, comm.node());
        let mut ckpt = Checkpointer::init(&cfg, &comm).unwrap();
        let data = ckpt.protect(0, (0..1 << 15).map(|i| i as f64).collect::<Vec<f64>>());
        for step in 0..4 {
            data.write()[step * 5_000] = -1.0;
            ckpt.checkpoint().unwrap();
            ckpt.wait_for_promotions().unwrap();
        }
        ckpt.finalize().unwrap();
    });
    stop_managers("l4archive");
    let l4 = dir.path().join("global/l4archive/l4");
    let archived: Vec<String> = std::fs::read_dir(l4.join("archive"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    // Checkpoints 1 to 3 were superseded; the job removed the 4th, its own.
    assert_eq!(archived.len(), 3, "{archived:?}");
    for ckpt in &archived {
        let d = l4.join("archive").join(ckpt);
        assert!(d.join("COMMITTED").exists(), "{ckpt}: no marker");
        let manifest = std::fs::read_to_string(d.join("rank-000000.l4.json")).unwrap();
        let m: serde_json::Value = serde_json::from_str(&manifest).unwrap();
        for c in m["chunks"].as_array().unwrap() {
            let name = c["pack"]["name"].as_str().or(c["hash"].as_str()).unwrap();
            assert!(
                l4.join("chunks/rank-000000").join(name).exists(),
                "{ckpt}: {name} is gone"
            );
        }
    }
}

/// With level 2 due at every third checkpoint, level 1 writes into the
/// files level 2 let go of (a node's own copies are links of level-1
/// files) instead of a new file whenever it retires one level 2 still
/// names, and never into a file level 2 still names: after every level-1
/// directory is lost, level 2 restores the newest checkpoint bit for bit.
#[test]
fn level_1_reuses_the_files_level_2_let_go_and_never_one_it_names() {
    let _serial = common::serial();
    let dir = scratch();
    let job = "l2lend";
    let cfg = level_config(dir.path(), job, 3, 0);
    let base = dir.path().to_path_buf();
    let c = cfg.clone();
    let steps = 24u64;
    let used = ranks(SIZE, PER_NODE, move |comm| {
        let mut cfg = c.clone();
        cfg.storage.local_dir = node_dir(&base, comm.node());
        let mut ckpt = Checkpointer::init(&cfg, &comm).unwrap();
        let step = ckpt.protect(0, 0u64);
        let data = ckpt.protect(1, Vec::<f64>::new());
        // Every data file this rank wrote, held open so that no inode
        // number is used twice.
        let mut files = Vec::new();
        while step.get() < steps {
            step.set(step.get() + 1);
            *data.write() = field(comm.rank(), step.get(), USUAL.len);
            let id = ckpt.checkpoint().unwrap();
            ckpt.wait_for_promotions().unwrap();
            let path = cfg
                .storage
                .local_dir
                .join(job)
                .join("l1")
                .join(format!("ckpt-{id:020}"))
                .join(format!("rank-{:06}.fck", comm.rank()));
            files.push(std::fs::File::open(&path).unwrap());
        }
        use std::os::unix::fs::MetadataExt;
        let mut inodes: Vec<u64> = files.iter().map(|f| f.metadata().unwrap().ino()).collect();
        inodes.sort_unstable();
        inodes.dedup();
        inodes.len()
    });
    // keep_last = 2 checkpoints, the one being written, and the one
    // level 2 keeps (l2.keep_last = 1): new files every third checkpoint
    // would make 10.
    assert!(
        used.iter().all(|&n| n <= 4),
        "files used per rank: {used:?}"
    );
    stop_managers(job);
    for node in 0..(SIZE / PER_NODE) as u32 {
        std::fs::remove_dir_all(node_dir(dir.path(), node).join(job).join("l1")).unwrap();
    }
    let got = recover(dir.path(), &cfg);
    assert!(
        got.iter().all(|&(id, step)| id == steps && step == steps),
        "{got:?}"
    );
    stop_managers(job);
}
