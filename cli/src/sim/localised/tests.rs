use super::*;

#[test]
fn the_three_recoveries_meet_the_same_failures_and_take_as_long() {
    for seed in 0..5 {
        let setup = Setup::paper(300, Stencil::OneD);
        let [g, c, l] =
            [Rollback::Global, Rollback::Cone, Rollback::Logged].map(|r| run(&setup, r, seed));
        assert!(g.crashes > 0, "{g:?}");
        assert_eq!((g.crashes, g.runtime_s), (c.crashes, c.runtime_s));
        assert_eq!((g.crashes, g.runtime_s), (l.crashes, l.runtime_s));
        assert!(
            g.recomputed > c.recomputed && c.recomputed >= l.recomputed,
            "{g:?} {c:?} {l:?}"
        );
        assert_eq!(g.idle_node_s, 0.0);
        assert!(c.energy_j < g.energy_j && l.energy_j <= c.energy_j);
    }
}

#[test]
fn without_failures_nothing_is_recomputed_and_every_node_computes() {
    let mut setup = Setup::paper(100, Stencil::TwoD);
    setup.node_mtbf_s = f64::INFINITY;
    let o = run(&setup, Rollback::Cone, 1);
    assert_eq!((o.crashes, o.recomputed), (0, 0));
    let runtime = 1000.0 * setup.iteration_s;
    assert!((o.runtime_s - runtime).abs() < 1e-6, "{o:?}");
    assert!((o.energy_j - 125.0 * 100.0 * runtime).abs() < 1e-3, "{o:?}");
}

/// The paper's trends: the localised recoveries recompute about as much
/// per failure at 100 nodes as at 1000 (a one-dimensional cone losing g
/// iterations recomputes g^2 rank-iterations, g spread evenly over 0 to 5:
/// about 9), global rollback N times the lost iterations; the energy saved
/// grows about as N^2; the run time does not change.
#[test]
fn localised_recomputation_stays_flat_while_the_savings_grow_with_the_nodes() {
    let rows = reproduce(Stencil::OneD, 40);
    let at = |n: usize| rows.iter().find(|r| r.nodes == n).unwrap();
    let (small, large) = (at(100), at(1000));
    for i in [1, 2] {
        let (a, b) = (
            small.recomputed_per_crash()[i],
            large.recomputed_per_crash()[i],
        );
        assert!(a / b < 1.5 && b / a < 1.5, "{a} vs {b}");
    }
    let cone = large.recomputed_per_crash()[1];
    assert!((7.0..11.0).contains(&cone), "{cone}");
    assert!(
        large.recomputed_per_crash()[0] > 8.0 * small.recomputed_per_crash()[0],
        "{small:?} {large:?}"
    );
    // 2.7 hours at a system MTBF of 100 h / 1000: about 27 failures.
    assert!((22.0..33.0).contains(&large.crashes), "{large:?}");
    assert!(
        large.saved_j[0] > 50.0 * small.saved_j[0],
        "{small:?} {large:?}"
    );
    for r in &rows {
        assert!(
            r.runtime_s
                .iter()
                .all(|t| (t - r.runtime_s[0]).abs() < 1e-6),
            "{r:?}"
        );
    }
    let a = quadratic_fit(&rows);
    let projected = a * 1024.0 * 1024.0;
    let simulated = at(1024).saved_j[0];
    assert!(
        (projected / simulated - 1.0).abs() < 0.3,
        "{projected} vs {simulated}"
    );
}
