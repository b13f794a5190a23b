use super::{release_staged, retire_superseded};
use crate::comm::{Comm, LocalComm};
use crate::config::{Config, Interval};
use crate::level::staging::Staging;
use crate::level::{names, open_rank_file_in, Level};
use crate::safefs::Dir;
use crate::Checkpointer;

/// Job `job` with its node-local directory in `dir`.
fn job_config(dir: &std::path::Path) -> Config {
    let mut cfg = Config::default();
    cfg.storage.local_dir = dir.to_path_buf();
    cfg.job.id = "job".into();
    cfg
}

/// A promotion that ends (its staged files released) between a rank's
/// request opening the staging area and staging the next checkpoint into
/// it must not take the directory away: the next checkpoint would never
/// be promoted (seen under load as "cannot stage checkpoint 6: ... No such
/// file or directory", and a level keeping its previous checkpoint).
#[test]
fn a_promotion_ending_while_the_next_is_staged_leaves_room_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = job_config(dir.path());
    cfg.snapshot.interval = Interval::Calls(1);
    let shared = cfg.clone();
    LocalComm::run(1, 1, move |comm| {
        let mut ckpt = Checkpointer::init(&shared, &comm).unwrap();
        let step = ckpt.protect(0, 0u64);
        step.set(comm.rank() as u64 + 1);
        ckpt.snapshot().unwrap();
    })
    .into_iter()
    .for_each(|r| r.unwrap());
    let l1 = Dir::open(dir.path())
        .and_then(|d| d.sub("job", false))
        .and_then(|d| d.sub(names::L1_DIR, false))
        .and_then(|d| d.sub(&names::ckpt_dir(1), false))
        .unwrap();
    let (_, meta) = open_rank_file_in(&l1, "job", 1, 0, Level::L1, 1).unwrap();

    let request = Staging::open(dir.path(), "job", 0).unwrap();
    // The worker finishes the previous promotion meanwhile: nothing of
    // it is staged any more, the staging area is empty.
    release_staged(dir.path(), "job", 0, 0).unwrap();
    request.stage(1, meta.stamp, &[0], 1).unwrap();
    assert_eq!(request.ids(), vec![1]);
}

/// A commit order's `retire` prunes levels 2 and 3 only: one naming level
/// 1 (a peer's mistake, or worse) leaves the rank files there alone.
#[test]
fn a_commit_order_retires_checkpoints_of_levels_2_and_3_only() {
    let dir = tempfile::tempdir().unwrap();
    let shared = job_config(dir.path());
    LocalComm::run(1, 1, move |comm| {
        let mut ckpt = Checkpointer::init(&shared, &comm).unwrap();
        let _step = ckpt.protect(0, 7u64);
        ckpt.checkpoint().unwrap();
    })
    .into_iter()
    .for_each(|r| r.unwrap());
    let l1 = dir
        .path()
        .join("job")
        .join(names::L1_DIR)
        .join(names::ckpt_dir(1));
    let rank_file = l1.join(names::data_file(0));
    assert!(rank_file.exists());
    // A level-2 store with checkpoints 1 and 2.
    let l2 = crate::level::CopyStore::open(dir.path(), "job", Level::L2, 0).unwrap();
    for id in [1, 2] {
        l2.checkpoint_dir(id, true).unwrap();
    }
    retire_superseded(
        dir.path(),
        "job",
        &[(Level::L1, 99), (Level::L4, 99), (Level::L2, 2)],
    );
    assert!(rank_file.exists(), "a level-1 checkpoint was retired");
    assert_eq!(l2.ids(), vec![2]);
}

/// Level 3 of checkpoint 14 on node 0 of the group {0, 1}, in `round`:
/// node 1's term of the shard node 0 holds, and both layouts.
fn parity_round(parity: &mut super::parity::Parity, round: u64) -> Result<bool, String> {
    use super::proto::{BlobLayout, GroupInfo, Term};
    use crate::level::erasure::ParityKey;
    let group = GroupInfo {
        id: 14,
        stamp: 7,
        round,
        nodes: vec![0, 1],
        parity: 1,
        piece: 64,
        code: crate::level::erasure::FIRST_CODE.into(),
    };
    let term = Term {
        group: group.clone(),
        key: ParityKey {
            stripe: 0,
            index: 0,
        },
        from: 1,
        offset: 0,
    };
    let mut started_over = false;
    parity
        .term("job", 0, &term, 64, |fresh| {
            started_over = fresh;
            Ok(())
        })
        .map_err(|e| e.to_string())?;
    let mut ready = false;
    for pos in [0, 1] {
        let layout = BlobLayout {
            group: group.clone(),
            pos,
            entries: Vec::new(),
        };
        ready |= (parity.layout("job", 0, &layout, |_| {}))
            .map_err(|e| e.to_string())?
            .is_some();
    }
    assert!(ready, "round {round} completes");
    parity.written("job", 14, Ok(()));
    Ok(started_over)
}

/// A checkpoint promoted again after a recovery, with its group unchanged
/// (the lost node was in another group), starts its sums over; before
/// rounds it was refused as "position 1 sent its term ... twice", and the
/// recovered checkpoint had no level 3 until the next one.
#[test]
fn a_checkpoint_promoted_again_in_a_new_round_starts_its_parity_over() {
    let mut parity = super::parity::Parity::default();
    assert_eq!(parity_round(&mut parity, 1), Ok(true));
    assert_eq!(parity_round(&mut parity, 2), Ok(true));
    let repeated = parity_round(&mut parity, 2).unwrap_err();
    assert!(repeated.contains("twice"), "{repeated}");
    let late = parity_round(&mut parity, 1).unwrap_err();
    assert!(late.contains("superseded by round 2"), "{late}");
}

/// A job id long enough to pass the kernel's limit on socket paths gets a
/// socket named after its hash: different jobs still get different ones.
#[test]
fn long_job_ids_get_sockets_that_fit() {
    let dir = std::path::Path::new("/dev/shm/frame-test-abcdef/local/node-0");
    let short = super::socket_in(dir, "job", 3);
    assert!(short.ends_with(".manager-job-node-3.sock"));
    let a = super::socket_in(dir, "fti-fti_semantics-2026-11-26_09-50-00", 3);
    let b = super::socket_in(dir, "fti-fti_semantics-2026-11-26_09-50-01", 3);
    assert!(a.as_os_str().len() <= 88, "{}", a.display());
    assert_ne!(a, b);
}

/// A level-2 copy a manager keeps comes back from it whole, in several
/// data frames, byte for byte; a copy it does not keep is refused with a
/// reason naming the rank and checkpoint.
#[test]
fn a_kept_copy_comes_back_bit_for_bit_in_pieces() {
    use super::proto::Put;
    use crate::auth::Secret;
    let dir = tempfile::tempdir().unwrap();
    let (written, kept) = (dir.path().join("written"), dir.path().join("kept"));
    std::fs::create_dir_all(&kept).unwrap();
    let mut cfg = Config::default();
    cfg.storage.local_dir = written.clone();
    cfg.job.id = "job".into();
    cfg.snapshot.interval = Interval::Calls(1);
    let shared = cfg.clone();
    LocalComm::run(1, 1, move |comm| {
        let mut ckpt = Checkpointer::init(&shared, &comm).unwrap();
        // Larger than two data frames, and not a multiple of one.
        let data: Vec<u8> = (0..(2 * super::proto::DATA_PIECE + 12_345))
            .map(|i| (i * 31 % 251) as u8)
            .collect();
        let _data = ckpt.protect(0, data);
        ckpt.snapshot().unwrap();
    })
    .into_iter()
    .for_each(|r| r.unwrap());
    let l1 = Dir::open(&written)
        .and_then(|d| d.sub("job", false))
        .and_then(|d| d.sub(names::L1_DIR, false))
        .and_then(|d| d.sub(&names::ckpt_dir(1), false))
        .unwrap();
    let (file, meta) = open_rank_file_in(&l1, "job", 1, 0, Level::L1, 1).unwrap();
    let bytes = std::fs::read(file.path()).unwrap();
    assert_eq!(bytes.len() as u64, meta.file_len);

    let secret = Secret::generate().unwrap();
    let listen = super::inline::Listen::Local;
    let manager = super::inline::ensure(
        "job",
        1,
        &kept,
        &listen,
        &secret,
        1,
        crate::config::WhenFull::Wait,
    )
    .unwrap();
    let mut client = super::Client::connect(manager.endpoint(), &secret).unwrap();
    let what = Put::File {
        level: Level::L2,
        meta: Box::new(meta.clone()),
    };
    let reply = client
        .put_from("job", None, what, &mut bytes.as_slice())
        .unwrap();
    assert!(matches!(reply, super::Reply::Ok), "{reply:?}");

    let mut client = super::Client::connect(manager.endpoint(), &secret).unwrap();
    let (back, mut arriving) = client.get_copy("job", 1, 0, 1).unwrap();
    assert_eq!(
        (back.checkpoint_id, back.rank, back.file_len),
        (1, 0, meta.file_len)
    );
    let mut got = Vec::new();
    let mut pieces = 0;
    use crate::level::stream::PieceSource;
    while let Some(piece) = arriving.next_piece().unwrap() {
        assert!(piece.len() <= super::proto::DATA_PIECE);
        got.extend_from_slice(piece);
        pieces += 1;
    }
    assert!(pieces >= 3, "{pieces} pieces");
    assert!(got == bytes, "the copy came back different");

    // The same connection serves the next request: a copy not kept.
    let Err(missing) = client.get_copy("job", 2, 0, 1) else {
        panic!("a copy of checkpoint 2 was given");
    };
    assert!(missing.0.contains("rank 0's checkpoint 2"), "{}", missing.0);

    // Fencing: once the manager heard of epoch 2, a copy of epoch 1 (from
    // a node the job gave up on) is refused before anything is kept.
    let fence = |epoch| Some(crate::level::Fence { launch: 7, epoch });
    let kept_files = || {
        let mut files = Vec::new();
        let mut dirs = vec![kept.clone()];
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(&d).unwrap().map(Result::unwrap) {
                let m = std::fs::symlink_metadata(e.path()).unwrap();
                if m.is_dir() {
                    dirs.push(e.path());
                } else {
                    use std::os::unix::fs::MetadataExt;
                    files.push((e.path(), m.ino()));
                }
            }
        }
        files.sort();
        files
    };
    let mut client = super::Client::connect(manager.endpoint(), &secret).unwrap();
    let put = |client: &mut super::Client, epoch| {
        let what = Put::File {
            level: Level::L2,
            meta: Box::new(meta.clone()),
        };
        client
            .put_from("job", fence(epoch), what, &mut bytes.as_slice())
            .unwrap()
    };
    assert!(matches!(put(&mut client, 2), super::Reply::Ok));
    let before = kept_files();
    match put(&mut client, 1) {
        super::Reply::Error(why) => assert!(
            why.contains("epoch 1") && why.contains("moved on to epoch 2"),
            "{why}"
        ),
        other => panic!("a copy of epoch 1 was taken: {other:?}"),
    }
    assert_eq!(
        kept_files(),
        before,
        "the refused copy changed what is kept"
    );
    assert!(matches!(put(&mut client, 3), super::Reply::Ok));
}

/// A manager gives level-3 shards only within what its manifest says:
/// the manifest alone, and windows of its group, at most a data frame
/// long and inside a shard; anything else is refused with the reason.
#[test]
fn shard_requests_are_bounded_by_the_manifest() {
    use super::proto::{ShardWindow, DATA_PIECE};
    use crate::auth::Secret;
    use crate::level::erasure::{ErasureStore, GroupManifest};
    let dir = tempfile::tempdir().unwrap();
    let secret = Secret::generate().unwrap();
    let listen = super::inline::Listen::Local;
    let manager = super::inline::ensure(
        "job",
        0,
        dir.path(),
        &listen,
        &secret,
        1,
        crate::config::WhenFull::Wait,
    )
    .unwrap();
    let mut client = super::Client::connect(manager.endpoint(), &secret).unwrap();
    let none = client.get_shard("job", 4, None).unwrap_err();
    assert!(none.0.contains("no level-3 data"), "{}", none.0);
    let m = GroupManifest {
        job_id: "job".into(),
        checkpoint_id: 4,
        stamp: 1,
        nodes: vec![0, 1, 2],
        parity: 1,
        piece: 1 << 30,
        code: crate::level::erasure::FIRST_CODE.into(),
        blobs: vec![Vec::new(); 3],
    };
    let store = ErasureStore::open(dir.path(), "job", 0).unwrap();
    store.write_manifest(&m).unwrap();
    let (got, bytes) = client.get_shard("job", 4, None).unwrap();
    assert_eq!((got, bytes.len()), (m.clone(), 0));
    let window = |nodes: Vec<u32>, pos, offset, len| ShardWindow {
        nodes,
        pos,
        stripe: 0,
        offset,
        len,
    };
    let refused = [
        (window(vec![0, 1, 3], 0, 0, 8), "its group is of nodes"),
        (window(vec![0, 1, 2], 3, 0, 8), "the group has 3"),
        (
            window(vec![0, 1, 2], 0, 0, DATA_PIECE as u32 + 1),
            "at most",
        ),
        (window(vec![0, 1, 2], 0, (1 << 30) - 4, 8), "of a shard of"),
    ];
    for (w, why) in refused {
        let e = client.get_shard("job", 4, Some(w.clone())).unwrap_err();
        assert!(e.0.contains(why), "{w:?}: {}", e.0);
    }
}

proptest::proptest! {
    /// Any bytes in a manager frame are a request (or reply) or an error
    /// naming the frame, never a panic; so is a sound request's frame with
    /// bytes overwritten or cut.
    #[test]
    fn any_manager_frame_is_a_message_or_an_error(
        bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..600),
        writes in proptest::collection::vec(
            (proptest::prelude::any::<usize>(), proptest::prelude::any::<u8>()), 0..4),
        cut in proptest::prelude::any::<usize>(),
    ) {
        use super::proto::{join, split, Reply, Request};
        use bytes::BytesMut;
        let garbage = split::<Request>(BytesMut::from(&bytes[..]));
        if let Err(e) = &garbage {
            proptest::prop_assert!(e.to_string().contains("bad manager frame"), "{e}");
        }
        let _ = split::<Reply>(BytesMut::from(&bytes[..]));
        let sound = join(
            &Request::Commit {
                commit: super::CommitOrder {
                    job_id: "job".into(),
                    id: 3,
                    stamp: 9,
                    level: Level::L2,
                    keep_last: 1,
                    ranks: vec![0, 1],
                    world: 4,
                    marker: true,
                    global_dir: "/nonexistent".into(),
                    layout: None,
                    archive: false,
                    fence: None,
                    retire: vec![(Level::L3, 3)],
                },
            },
            &bytes,
        );
        let mut damaged = sound.to_vec();
        for (at, value) in writes {
            let at = at % damaged.len();
            damaged[at] = value;
        }
        damaged.truncate(cut % (damaged.len() + 1));
        let _ = split::<Request>(BytesMut::from(&damaged[..]));
    }
}
