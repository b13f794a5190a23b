use super::*;

#[test]
fn at_the_measured_size_the_projection_gives_the_measurements_back() {
    let m = Measured::test_machine();
    for p in project(&m, m.nodes) {
        let i = usize::from(p.level - 1);
        let (f, b) = (m.frame[i], m.iterative[i]);
        // Fetching is given the mean of both measurements.
        let fetch = (f.fetch_ms + b.fetch_ms) / 2.0;
        assert!((p.frame_ms - (f.identify_ms + fetch)).abs() < 1e-9, "{p:?}");
        assert!(
            (p.iterative_ms - (b.identify_ms + fetch)).abs() < 1e-9,
            "{p:?}"
        );
        let full = m.redeploy_ms + b.identify_ms + fetch + b.load_ms;
        assert!((p.redeploy_iterative_ms - full).abs() < 1e-9);
    }
}

#[test]
fn rounds_make_the_baseline_fall_behind_as_nodes_grow() {
    let m = Measured::test_machine();
    let small = project(&m, 16.0);
    let large = project(&m, 1024.0);
    for l in 1..4 {
        let r = |p: &[Projected; 4]| p[l].frame_ms / p[l].iterative_ms;
        assert!(r(&large) < r(&small), "level {}", l + 1);
    }
    // Redeploying grows linearly, online recovery logarithmically.
    let s = |p: &[Projected; 4]| p[1].redeploy_iterative_ms / p[1].online_frame_ms;
    assert!(s(&large) > 4.0 * s(&small));
}
