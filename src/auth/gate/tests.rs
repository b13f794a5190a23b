use super::*;

#[test]
fn a_full_gate_drops_its_oldest_handshake_never_the_newest() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let gate = Gate::default();
        let mut held: Vec<Pass> = (0..MAX_PENDING).map(|_| gate.admit()).collect();
        assert_eq!(gate.pending(), MAX_PENDING);
        let mut newest = gate.admit();
        assert_eq!(gate.pending(), MAX_PENDING);
        // The oldest lost its place; the newest and the others hold.
        assert_eq!(held[0].hold(std::future::pending::<()>()).await, None);
        assert_eq!(newest.hold(async { 7 }).await, Some(7));
        assert_eq!(held[1].hold(async { 8 }).await, Some(8));
        drop(held);
        drop(newest);
        assert_eq!(gate.pending(), 0);
    });
}
