//! Restoring on one rank alone (`Checkpointer::recover_here` and
//! `recover_region`): some ranks restore everything, others region by
//! region, and none waits for another; and a rollback within a run to the
//! newest checkpoint it committed. Four rank threads on two nodes.

use crate::common;

use common::{config, ranks, scratch};
use frame::comm::Comm;
use frame::{Checkpointer, Error};

/// The state of `rank` at `step`.
fn field(rank: usize, step: u64) -> Vec<f64> {
    (0..5000)
        .map(|i| ((i * 3 + rank) as f64 * 0.01 + step as f64).cos())
        .collect()
}

/// Restoring ranks may mix `recover_here` and `recover_region` (even
/// ranks the one, odd ranks the other, with no collective call between):
/// none waits for another, every rank gets the checkpoint back, and the
/// next checkpoint ends the recovery everywhere.
#[test]
fn ranks_restore_alone_some_whole_some_region_by_region() {
    let dir = scratch();
    let cfg = config(dir.path(), "alone");
    let first = cfg.clone();
    ranks(4, 2, move |comm| {
        let mut ckpt = Checkpointer::init(&first, &comm).expect("init");
        let step = ckpt.protect(0, 0u64);
        let data = ckpt.protect(1, field(comm.rank(), 0));
        for s in 1..=3 {
            step.set(s);
            *data.write() = field(comm.rank(), s);
            ckpt.checkpoint().expect("checkpoint");
        }
        // Killed: no finalize.
    });
    let results = ranks(4, 2, move |comm| {
        let mut ckpt = Checkpointer::init(&cfg, &comm).expect("init");
        assert!(ckpt.recovering());
        let step = ckpt.protect(0, 0u64);
        let data = ckpt.protect(1, Vec::<f64>::new());
        if comm.rank() % 2 == 0 {
            assert_eq!(ckpt.recover_here().expect("recover_here"), 3);
        } else {
            ckpt.recover_region(1).expect("region 1");
            ckpt.recover_region(0).expect("region 0");
        }
        let restored = (step.get(), data.read().clone() == field(comm.rank(), 3));
        // The next checkpoint ends the recovery on every rank.
        assert_eq!(ckpt.checkpoint().expect("checkpoint"), 4);
        assert!(!ckpt.recovering());
        ckpt.finalize().expect("finalize");
        restored
    });
    for (rank, r) in results.into_iter().enumerate() {
        assert_eq!(r, (3, true), "rank {rank}");
    }
}

/// Within a run, `recover_here` and `recover_region` go back to the newest
/// checkpoint the run committed; before the first there is nothing to
/// restore.
#[test]
fn a_run_rolls_back_to_its_newest_checkpoint() {
    let dir = scratch();
    let cfg = config(dir.path(), "rollback");
    let results = ranks(4, 2, move |comm| {
        let r = comm.rank();
        let mut ckpt = Checkpointer::init(&cfg, &comm).expect("init");
        let step = ckpt.protect(0, 0u64);
        let data = ckpt.protect(1, field(r, 0));
        let before = matches!(ckpt.recover_here(), Err(Error::NothingToRecover));
        let mut ok = vec![before];
        for s in 1..=2 {
            step.set(s);
            *data.write() = field(r, s);
            ckpt.checkpoint().expect("checkpoint");
        }
        // The program goes on, then rolls back (some ranks only).
        step.set(9);
        *data.write() = field(r, 9);
        if r != 1 {
            ok.push(ckpt.recover_here().expect("rollback") == 2);
            ok.push(step.get() == 2 && *data.read() == field(r, 2));
        }
        // One region alone, after the state moved on again.
        *data.write() = field(r, 10);
        ckpt.recover_region(1).expect("region");
        ok.push(*data.read() == field(r, 2));
        // A newer checkpoint is the one rolled back to next.
        step.set(3);
        *data.write() = field(r, 3);
        ckpt.checkpoint().expect("checkpoint");
        *data.write() = field(r, 11);
        ok.push(ckpt.recover_here().expect("rollback") == 3 && *data.read() == field(r, 3));
        ckpt.finalize().expect("finalize");
        ok
    });
    for (rank, r) in results.iter().enumerate() {
        assert!(r.iter().all(|x| *x), "rank {rank}: {r:?}");
    }
}
