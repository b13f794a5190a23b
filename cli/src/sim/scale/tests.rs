use super::*;

fn measured(root: [f64; 3], per_rank: [f64; 3]) -> Measured {
    let ranks = [16.0, 256.0, 1024.0];
    Measured {
        cores: 2.0,
        ranks_per_node: 16.0,
        sizes: (0..3)
            .map(|i| Size {
                ranks: ranks[i],
                kind: Kind::Rank,
                root_cpu_ms: root[i],
                ranks_cpu_ms: per_rank[i] * ranks[i],
                phases: Phases {
                    unwind: ranks[i].sqrt(),
                    ..Phases::default()
                },
                ..Size::default()
            })
            .collect(),
    }
}

#[test]
fn a_line_is_fitted_exactly_and_never_with_negative_terms() {
    let (a, b) = fit(&[(1.0, 3.0), (2.0, 5.0), (4.0, 9.0)]);
    assert!((a - 1.0).abs() < 1e-9 && (b - 2.0).abs() < 1e-9, "{a} {b}");
    // Falling values: no negative slope.
    assert_eq!(fit(&[(1.0, 5.0), (2.0, 3.0)]), (4.0, 0.0));
    // A negative intercept: through the origin instead.
    let (a, b) = fit(&[(1.0, 1.0), (2.0, 3.0), (3.0, 5.0)]);
    assert_eq!(a, 0.0);
    assert!(b > 0.0);
    assert_eq!(fit(&[]), (0.0, 0.0));
}

#[test]
fn the_projection_adds_the_root_one_rank_and_the_path() {
    // Root 1 ms + 0.001 ms per rank; a rank 2 ms + 0.002 ms per rank.
    let m = measured([1.016, 1.256, 2.024], [2.032, 2.512, 4.048]);
    let target = Target {
        nodes: 1024.0,
        ranks_per_node: 32.0,
    };
    let p = project(&m, Kind::Rank, target, 0.02).expect("measured");
    let n = 32768.0;
    assert!((p.root_ms - (1.0 + 0.001 * n)).abs() < 1e-6, "{p:?}");
    assert!((p.rank_ms - (2.0 + 0.002 * n)).abs() < 1e-6, "{p:?}");
    assert_eq!(p.hops, 6.0 + COLLECTIVES * 2.0 * 15.0);
    assert!((p.total_ms - (p.root_ms + p.rank_ms + p.hops * 0.02)).abs() < 1e-9);
    // No node failure was measured.
    assert!(project(&m, Kind::Node, target, 0.02).is_none());
}

#[test]
fn hops_grow_with_the_log_of_the_ranks() {
    assert_eq!(hops(16.0), 6.0 + COLLECTIVES * 8.0);
    assert_eq!(hops(17.0), 6.0 + COLLECTIVES * 10.0);
    assert!(hops(32768.0) < 2.0 * hops(1024.0));
}

#[test]
fn growth_is_the_exponent_over_the_two_largest_sizes() {
    let m = measured([1.0; 3], [1.0; 3]);
    let g = growth(&m, Kind::Rank);
    let (name, ms, k) = &g[1];
    assert_eq!(*name, "unwind");
    assert_eq!(ms.len(), 3);
    assert!((k.expect("grew") - 0.5).abs() < 1e-9, "{g:?}");
    // A phase that took no time has no exponent.
    assert_eq!(g[0].2, None);
}

#[test]
fn paper_000_is_quoted_only_where_it_measured() {
    assert_eq!(paper000(Kind::Rank, 8.0), None);
    assert_eq!(paper000(Kind::Rank, 2048.0), None);
    assert_eq!(paper000(Kind::Rank, 64.0), Some((0.5, Some(0.5), 3.0)));
    let (_, ulfm, _) = paper000(Kind::Rank, 1024.0).expect("measured");
    assert!((ulfm.expect("ulfm") - 1.5).abs() < 1e-9);
    assert_eq!(paper000(Kind::Node, 1024.0), Some((1.5, None, 3.0)));
}

#[test]
fn the_test_machine_figures_cover_both_failures() {
    let m = Measured::test_machine();
    for kind in [Kind::Rank, Kind::Node] {
        let sizes = m.of(kind);
        assert!(sizes.len() >= 3, "{kind:?}");
        assert!(sizes.windows(2).all(|w| w[0].ranks < w[1].ranks));
        assert!(project(&m, kind, TARGETS[5], 0.02).is_some());
    }
    let text = table(&m, 0.02);
    assert!(
        text.contains("32768") && text.contains("Reinit++"),
        "{text}"
    );
}
