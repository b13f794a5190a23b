use super::*;
use crate::config::Interval;

#[test]
fn only_the_levels_on_count() {
    let mut cfg = Config::default();
    let data = NodeData {
        own: 100,
        partner: 50,
        largest_blob: 300,
        group: 4,
    };
    let k1 = cfg.retention.keep_last as u64;
    let l1_only = cfg.storage_need(data);
    assert_eq!(l1_only.total(), (k1 + 1) * 100);
    cfg.l2.interval = Interval::Calls(1);
    cfg.l3.interval = Interval::Calls(2);
    let all = cfg.storage_need(data);
    let q = cfg.manager.queue as u64;
    let (k2, k3) = (cfg.l2.keep_last as u64, cfg.l3.keep_last as u64);
    assert_eq!(all.own, (k1.max(q + 2) + 1 + k2 + k3) * 100);
    assert_eq!(all.partner, (k2 + q + 2) * 50);
    // 300 bytes over 3 data shards: pieces of 128 bytes (64-aligned).
    assert_eq!(all.parity, (k3 + q + 2) * 128);
}
