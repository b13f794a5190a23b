use super::*;

#[test]
fn cheaper_recoveries_cost_less_overhead_and_the_gap_grows_with_nodes() {
    let job = Job {
        planned: 3600.0,
        step: 0.5,
        mtbf: vec![600.0, 3600.0],
        checkpoint: vec![1.0, 6.0],
    };
    let m = Measured::test_machine();
    let small = compare(&m, 16.0, &job, 2000, 3);
    let large = compare(&m, 1024.0, &job, 2000, 3);
    for rows in [&small, &large] {
        // Same seeds, same failures: only the recovery costs differ.
        assert!(
            rows[0].mean_s <= rows[1].mean_s + rows[1].ci95_s,
            "{rows:?}"
        );
        assert!(rows[1].mean_s < rows[2].mean_s, "{rows:?}");
    }
    let gap = |r: &[Compared]| r[2].mean_s - r[0].mean_s;
    assert!(
        gap(&large) > gap(&small),
        "{} against {}",
        gap(&large),
        gap(&small)
    );
}
