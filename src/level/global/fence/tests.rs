use super::*;
use crate::level::fsio::write_small;

fn fence(launch: u64, epoch: u64) -> Fence {
    Fence { launch, epoch }
}

/// A level-4 directory with checkpoint 4 committed and checkpoint 6 not
/// (a manifest of rank 0 only).
fn level_dir() -> (tempfile::TempDir, Dir) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = Dir::open(tmp.path()).unwrap();
    let committed = dir.sub(&names::ckpt_dir(4), true).unwrap();
    write_small(&committed, "rank-000000.l4.json", b"{}", "t").unwrap();
    write_small(&committed, COMMITTED, b"{}", "t").unwrap();
    let open = dir.sub(&names::ckpt_dir(6), true).unwrap();
    write_small(&open, "rank-000000.l4.json", b"{}", "t").unwrap();
    (tmp, dir)
}

fn names_in(dir: &Dir) -> Vec<String> {
    let mut n: Vec<String> = dir.entries().unwrap().into_iter().map(|(n, _)| n).collect();
    n.sort();
    n
}

#[test]
fn a_check_refuses_only_older_writes_and_never_moves_the_fence() {
    let (_tmp, dir) = level_dir();
    // No fence yet: nothing is refused.
    check(&dir, fence(5, 1)).unwrap();
    assert_eq!(current(&dir), None);
    advance(&dir, fence(5, 2)).unwrap();
    for older in [fence(5, 1), fence(4, 9)] {
        let Err(StorageError::Fenced {
            epoch,
            current: now,
            later_run,
            ..
        }) = check(&dir, older)
        else {
            panic!("{older:?} was not refused");
        };
        assert_eq!((epoch, now), (older.epoch, 2));
        assert_eq!(later_run, older.launch < 5);
    }
    check(&dir, fence(5, 2)).unwrap();
    check(&dir, fence(5, 3)).unwrap();
    assert_eq!(current(&dir), Some(fence(5, 2)), "a check moved the fence");
}

#[test]
fn advancing_sets_aside_only_uncommitted_checkpoints() {
    let (_tmp, dir) = level_dir();
    advance(&dir, fence(5, 1)).unwrap();
    assert_eq!(current(&dir), Some(fence(5, 1)));
    assert_eq!(
        names_in(&dir),
        vec![names::FENCE.to_string(), names::ckpt_dir(4)],
        "checkpoint 6 (uncommitted) is still there, or 4 (committed) is gone"
    );
    // The same epoch again (a second initialisation) sets nothing aside:
    // its own writes may be under way.
    dir.sub(&names::ckpt_dir(8), true).unwrap();
    advance(&dir, fence(5, 1)).unwrap();
    assert!(dir.kind(&names::ckpt_dir(8)).is_some());
    // An older one is refused and changes nothing.
    assert!(matches!(
        advance(&dir, fence(5, 0)),
        Err(StorageError::Fenced { .. })
    ));
    assert_eq!(current(&dir), Some(fence(5, 1)));
    assert!(dir.kind(&names::ckpt_dir(8)).is_some());
}

/// Writers that passed their check, then froze while the job recovered,
/// complete their writes once thawed: in the directory set aside (or not
/// at all, if it was removed already), never in the one the new epoch
/// writes, and the next sweep removes what they left.
#[test]
fn writes_that_passed_their_check_before_the_fence_moved_land_aside() {
    let (_tmp, dir) = level_dir();
    advance(&dir, fence(5, 1)).unwrap();
    let ckpt = dir.sub(&names::ckpt_dir(10), true).unwrap();
    check(&dir, fence(5, 1)).unwrap();
    // One froze half-way through its file, one right after its check.
    let mut halfway = ckpt.begin_atomic("rank-000002.l4.json", "late").unwrap();
    halfway.write(b"old").unwrap();
    // The job moves to epoch 2 and writes checkpoint 10 anew.
    advance(&dir, fence(5, 2)).unwrap();
    let live = dir.sub(&names::ckpt_dir(10), true).unwrap();
    for rank in [2, 3] {
        let name = format!("rank-00000{rank}.l4.json");
        write_small(&live, &name, b"new", "live").unwrap();
    }
    // Thawed: the late writes complete, or fail; neither reaches the
    // new epoch's directory.
    let _ = halfway.commit();
    let _ = write_small(&ckpt, "rank-000003.l4.json", b"old", "late");
    for rank in [2, 3] {
        let name = format!("rank-00000{rank}.l4.json");
        assert_eq!(
            live.read_capped(&name, 16).unwrap(),
            b"new",
            "a late write replaced rank {rank}'s"
        );
    }
    assert!(names_in(&live).iter().all(|n| !n.contains("late")));
    // A writer opening the directory after the move is refused instead.
    assert!(check(&dir, fence(5, 1)).is_err());
    sweep(&dir).unwrap();
    assert!(
        names_in(&dir).iter().all(|n| !is_set_aside(n)),
        "{:?}",
        names_in(&dir)
    );
}

#[test]
fn only_set_aside_checkpoint_directories_are_recognised() {
    assert!(is_set_aside(&format!(
        ".{}{SET_ASIDE}5-2",
        names::ckpt_dir(30)
    )));
    for other in [
        names::ckpt_dir(30),
        format!("{}{SET_ASIDE}5-2", names::ckpt_dir(30)),
        format!(".chunks{SET_ASIDE}5-2"),
        ".FENCE.tmp-fence-00".to_string(),
    ] {
        assert!(!is_set_aside(&other), "{other}");
    }
}

/// Level-4 retention removes old checkpoint directories while a new
/// epoch's rank 0 moves the fence: a directory gone between the listing
/// and its set-aside rename is nothing to set aside, never an error that
/// fails the epoch's start on every rank.
#[test]
fn a_directory_removed_while_the_fence_moves_is_not_an_error() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    // On a RAM disk where there is one: each move writes the fence.
    let shm = std::path::Path::new("/dev/shm");
    let tmp = if shm.is_dir() {
        tempfile::tempdir_in(shm).unwrap()
    } else {
        tempfile::tempdir().unwrap()
    };
    let root = tmp.path().to_path_buf();
    let stop = Arc::new(AtomicBool::new(false));
    let remover = {
        let (root, stop) = (root.clone(), Arc::clone(&stop));
        // Makes and removes uncommitted checkpoint directories, as a
        // retention pass removes (marker first) old ones.
        std::thread::spawn(move || {
            let dir = Dir::open(&root).unwrap();
            let mut id = 0;
            while !stop.load(Ordering::Relaxed) {
                id = (id + 1) % 8;
                let name = names::ckpt_dir(id);
                if dir.sub(&name, true).is_ok() {
                    dir.remove_dir_if_empty(&name);
                }
            }
        })
    };
    let dir = Dir::open(&root).unwrap();
    let mut failed = None;
    for epoch in 1..=4_000 {
        if let Err(e) = advance(&dir, fence(1, epoch)) {
            failed = Some(format!("epoch {epoch}: {e}"));
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    remover.join().unwrap();
    assert_eq!(failed, None);
}
