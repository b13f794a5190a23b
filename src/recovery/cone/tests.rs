use super::*;

#[test]
fn on_a_chain_the_cone_widens_by_one_rank_each_side_per_lost_iteration() {
    let c = Cone::new(&chain(20), &[10], 3).unwrap();
    assert_eq!(c.role(10), Role::Recompute(3));
    assert_eq!(
        (c.role(9), c.role(11)),
        (Role::Recompute(2), Role::Recompute(2))
    );
    assert_eq!(
        (c.role(8), c.role(12)),
        (Role::Recompute(1), Role::Recompute(1))
    );
    assert_eq!((c.role(7), c.role(13)), (Role::Supply, Role::Supply));
    assert_eq!((c.role(6), c.role(14)), (Role::Idle, Role::Idle));
    // g^2 rank-iterations: 3 + 2 * (2 + 1).
    assert_eq!(c.recomputed(), 9);
    assert_eq!(c.involved(), 7);
    assert!(!c.covers_all());
}

#[test]
fn the_chain_ends_clip_the_cone() {
    let c = Cone::new(&chain(5), &[0], 3).unwrap();
    let roles: Vec<Role> = (0..5).map(|r| c.role(r)).collect();
    assert_eq!(
        roles,
        [
            Role::Recompute(3),
            Role::Recompute(2),
            Role::Recompute(1),
            Role::Supply,
            Role::Idle
        ]
    );
}

#[test]
fn on_a_grid_the_cone_is_a_diamond() {
    let g = 4;
    let c = Cone::new(&grid(21, 21), &[10 * 21 + 10], g).unwrap();
    // Ranks within Manhattan distance g: 2g(g+1) + 1.
    assert_eq!(c.involved() as u32, 2 * g * (g + 1) + 1);
    // Distance d holds 4d ranks, each recomputing g - d iterations.
    let expected: u32 = g + (1..g).map(|d| 4 * d * (g - d)).sum::<u32>();
    assert_eq!(c.recomputed(), u64::from(expected));
}

#[test]
fn nothing_lost_means_only_the_failed_rank_restores() {
    let c = Cone::new(&chain(8), &[3], 0).unwrap();
    assert_eq!(c.role(3), Role::Recompute(0));
    assert_eq!(c.role(2), Role::Idle);
    assert_eq!(c.recomputed(), 0);
    assert_eq!(c.involved(), 1);
}

#[test]
fn several_failures_share_one_cone() {
    let c = Cone::new(&chain(12), &[2, 4], 2).unwrap();
    // Rank 3 sits between both: distance 1.
    assert_eq!(c.role(3), Role::Recompute(1));
    assert_eq!(c.involved(), 7);
}

#[test]
fn global_dependencies_cover_every_rank() {
    let all: Vec<Vec<usize>> = (0..6)
        .map(|r| (0..6).filter(|n| *n != r).collect())
        .collect();
    assert!(Cone::new(&all, &[0], 1).unwrap().covers_all());
}

#[test]
fn bad_graphs_and_ranks_are_named() {
    let err = Cone::new(&[vec![1], vec![5]], &[0], 1).unwrap_err();
    assert_eq!(
        err.to_string(),
        "rank 1 names neighbour 5, but the job has ranks 0 to 1"
    );
    let err = Cone::new(&chain(3), &[7], 1).unwrap_err();
    assert_eq!(
        err.to_string(),
        "failed rank 7 is not a rank of this 3-rank job"
    );
}
