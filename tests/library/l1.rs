//! Level-1 checkpoints across several ranks: round trips, resizing, single
//! region recovery, retention, scheduling and cleanup.

use crate::common;

use common::{config, ranks, scratch};
use frame::comm::Comm;
use frame::config::{Compression, Interval};
use frame::{Byte, Checkpointer, ElemType, Error, RegionInfo};
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

/// The state a rank protects, as plain values for comparison.
#[derive(Clone, Debug, PartialEq)]
struct State {
    step: u64,
    field: Vec<f64>,
    fixed: [i32; 5],
    boxed: Vec<u16>,
    raw: Vec<Byte>,
}

fn state_at(rank: usize, step: u64) -> State {
    let n = 1000 + rank * 37 + step as usize;
    State {
        step,
        field: (0..n)
            .map(|i| (i as f64 * 0.37 + step as f64).sin() * rank as f64)
            .collect(),
        fixed: [rank as i32, -(step as i32), 3, 4, 5],
        boxed: vec![step as u16; 77],
        raw: (0..(300 + step as usize))
            .map(|i| Byte((i * 7 + rank) as u8))
            .collect(),
    }
}

/// Runs `steps` snapshots, then returns without finalizing (a crash).
fn write_run(cfg: frame::Config, size: usize, steps: u64) {
    ranks(size, 2, move |comm| {
        let mut ckpt = Checkpointer::init(&cfg, &comm).unwrap();
        assert!(!ckpt.recovering());
        let s0 = state_at(comm.rank(), 0);
        let step = ckpt.protect(0, 0u64);
        let field = ckpt.protect(1, s0.field);
        let fixed = ckpt.protect(2, s0.fixed);
        let boxed = ckpt.protect(3, s0.boxed.into_boxed_slice());
        let raw = ckpt.protect(4, s0.raw);
        for k in 1..=steps {
            let s = state_at(comm.rank(), k);
            step.set(k);
            *field.write() = s.field;
            fixed.set(s.fixed);
            boxed.write().copy_from_slice(&s.boxed);
            *raw.write() = s.raw;
            assert_eq!(ckpt.snapshot().unwrap(), Some(k));
        }
    });
}

/// Recovers with freshly protected (wrongly sized) regions and returns the
/// restored state of every rank.
fn recover_run(cfg: frame::Config, size: usize) -> Vec<(u64, State)> {
    ranks(size, 2, move |comm| {
        let mut ckpt = Checkpointer::init(&cfg, &comm).unwrap();
        assert!(ckpt.recovering());
        let step = ckpt.protect(0, 0u64);
        let field = ckpt.protect(1, Vec::<f64>::new());
        let fixed = ckpt.protect(2, [0i32; 5]);
        let boxed = ckpt.protect(3, vec![0u16; 77].into_boxed_slice());
        let raw = ckpt.protect(4, Vec::<Byte>::new());
        let id = ckpt.recover().unwrap();
        let got = State {
            step: step.get(),
            field: field.read().clone(),
            fixed: fixed.get(),
            boxed: boxed.read().to_vec(),
            raw: raw.read().clone(),
        };
        ckpt.finalize().unwrap();
        (id, got)
    })
}

#[test]
fn recovery_is_bit_exact_for_every_region_type() {
    for compression in [Compression::None, Compression::Zstd] {
        let dir = scratch();
        let mut cfg = config(dir.path(), "roundtrip");
        cfg.snapshot.compression = compression;
        write_run(cfg.clone(), 4, 3);
        for (rank, (id, got)) in recover_run(cfg, 4).into_iter().enumerate() {
            assert_eq!(id, 3);
            let want = state_at(rank, 3);
            assert_eq!(got.field.len(), want.field.len());
            assert!(
                got.field
                    .iter()
                    .zip(&want.field)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "rank {rank} field differs"
            );
            assert_eq!(got, want, "rank {rank} ({compression})");
        }
        assert!(
            common::files_under(dir.path()).is_empty(),
            "finalize left files"
        );
    }
}

#[test]
fn stored_sizes_are_reported_before_loading() {
    let dir = scratch();
    let cfg = config(dir.path(), "sizes");
    write_run(cfg.clone(), 2, 2);
    let infos = ranks(2, 2, move |comm| {
        let ckpt = Checkpointer::init(&cfg, &comm).unwrap();
        (
            ckpt.recovery_id(),
            ckpt.stored_region(1),
            ckpt.stored_regions().len(),
        )
    });
    for (rank, (id, info, n)) in infos.into_iter().enumerate() {
        assert_eq!(id, Some(2));
        assert_eq!(n, 5);
        let want = state_at(rank, 2).field.len() as u64;
        assert_eq!(
            info,
            Some(RegionInfo {
                id: 1,
                elem: ElemType::F64,
                count: want
            })
        );
    }
}

#[test]
fn a_single_region_can_be_recovered_and_ids_continue() {
    let dir = scratch();
    let cfg = config(dir.path(), "single");
    write_run(cfg.clone(), 2, 4);
    ranks(2, 2, move |comm| {
        let mut ckpt = Checkpointer::init(&cfg, &comm).unwrap();
        let field = ckpt.protect(1, Vec::<f64>::new());
        let step = ckpt.protect(0, 99u64);
        ckpt.recover_region(1).unwrap();
        assert_eq!(*field.read(), state_at(comm.rank(), 4).field);
        assert_eq!(step.get(), 99, "only region 1 was restored");
        assert!(matches!(
            ckpt.recover_region(7),
            Err(Error::Region { id: 7, .. })
        ));
        // The next checkpoint continues after the recovered one.
        assert_eq!(ckpt.checkpoint().unwrap(), 5);
        ckpt.finalize().unwrap();
    });
}

#[test]
fn regions_may_change_size_between_snapshots() {
    let dir = scratch();
    let cfg = config(dir.path(), "resize");
    let c = cfg.clone();
    ranks(3, 1, move |comm| {
        let mut ckpt = Checkpointer::init(&c, &comm).unwrap();
        let v = ckpt.protect(0, vec![1u32; 10]);
        ckpt.snapshot().unwrap();
        v.write().resize(200_000 + comm.rank(), 2);
        ckpt.snapshot().unwrap();
        v.write().truncate(3);
        ckpt.snapshot().unwrap();
        v.write().resize(50 * (comm.rank() + 1), 9);
        ckpt.snapshot().unwrap();
    });
    let got = ranks(3, 1, move |comm| {
        let mut ckpt = Checkpointer::init(&cfg, &comm).unwrap();
        let v = ckpt.protect(0, Vec::<u32>::new());
        ckpt.recover().unwrap();
        let out = v.read().clone();
        ckpt.finalize().unwrap();
        out
    });
    for (rank, v) in got.into_iter().enumerate() {
        assert_eq!(v.len(), 50 * (rank + 1));
        assert_eq!(&v[..3], &[1, 1, 1]);
        assert!(v[3..].iter().all(|x| *x == 9));
    }
}

#[test]
fn retention_keeps_the_newest_checkpoints_and_reuses_files() {
    let dir = scratch();
    let mut cfg = config(dir.path(), "keep");
    cfg.retention.keep_last = 2;
    cfg.retention.keep_on_finalize = true;
    let c = cfg.clone();
    ranks(2, 2, move |comm| {
        let mut ckpt = Checkpointer::init(&c, &comm).unwrap();
        let _v = ckpt.protect(0, vec![comm.rank() as u8; 300_000]);
        for _ in 0..6 {
            ckpt.snapshot().unwrap();
        }
        ckpt.finalize().unwrap();
    });
    let l1 = dir.path().join("keep").join("l1");
    let mut ckpts: Vec<String> = std::fs::read_dir(&l1)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("ckpt-"))
        .collect();
    ckpts.sort();
    assert_eq!(
        ckpts,
        ["ckpt-00000000000000000005", "ckpt-00000000000000000006"]
    );
    let spares = std::fs::read_dir(l1.join("spare")).unwrap().count();
    assert!(spares <= 4, "{spares} spare files for 2 ranks");
    // keep_on_finalize kept them: the next run recovers checkpoint 6.
    let ids = ranks(2, 2, move |comm| {
        let mut ckpt = Checkpointer::init(&cfg, &comm).unwrap();
        let _v = ckpt.protect(0, Vec::<u8>::new());
        ckpt.recover().unwrap()
    });
    assert_eq!(ids, vec![6, 6]);
}

#[test]
fn directories_are_private() {
    let dir = scratch();
    let local = dir.path().join("new").join("nested");
    let cfg = config(&local, "modes");
    let c = cfg.clone();
    ranks(1, 1, move |comm| {
        let mut ckpt = Checkpointer::init(&c, &comm).unwrap();
        let _v = ckpt.protect(0, 5u64);
        ckpt.snapshot().unwrap();
    });
    let l1 = local.join("modes").join("l1");
    for d in [
        dir.path().join("new"),
        local.clone(),
        local.join("modes"),
        l1.clone(),
        l1.join("spare"),
        l1.join("ckpt-00000000000000000001"),
    ] {
        let mode = std::fs::metadata(&d).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{}", d.display());
    }
    for f in common::files_under(&l1) {
        let mode = std::fs::metadata(&f).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", f.display());
    }
}

#[test]
fn time_intervals_are_decided_together() {
    let dir = scratch();
    let mut cfg = config(dir.path(), "timed");
    cfg.snapshot.interval = Interval::Every(Duration::from_nanos(1));
    let taken = ranks(3, 1, move |comm| {
        let mut ckpt = Checkpointer::init(&cfg, &comm).unwrap();
        let v = ckpt.protect(0, 0u64);
        let mut ids = Vec::new();
        for k in 0..5 {
            v.set(k);
            ids.push(ckpt.snapshot().unwrap());
        }
        ckpt.finalize().unwrap();
        ids
    });
    assert!(taken.iter().all(|t| *t == taken[0]), "{taken:?}");
    assert_eq!(taken[0], vec![Some(1), Some(2), Some(3), Some(4), Some(5)]);
}

#[test]
fn a_locked_region_fails_the_snapshot_everywhere_and_keeps_the_previous() {
    let dir = scratch();
    let cfg = config(dir.path(), "busy");
    let c = cfg.clone();
    let errors = ranks(2, 2, move |comm| {
        let mut ckpt = Checkpointer::init(&c, &comm).unwrap();
        let v = ckpt.protect(0, vec![1u64; 10]);
        ckpt.snapshot().unwrap();
        v.write()[0] = 2;
        let err = if comm.rank() == 1 {
            let _guard = v.write();
            ckpt.snapshot().unwrap_err()
        } else {
            ckpt.snapshot().unwrap_err()
        };
        // The id was not consumed: the next checkpoint is 2.
        assert_eq!(ckpt.checkpoint().unwrap(), 2);
        err.to_string()
    });
    for e in &errors {
        assert!(e.contains("checkpoint 2 failed"), "{e}");
        assert!(e.contains("rank 1: region 0 is locked"), "{e}");
    }
    let got = ranks(2, 2, move |comm| {
        let mut ckpt = Checkpointer::init(&cfg, &comm).unwrap();
        let v = ckpt.protect(0, Vec::<u64>::new());
        let id = ckpt.recover().unwrap();
        let first = v.read()[0];
        (id, first)
    });
    assert_eq!(got, vec![(2, 2), (2, 2)]);
}

#[test]
fn nothing_to_recover_on_a_fresh_start() {
    let dir = scratch();
    let cfg = config(dir.path(), "fresh");
    let r = ranks(2, 1, move |comm| {
        let mut ckpt = Checkpointer::init(&cfg, &comm).unwrap();
        let recovering = ckpt.recovering();
        let err = ckpt.recover().unwrap_err();
        (
            recovering,
            matches!(err, Error::NothingToRecover),
            ckpt.stored_regions().len(),
        )
    });
    assert_eq!(r, vec![(false, true, 0), (false, true, 0)]);
}

#[test]
fn raw_pointer_regions_round_trip() {
    let dir = scratch();
    let cfg = config(dir.path(), "raw");
    let c = cfg.clone();
    ranks(2, 2, move |comm| {
        let mut data = vec![comm.rank() as f32 + 0.5; 1000];
        let mut ckpt = Checkpointer::init(&c, &comm).unwrap();
        // SAFETY: `data` outlives the checkpointer and is not touched during calls.
        unsafe { ckpt.protect_raw(0, data.as_mut_ptr().cast(), data.len(), ElemType::F32) };
        ckpt.snapshot().unwrap();
        drop(ckpt);
        data.fill(0.0);
    });
    let got = ranks(2, 2, move |comm| {
        let mut data = vec![0f32; 1000];
        let mut ckpt = Checkpointer::init(&cfg, &comm).unwrap();
        assert_eq!(ckpt.stored_region(0).map(|r| r.count), Some(1000));
        // SAFETY: as above.
        unsafe { ckpt.protect_raw(0, data.as_mut_ptr().cast(), data.len(), ElemType::F32) };
        ckpt.recover().unwrap();
        drop(ckpt);
        data
    });
    for (rank, d) in got.into_iter().enumerate() {
        assert!(d.iter().all(|x| *x == rank as f32 + 0.5));
    }
}

#[test]
fn automatic_intervals_follow_the_measured_cost_and_the_failure_rate() {
    let dir = scratch();
    let mut cfg = config(dir.path(), "auto");
    cfg.snapshot.interval = Interval::Auto;
    cfg.auto.mtbf = vec![Duration::from_secs(2)];
    let out = ranks(3, 1, move |comm| {
        let mut ckpt = Checkpointer::init(&cfg, &comm).unwrap();
        let first = ckpt.auto_intervals().unwrap().period;
        let data = ckpt.protect(0, vec![comm.rank() as f64; 1 << 18]);
        // About 1.2 s of "computation" in 600 steps of 2 ms (every rank
        // makes the same calls: snapshot() is collective).
        let calls = 600u64;
        for _ in 0..calls {
            data.write()[0] += 1.0;
            std::thread::sleep(Duration::from_millis(2));
            ckpt.snapshot().unwrap();
        }
        let chosen = ckpt.auto_intervals().unwrap().clone();
        let stats = ckpt.stats().clone();
        ckpt.finalize().unwrap();
        (first, chosen, stats, calls)
    });
    let (first, chosen, stats, _) = &out[0];
    // Before any measurement a cost of 1 s is assumed: sqrt(2 * 1 s * 2 s).
    assert!((first.as_secs_f64() - 2.0).abs() < 0.01, "{first:?}");
    // A checkpoint of 2 MiB costs milliseconds: Young's period shrinks to
    // sqrt(2 C M), far below the assumed one.
    let c = stats.checkpoint_time.as_secs_f64() / stats.checkpoints.max(1) as f64;
    let young = (2.0 * c * 2.0).sqrt();
    println!(
        "auto: {chosen:?} after {} checkpoints of {:.2} ms (sqrt(2 C M) = {young:.3} s)",
        stats.checkpoints,
        c * 1e3
    );
    assert!(stats.checkpoints >= 3, "{stats:?} {chosen:?}");
    assert!(chosen.period.as_secs_f64() < 0.5, "{chosen:?}");
    assert!(
        chosen.period.as_secs_f64() > young / 4.0 && chosen.period.as_secs_f64() < young * 4.0,
        "{chosen:?} against sqrt(2 C M) = {young} s (C = {c} s)"
    );
    for (_, other, s, _) in &out {
        assert_eq!(other, chosen, "every rank chooses alike");
        assert_eq!(s.checkpoints, stats.checkpoints);
    }
}

#[test]
fn automatic_intervals_choose_how_often_a_level_above_is_promoted() {
    let dir = scratch();
    let mut cfg = config(dir.path(), "auto-l2");
    cfg.snapshot.interval = Interval::Auto;
    cfg.l2.interval = Interval::Auto;
    cfg.auto.mtbf = vec![Duration::from_secs(2), Duration::from_secs(200)];
    let base = dir.path().to_path_buf();
    let out = ranks(4, 2, move |comm| {
        let mut cfg = cfg.clone();
        cfg.storage.local_dir = base.join(format!("node-{}", comm.node()));
        let mut ckpt = Checkpointer::init(&cfg, &comm).unwrap();
        let data = ckpt.protect(0, vec![comm.rank() as f64; 1 << 16]);
        for _ in 0..300 {
            data.write()[0] += 1.0;
            std::thread::sleep(Duration::from_millis(2));
            ckpt.snapshot().unwrap();
        }
        ckpt.wait_for_promotions().unwrap();
        let chosen = ckpt.auto_intervals().unwrap().clone();
        ckpt.finalize().unwrap();
        chosen
    });
    frame::internals::manager::inline::stop("auto-l2");
    let chosen = &out[0];
    // A hundred times rarer failures: L2 about sqrt(100) = 10 times rarer
    // than level 1 when both cost alike, never every checkpoint.
    let (level, every) = chosen.every[0];
    assert_eq!(level, frame::Level::L2);
    assert!((2..=40).contains(&every), "{chosen:?}");
    assert!(out.iter().all(|c| c == chosen), "{out:?}");
}
