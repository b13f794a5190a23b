use super::*;

#[test]
fn the_papers_example_checkpoints_every_minute_and_promotes_every_eleventh() {
    let c = choose(
        &[Level::L1, Level::L2],
        &[1.0 / 1800.0, 1.0 / 36000.0],
        &[1.0, 6.0],
    );
    assert!((c.period.as_secs_f64() - 60.0).abs() < 0.5);
    assert_eq!(c.every, vec![(Level::L2, 11)]);
}

#[test]
fn one_level_follows_youngs_period() {
    // With one level, opt_par is Young's formula: sqrt(2 C M).
    let c = choose(&[Level::L1], &[1.0 / 3600.0], &[2.0]);
    assert!((c.period.as_secs_f64() - (2.0f64 * 2.0 * 3600.0).sqrt()).abs() < 0.01);
    assert!(c.every.is_empty());
}

#[test]
fn costlier_or_rarer_levels_are_promoted_less_often() {
    let levels = [Level::L1, Level::L2, Level::L4];
    let rates = [1.0 / 600.0, 1.0 / 7200.0, 1.0 / 86400.0];
    let c = choose(&levels, &rates, &[0.5, 0.5, 0.5]);
    let k: Vec<u64> = c.every.iter().map(|(_, k)| *k).collect();
    assert!(k[0] > 1 && k[1] > k[0], "{c:?}");
    let dearer = choose(&levels, &rates, &[0.5, 0.5, 20.0]);
    assert!(dearer.every[1].1 > c.every[1].1, "{dearer:?} against {c:?}");
}

#[test]
fn the_period_stays_within_bounds() {
    let c = choose(&[Level::L1], &[1e9], &[1e-9]);
    assert_eq!(c.period, MIN_PERIOD);
    let c = choose(&[Level::L1], &[1e-12], &[1e6]);
    assert_eq!(c.period, MAX_PERIOD);
}

#[test]
fn intervals_converge_on_a_synthetic_cost_and_failure_profile() {
    let levels = vec![Level::L1, Level::L2, Level::L3];
    let mtbf = [
        Duration::from_secs(1800),
        Duration::from_secs(6 * 3600),
        Duration::from_secs(48 * 3600),
    ];
    let truth = [2.0, 5.0, 30.0];
    let mut t = Tuner::new(levels.clone(), &mtbf);
    // Checkpoints whose cost wobbles by +-20 % around the truth, each
    // level in the proportion the current choice promotes it.
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    for n in 1..=400u64 {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let wobble = 0.8 + 0.4 * (rng % 1000) as f64 / 1000.0;
        let every = t.choice().every.clone();
        let highest = every
            .iter()
            .rev()
            .find(|(_, k)| n % k == 0)
            .map_or(Level::L1, |(l, _)| *l);
        let i = levels.iter().position(|l| *l == highest).unwrap();
        t.observe(highest, Duration::from_secs_f64(truth[i] * wobble));
    }
    let rates: Vec<f64> = mtbf.iter().map(|m| 1.0 / m.as_secs_f64()).collect();
    let ideal = choose(&levels, &rates, &truth);
    let got = t.choice();
    let ratio = got.period.as_secs_f64() / ideal.period.as_secs_f64();
    assert!((0.85..1.15).contains(&ratio), "{got:?} against {ideal:?}");
    for ((l, k), (_, ik)) in got.every.iter().zip(&ideal.every) {
        let r = *k as f64 / *ik as f64;
        assert!((0.7..1.4).contains(&r), "{l}: every {k} against {ik}");
    }
}

#[test]
fn a_first_checkpoint_at_every_level_measures_them_all() {
    let mut t = Tuner::new(
        vec![Level::L1, Level::L2, Level::L4],
        &[
            Duration::from_secs(1),
            Duration::from_secs(2),
            Duration::from_secs(8),
        ],
    );
    let assumed = t.choice().period;
    let moved = t
        .observe(Level::L4, Duration::from_millis(50))
        .cloned()
        .expect("a new choice");
    assert_eq!(t.estimates(), vec![0.05, 0.05, 0.05]);
    // Costs 20x smaller: a period about sqrt(20) ~ 4.5x shorter.
    let ratio = assumed.as_secs_f64() / moved.period.as_secs_f64();
    assert!((4.0..5.0).contains(&ratio), "{ratio}");
    // A cheaper level-1 checkpoint measured later takes over below.
    t.observe(Level::L1, Duration::from_millis(10));
    assert_eq!(t.estimates(), vec![0.01, 0.01, 0.05]);
}

#[test]
fn a_count_near_a_rounding_boundary_does_not_flip() {
    let levels = vec![Level::L1, Level::L2];
    let mtbf = [Duration::from_secs(100), Duration::from_secs(1000)];
    let mut t = Tuner::new(levels, &mtbf);
    // L2 every sqrt(10 * c2 / c1): with c2 / c1 = 0.62 that is 2.49,
    // rounded to 2; the running estimate wobbling across 2.5 (70 ms
    // alone takes it to 2.53) must not change it.
    t.observe(Level::L1, Duration::from_millis(100));
    t.observe(Level::L2, Duration::from_millis(40));
    for _ in 0..40 {
        t.observe(Level::L2, Duration::from_millis(62));
    }
    let k = t.choice().every[0].1;
    assert_eq!(k, 2);
    for c in [70u64, 55, 72, 54, 75, 52] {
        t.observe(Level::L2, Duration::from_millis(c));
        assert_eq!(t.choice().every[0].1, k, "after {c} ms");
    }
    // A real move (L2 now as dear as L1: every 3.2) changes it.
    for _ in 0..20 {
        t.observe(Level::L2, Duration::from_millis(100));
    }
    assert_eq!(t.choice().every[0].1, 3);
}

#[test]
fn a_level_not_measured_yet_costs_what_the_one_below_does() {
    let mut t = Tuner::new(
        vec![Level::L1, Level::L2],
        &[Duration::from_secs(600), Duration::from_secs(6000)],
    );
    t.observe(Level::L1, Duration::from_secs(3));
    assert_eq!(t.estimates(), vec![3.0, 3.0]);
    t.observe(Level::L2, Duration::from_secs(9));
    assert_eq!(t.estimates(), vec![3.0, 9.0]);
}
