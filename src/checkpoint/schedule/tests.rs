use super::*;
use crate::comm::LocalComm;

#[test]
fn calls_interval_counts_calls() {
    let comm = LocalComm::world(1, 1).pop().unwrap();
    let mut s = Schedule::new(Interval::Calls(3));
    let mut taken = Vec::new();
    for call in 1..=9 {
        if s.due(&comm).unwrap() {
            taken.push(call);
            s.checkpointed(&comm, Duration::ZERO, Level::L1).unwrap();
        }
    }
    assert_eq!(taken, vec![3, 6, 9]);
}

#[test]
fn calibration_converts_time_to_calls() {
    // 10 calls in 50 ms: 5 ms per call, so 1 s is 200 calls.
    assert_eq!(calls_per(Duration::from_secs(1), 50_000, 10), 200);
    assert_eq!(calls_per(Duration::from_millis(1), 50_000, 10), 1);
    assert_eq!(calls_per(Duration::from_secs(1), 0, 0), 1_000_000);
}
