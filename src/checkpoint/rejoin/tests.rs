use super::*;
use std::time::Duration;

/// A replacement replays the promotions the others made (level 3's are
/// collective): every interval that decides them must be counted in
/// calls, and a timed one is named.
#[test]
fn a_timed_interval_of_any_level_refuses_a_rejoin_by_name() {
    let mut counted = Config::default();
    counted.snapshot.interval = Interval::Calls(10);
    assert_eq!(refusal(&counted), None);
    let timed = Interval::Every(Duration::from_secs(60));
    let keys = [
        "snapshot.interval",
        "l2.interval",
        "l3.interval",
        "l4.interval",
    ];
    for key in keys {
        let mut cfg = counted.clone();
        match key {
            "snapshot.interval" => cfg.snapshot.interval = timed,
            "l2.interval" => cfg.l2.interval = timed,
            "l3.interval" => cfg.l3.interval = timed,
            _ => cfg.l4.interval = timed,
        }
        let why = refusal(&cfg).unwrap_or_default();
        assert!(why.contains(key), "{key}: {why:?}");
    }
}
