//! The `LATEST` pointer is a hint and records are checked against their
//! place: the four ways the L1 commit protocol once lost, mixed or refused
//! sound checkpoints, each reproduced.

use crate::common;

use common::{config, frame_bin, ranks, run, scratch};
use frame::comm::Comm;
use frame::{Checkpointer, Config};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Rank `rank`'s values at `step`.
fn values(rank: usize, step: u64) -> Vec<u32> {
    (0..30_000u32)
        .map(|i| i.wrapping_mul(2_654_435_761) ^ (rank as u32) << 24 ^ step as u32)
        .collect()
}

/// A configuration with one directory per node, as under the runtime.
fn cfg(base: &Path, node: u32) -> Config {
    let mut c = config(&base.join(format!("node-{node}")), "hint");
    c.retention.keep_last = 3;
    c
}

/// Two ranks on two nodes write checkpoints 1..=n (checkpoint k = step k).
fn write(base: &Path, n: u64) {
    let base = base.to_path_buf();
    ranks(2, 1, move |comm| {
        let mut ckpt = Checkpointer::init(&cfg(&base, comm.node()), &comm).unwrap();
        let step = ckpt.protect(0, 0u64);
        let v = ckpt.protect(1, Vec::new());
        for k in 1..=n {
            step.set(k);
            *v.write() = values(comm.rank(), k);
            ckpt.snapshot().unwrap();
        }
    });
}

/// Each rank's restored (checkpoint, step), after checking its values, or
/// `None` for a fresh start.
fn recover(base: &Path) -> Vec<Option<(u64, u64)>> {
    let base = base.to_path_buf();
    ranks(2, 1, move |comm| {
        let mut ckpt = Checkpointer::init(&cfg(&base, comm.node()), &comm).unwrap();
        let step = ckpt.protect(0, 0u64);
        let v = ckpt.protect(1, Vec::<u32>::new());
        if !ckpt.recovering() {
            return None;
        }
        let id = ckpt.recover().unwrap();
        assert!(
            *v.read() == values(comm.rank(), step.get()),
            "values of step {}",
            step.get()
        );
        Some((id, step.get()))
    })
}

fn l1(base: &Path, node: u32) -> PathBuf {
    base.join(format!("node-{node}/hint/l1"))
}

fn latest(base: &Path, node: u32) -> PathBuf {
    l1(base, node).join("LATEST")
}

fn verify(dir: &Path) -> (i32, String) {
    let (status, out, err) = run(
        Command::new(frame_bin()).arg("verify").arg(dir),
        Duration::from_secs(60),
    );
    (status.code().unwrap_or(-1), out + &err)
}

#[test]
fn a_missing_or_wrong_pointer_neither_loses_nor_hides_a_checkpoint() {
    for (what, edit) in [
        ("removed", None),
        ("naming checkpoint 0", Some(0u64)),
        ("naming checkpoint 2", Some(2)),
        ("naming checkpoint 13 (a flipped digit)", Some(13)),
    ] {
        let dir = scratch();
        write(dir.path(), 3);
        for node in 0..2 {
            match edit {
                None => std::fs::remove_file(latest(dir.path(), node)).unwrap(),
                Some(id) => std::fs::write(
                    latest(dir.path(), node),
                    format!(r#"{{"job_id":"hint","checkpoint_id":{id}}}"#),
                )
                .unwrap(),
            }
        }
        let (code, out) = verify(dir.path());
        assert!(
            !out.starts_with("ok"),
            "{what}: verify must not say plain ok:\n{out}"
        );
        assert!(
            out.contains("LATEST"),
            "{what}: verify names the pointer:\n{out}"
        );
        assert!(
            out.contains("newest restorable checkpoint 3"),
            "{what}:\n{out}"
        );
        if edit == Some(13) {
            assert_eq!(
                code, 1,
                "{what}: a pointer to a missing checkpoint is damage:\n{out}"
            );
        } else {
            assert_eq!(code, 0, "{what}: the data is sound:\n{out}");
        }
        assert_eq!(recover(dir.path()), vec![Some((3, 3)); 2], "{what}");
    }
}

#[test]
fn a_fresh_start_never_deletes_a_checkpoint() {
    // Rank 0 was killed while writing the first checkpoint, before any
    // pointer: rank 1 alone holds checkpoint 1. Nothing is restorable and
    // nothing committed, so the job starts over, and rank 1's files are
    // still there afterwards.
    let dir = scratch();
    write(dir.path(), 1);
    std::fs::remove_dir_all(l1(dir.path(), 0).join(format!("ckpt-{:020}", 1))).unwrap();
    for node in 0..2 {
        std::fs::remove_file(latest(dir.path(), node)).unwrap();
    }
    let kept = l1(dir.path(), 1).join(format!("ckpt-{:020}", 1));
    assert_eq!(recover(dir.path()), vec![None, None]);
    assert!(
        kept.join("rank-000001.fck").exists(),
        "a fresh start deleted a file"
    );
    assert!(kept.join("rank-000001.meta.json").exists());
}

#[test]
fn a_rank_that_lost_committed_checkpoints_is_refused_not_started_over() {
    // Rank 0's checkpoints 2..=4 are gone after they committed (its node's
    // pointer still says 4): starting over would throw the job's progress
    // away, so every rank refuses, naming rank 0, and deletes nothing.
    let dir = scratch();
    write(dir.path(), 4);
    for id in 2..=4u64 {
        let ckpt = l1(dir.path(), 0).join(format!("ckpt-{id:020}"));
        std::fs::remove_dir_all(ckpt).unwrap();
    }
    let base = dir.path().to_path_buf();
    let errors = ranks(2, 1, move |comm| {
        Checkpointer::init(&cfg(&base, comm.node()), &comm)
            .err()
            .map(|e| e.to_string())
    });
    for e in &errors {
        let e = e.as_deref().expect("recovery must refuse");
        assert!(e.contains("not recoverable") && e.contains("rank 0"), "{e}");
        assert!(e.contains("checkpoint 4 is recorded as committed"), "{e}");
    }
    assert_eq!(errors[0], errors[1]);
    let kept = l1(dir.path(), 1).join(format!("ckpt-{:020}", 4));
    assert!(kept.join("rank-000001.fck").exists(), "a file was deleted");
}

#[test]
fn an_older_checkpoint_in_a_newer_place_is_never_loaded_as_it() {
    for link in [false, true] {
        let dir = scratch();
        write(dir.path(), 3);
        let (old, new) = (
            l1(dir.path(), 1).join(format!("ckpt-{:020}", 2)),
            l1(dir.path(), 1).join(format!("ckpt-{:020}", 3)),
        );
        for name in ["rank-000001.fck", "rank-000001.meta.json"] {
            std::fs::remove_file(new.join(name)).unwrap();
            if link {
                std::os::unix::fs::symlink(old.join(name), new.join(name)).unwrap();
            } else {
                std::fs::copy(old.join(name), new.join(name)).unwrap();
            }
        }
        // Both ranks restore checkpoint 2, step 2: never rank 0 at step 3
        // and rank 1 at step 2.
        assert_eq!(recover(dir.path()), vec![Some((2, 2)); 2], "link: {link}");
    }
}

#[test]
fn nodes_that_disagree_about_the_pointer_still_recover() {
    // Rank 1 was killed after both ranks wrote checkpoint 1 but before its
    // node's pointer was written: only node 0 has LATEST.
    let dir = scratch();
    write(dir.path(), 1);
    std::fs::remove_file(latest(dir.path(), 1)).unwrap();
    assert_eq!(recover(dir.path()), vec![Some((1, 1)); 2]);
    // And with the two pointers naming different checkpoints.
    let dir = scratch();
    write(dir.path(), 2);
    std::fs::write(
        latest(dir.path(), 1),
        r#"{"job_id":"hint","checkpoint_id":1}"#,
    )
    .unwrap();
    let (code, out) = verify(dir.path());
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("disagree"), "{out}");
    assert_eq!(recover(dir.path()), vec![Some((2, 2)); 2]);
}

#[test]
fn a_kill_in_the_middle_of_finalize_leaves_a_recoverable_job() {
    // Finalize had removed every node's pointer (its first step), then
    // rank 1's older checkpoint and its newest record, but not yet the
    // newest data file, when the job was killed.
    let dir = scratch();
    write(dir.path(), 2);
    for node in 0..2 {
        std::fs::remove_file(latest(dir.path(), node)).unwrap();
    }
    std::fs::remove_dir_all(l1(dir.path(), 1).join(format!("ckpt-{:020}", 1))).unwrap();
    let newest = l1(dir.path(), 1).join(format!("ckpt-{:020}", 2));
    std::fs::remove_file(newest.join("rank-000001.meta.json")).unwrap();
    let got = recover(dir.path());
    assert_eq!(got[0], got[1]);
    assert!(
        got[0].is_none(),
        "no checkpoint is complete: the job starts over: {got:?}"
    );
}
