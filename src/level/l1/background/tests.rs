use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

#[test]
fn waiting_for_a_checkpoint_waits_for_its_jobs_and_a_panic_ends_none() {
    // A regression would hang the waits below: abort instead.
    let _deadline = crate::testing::Deadline::new(Duration::from_secs(60));
    let done = Arc::new(AtomicUsize::new(0));
    let (go, gate) = mpsc::channel::<()>();
    let mut bg = Background::default();
    // Job 1 waits at a gate, so job 2 queued behind it cannot run first.
    let d = Arc::clone(&done);
    bg.spawn(1, Job::Seal, "test-worker", move || {
        let _ = gate.recv_timeout(Duration::from_secs(60));
        d.fetch_add(1, Ordering::SeqCst);
    });
    bg.spawn(2, Job::Remove, "test-worker", || {
        panic!("a job that panics")
    });
    let d = Arc::clone(&done);
    bg.spawn(3, Job::Remove, "test-worker", move || {
        d.fetch_add(10, Ordering::SeqCst);
    });
    go.send(()).unwrap();
    bg.wait_for(1);
    assert!(done.load(Ordering::SeqCst) >= 1, "job 1 ran");
    // Job 2 panicked: waiting for it ends, and job 3 still runs.
    bg.wait_for(2);
    bg.wait_all();
    assert_eq!(done.load(Ordering::SeqCst), 11);
    // Waiting for a checkpoint without jobs returns at once.
    bg.wait_for(42);
}
