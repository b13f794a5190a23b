use super::*;

#[test]
fn the_projection_plot_holds_its_four_series() {
    let svg = projection_svg(&Measured::test_machine()).unwrap();
    assert!(svg.starts_with("<svg"), "{}", &svg[..80.min(svg.len())]);
    for name in [
        "full recovery, online + frame",
        "full recovery, redeploy + iterative",
        "retrieval, frame",
        "retrieval, iterative",
    ] {
        assert!(svg.contains(name), "{name} missing");
    }
    assert!(svg.matches("<polyline").count() >= 4, "four lines");
}

#[test]
fn the_table3_plot_holds_simulated_and_published_lines() {
    let rows = super::super::table3::reproduce(200, 7);
    let svg = table3_svg(&rows).unwrap();
    for name in [
        "coordinated (frame sim)",
        "coordinated (published)",
        "asynchronous, k = 5 (published)",
    ] {
        assert!(svg.contains(name), "{name} missing");
    }
    assert!(svg.matches("<polyline").count() >= 6, "six lines");
}
