use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};

#[test]
fn every_piece_is_loaded_once_on_each_worker_count() {
    for workers in 1..=5 {
        let seen: Vec<AtomicUsize> = (0..37).map(|_| AtomicUsize::new(0)).collect();
        let states = AtomicUsize::new(0);
        spread(
            (0..37).collect(),
            workers,
            || states.fetch_add(1, Ordering::Relaxed),
            |_, i: usize| {
                seen[i].fetch_add(1, Ordering::Relaxed);
                Ok::<(), ()>(())
            },
        )
        .unwrap();
        assert!(seen.iter().all(|n| n.load(Ordering::Relaxed) == 1));
        assert_eq!(states.load(Ordering::Relaxed), workers);
    }
}

#[test]
fn the_first_failing_piece_in_order_is_reported() {
    for workers in 1..=4 {
        let err = spread(
            (0..20).collect(),
            workers,
            || (),
            |_, i: usize| if i == 6 || i == 13 { Err(i) } else { Ok(()) },
        )
        .unwrap_err();
        assert_eq!(err, 6, "{workers} workers");
    }
}

#[test]
fn small_regions_stay_on_one_thread() {
    assert_eq!(workers(PARALLEL_MIN - 1, 100, 8), 1);
    assert_eq!(workers(PARALLEL_MIN, 3, 8), 3);
    assert_eq!(workers(PARALLEL_MIN, 100, 0), 1);
    assert_eq!(workers(PARALLEL_MIN, 100, 64), MAX_WORKERS);
}
