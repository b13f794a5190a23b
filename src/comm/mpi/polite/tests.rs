//! The nap schedule of brief and idle waits.

use super::*;

const SECOND: Duration = Duration::from_secs(1);
/// A spare's longest nap, as the runtime gives it.
const LONGEST: Duration = Duration::from_millis(5);

#[test]
fn a_wait_yields_first_then_naps_longer_to_its_cap() {
    for patience in [Patience::Brief, Patience::Idle(LONGEST)] {
        assert_eq!(nap(0, Duration::ZERO, patience), None);
        assert_eq!(nap(YIELDS - 1, Duration::ZERO, patience), None);
        assert_eq!(
            nap(YIELDS, Duration::ZERO, patience),
            Some(Duration::from_micros(1))
        );
        assert_eq!(
            nap(YIELDS + 9, Duration::ZERO, patience),
            Some(Duration::from_micros(10))
        );
    }
    assert_eq!(nap(u32::MAX, 3600 * SECOND, Patience::Brief), Some(MAX_NAP));
}

#[test]
fn an_idle_wait_naps_a_share_of_its_wait_and_never_past_its_cap() {
    let at = |ms: u64| {
        nap(
            YIELDS + 1000,
            Duration::from_millis(ms),
            Patience::Idle(LONGEST),
        )
    };
    // Early on, as briefly as any wait.
    assert_eq!(at(1), Some(MAX_NAP));
    // Then a share of the wait: 1/32 of 64 ms.
    assert_eq!(at(64), Some(Duration::from_millis(2)));
    assert_eq!(at(10_000), Some(LONGEST));
    assert_eq!(
        nap(u32::MAX, 3600 * SECOND, Patience::Idle(LONGEST)),
        Some(LONGEST)
    );
    assert!(LONGEST > MAX_NAP);
    // A longest nap shorter than a brief wait's naps as a brief wait.
    let short = Patience::Idle(Duration::from_micros(1));
    assert_eq!(nap(u32::MAX, 3600 * SECOND, short), Some(MAX_NAP));
}
