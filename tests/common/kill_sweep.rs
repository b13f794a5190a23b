//! What the kill sweeps share: the crash points a run passed, read from
//! its trace (`FRAME_CRASH_TRACE`), and the check that a kill left nothing
//! damaged behind.

use frame::internals::level::catalog::{self, Severity};
use std::path::Path;

/// The crash points each of `ranks` ranks passed, from the trace file a
/// run wrote (one `<rank> <n>` line per point; a missing file is none).
pub fn crash_points(trace: &Path, ranks: usize) -> Vec<u64> {
    let mut counts = vec![0u64; ranks];
    for line in std::fs::read_to_string(trace).unwrap_or_default().lines() {
        let mut w = line.split_whitespace();
        let who = w.next().and_then(|s| s.parse::<usize>().ok());
        let n = w.next().and_then(|s| s.parse::<u64>().ok());
        if let (Some(who), Some(n)) = (who, n) {
            if who < ranks {
                counts[who] = counts[who].max(n);
            }
        }
    }
    counts
}

/// Asserts that `frame verify` finds no damage under `dir` (`what` names
/// the case in the failure).
pub fn assert_no_damage(dir: &Path, what: &str) {
    let tree = catalog::scan(dir).expect("scan");
    let damage: Vec<String> = (catalog::verify(&tree).findings.iter())
        .filter(|f| f.severity == Severity::Damage)
        .map(|f| format!("{}: {}", f.path.display(), f.message))
        .collect();
    assert!(
        damage.is_empty(),
        "{what}: verify reports damage: {damage:#?}"
    );
}
