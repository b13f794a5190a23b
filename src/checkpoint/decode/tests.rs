use super::*;

#[test]
fn windows_cover_a_shard_exactly() {
    for piece in [1, WINDOW - 1, WINDOW, WINDOW + 1, 3 * WINDOW + 64] {
        let w: Vec<_> = windows(piece).collect();
        assert_eq!(w.iter().map(|(_, n)| *n as u64).sum::<u64>(), piece);
        assert!(w.windows(2).all(|p| p[0].0 + p[0].1 as u64 == p[1].0));
    }
}
