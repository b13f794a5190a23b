//! The checkpointer's phases as types (`Checkpointer::open`): a new job
//! opens fresh, a job with checkpoints opens as a recovery that only
//! `recover` completes, on every rank alike; the flag-based path
//! (`init`/`recovering`) sorts into the same phases.

use crate::common;

use common::{ranks, scratch};
use frame::comm::Comm;
use frame::{Checkpointer, Config, Error, Opened};
use std::path::Path;

const SIZE: usize = 4;

/// The state of `rank` after `step` steps.
fn field(rank: usize, step: u64) -> Vec<f64> {
    (0..5_000)
        .map(|i| ((i + 11 * rank) as f64 * 0.003 + step as f64).cos())
        .collect()
}

fn rank_config(base: &Path, rank: usize) -> Config {
    common::config(&base.join(format!("rank{rank}")), "phases")
}

/// Runs `steps` steps with a checkpoint each on every rank, opening with
/// `open`, and stops without finalizing (a crash). Returns what each rank
/// opened: `None` fresh, else the id to recover.
fn run(base: &Path, steps: u64) -> Vec<Option<u64>> {
    let base = base.to_path_buf();
    ranks(SIZE, 1, move |comm| {
        let cfg = rank_config(&base, comm.rank());
        let mut opened = Checkpointer::open(&cfg, &comm).unwrap();
        let found = opened.recovery_id();
        let step = opened.protect(0, 0u64);
        let data = opened.protect(1, field(comm.rank(), 0));
        let mut ckpt = opened.resume().unwrap();
        if let Some(id) = found {
            assert_eq!(
                step.get(),
                id,
                "rank {} restored the wrong step",
                comm.rank()
            );
            assert_eq!(*data.read(), field(comm.rank(), step.get()));
        }
        let last = step.get() + steps;
        while step.get() < last {
            step.set(step.get() + 1);
            *data.write() = field(comm.rank(), step.get());
            assert_eq!(ckpt.checkpoint().unwrap(), step.get());
        }
        found
    })
}

#[test]
fn a_new_job_opens_fresh_and_a_crashed_one_as_a_recovery_on_every_rank() {
    let base = scratch();
    assert_eq!(run(base.path(), 3), vec![None; SIZE]);
    assert_eq!(run(base.path(), 2), vec![Some(3); SIZE]);
    // The checkpoints taken after the recovery are numbered past it and
    // are the ones a third run restores.
    assert_eq!(run(base.path(), 1), vec![Some(5); SIZE]);
}

#[test]
fn a_recovery_restores_and_gives_a_checkpointer_that_goes_on() {
    let base = scratch();
    run(base.path(), 4);
    let dir = base.path().to_path_buf();
    let restored = ranks(SIZE, 1, move |comm| {
        let cfg = rank_config(&dir, comm.rank());
        let Opened::Recovery(mut recovery) = Checkpointer::open(&cfg, &comm).unwrap() else {
            panic!("rank {} opened fresh over checkpoints", comm.rank());
        };
        assert_eq!(recovery.id(), 4);
        let stored = recovery.stored_region(1).expect("region 1 is stored");
        assert_eq!(stored.count, 5_000);
        assert!(recovery.stored_region(7).is_none());
        let step = recovery.protect(0, 0u64);
        let data = recovery.protect(1, Vec::<f64>::new());
        let mut ckpt = recovery.recover().unwrap();
        assert!(!ckpt.recovering());
        assert_eq!(ckpt.stats().recovered_from, Some(frame::Level::L1));
        let restored = (step.get(), data.read().clone());
        step.set(5);
        assert_eq!(ckpt.checkpoint().unwrap(), 5);
        ckpt.finalize().unwrap();
        restored
    });
    for (rank, (step, data)) in restored.into_iter().enumerate() {
        assert_eq!(step, 4, "rank {rank}");
        assert_eq!(data, field(rank, 4), "rank {rank}");
    }
}

#[test]
fn a_region_of_the_wrong_length_fails_the_recovery_on_every_rank() {
    let base = scratch();
    run(base.path(), 2);
    let dir = base.path().to_path_buf();
    let errors = ranks(SIZE, 1, move |comm| {
        let cfg = rank_config(&dir, comm.rank());
        let mut opened = Checkpointer::open(&cfg, &comm).unwrap();
        opened.protect(0, 0u64);
        // One rank protects a smaller fixed-size field: every rank fails.
        let len = if comm.rank() == 2 { 10 } else { 5_000 };
        opened.protect_fixed(1, vec![0.0f64; len]);
        opened.resume().err().expect("the recovery must fail")
    });
    for (rank, e) in errors.into_iter().enumerate() {
        match e {
            Error::RegionMismatch { id, problems } => {
                assert_eq!(id, 2, "rank {rank}");
                assert!(
                    problems.iter().any(|p| p.rank == 2),
                    "rank {rank}: {problems:?} does not name rank 2"
                );
            }
            other => panic!("rank {rank}: {other}"),
        }
    }
}

#[test]
fn init_and_open_agree_on_the_phase() {
    let base = scratch();
    let dir = base.path().to_path_buf();
    let phases = ranks(SIZE, 1, move |comm| {
        let cfg = rank_config(&dir, comm.rank());
        let fresh = Checkpointer::init(&cfg, &comm).unwrap();
        let was_recovering = fresh.recovering();
        let mut ckpt = match Opened::from(fresh) {
            Opened::Fresh(ckpt) => ckpt,
            Opened::Recovery(_) => panic!("an empty directory sorted as a recovery"),
        };
        ckpt.protect(0, 7u64);
        ckpt.checkpoint().unwrap();
        drop(ckpt);
        let again = Checkpointer::init(&cfg, &comm).unwrap();
        let id = again.recovery_id();
        let sorted = Opened::from(again).recovery_id();
        (was_recovering, id, sorted)
    });
    assert_eq!(phases, vec![(false, Some(1), Some(1)); SIZE]);
}
