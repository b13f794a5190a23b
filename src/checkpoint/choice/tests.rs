//! The restart ceiling's rule.

use super::*;

#[test]
fn the_named_checkpoint_holds_until_the_job_commits_a_newer_one() {
    let mut cfg = Config::default();
    assert_eq!(ceiling(&cfg, None), None);
    cfg.recovery.restart_from = 5;
    assert_eq!(ceiling(&cfg, None), Some(5));
    assert_eq!(ceiling(&cfg, Some(3)), Some(5));
    // Restored: the runtime records the named checkpoint itself.
    assert_eq!(ceiling(&cfg, Some(5)), Some(5));
    assert_eq!(ceiling(&cfg, Some(6)), None);
}
