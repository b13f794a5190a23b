use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};

#[test]
fn the_hook_is_called_on_each_change_and_the_period_measured() {
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    set_idle_hook(|idle| {
        CALLS.fetch_add(if idle { 1 } else { 100 }, Ordering::SeqCst);
    });
    let mut idle = Idle::default();
    assert_eq!(idle.set(false), None, "not idle: nothing ends");
    assert_eq!(idle.set(true), None);
    assert_eq!(idle.set(true), None, "already idle: no second call");
    std::thread::sleep(Duration::from_millis(20));
    let period = idle.set(false).expect("a period ended");
    assert!(period.wall >= Duration::from_millis(20), "{period:?}");
    assert_eq!(CALLS.load(Ordering::SeqCst), 101);
}
