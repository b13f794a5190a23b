use super::*;
use crate::recovery::cone::{chain, Role};

fn offers(n: usize, failed: &[usize], live: (u64, u64), at: u64) -> Vec<Offer> {
    chain(n)
        .into_iter()
        .enumerate()
        .map(|(r, neighbours)| Offer {
            live: (!failed.contains(&r)).then_some(live),
            checkpoint: Ok(at),
            neighbours,
        })
        .collect()
}

#[test]
fn the_survivors_resume_from_the_oldest_live_iteration() {
    let mut o = offers(12, &[5], (23, 22), 20);
    o[0].live = Some((24, 23));
    let p = plan(&o).unwrap();
    assert_eq!((p.target, p.from, p.failed.clone()), (23, 20, vec![5]));
    assert_eq!(p.cone.role(5), Role::Recompute(3));
    assert_eq!(p.cone.role(4), Role::Recompute(2));
    assert_eq!(p.cone.role(7), Role::Recompute(1));
    assert_eq!(p.cone.role(8), Role::Supply);
    assert_eq!(p.cone.role(9), Role::Idle);
}

#[test]
fn a_survivor_that_cannot_go_back_makes_it_global() {
    let mut o = offers(8, &[3], (23, 22), 20);
    o[6].live = Some((25, 24));
    let e = plan(&o).unwrap_err();
    assert!(e.contains("rank 6 keeps iterations 24 to 25"), "{e}");
}

#[test]
fn a_cone_over_every_rank_makes_it_global() {
    let e = plan(&offers(4, &[1], (30, 29), 20)).unwrap_err();
    assert!(e.contains("covers all 4 ranks"), "{e}");
}

#[test]
fn a_cone_that_leaves_a_rank_supplying_is_not_global() {
    // Chain of 4, rank 1 lost 2 iterations after: 3 only supplies.
    let p = plan(&offers(4, &[1], (22, 21), 20)).unwrap();
    assert_eq!(p.cone.role(3), Role::Supply);
    assert!(p.cone.covers_all() && !p.cone.all_recompute());
}

#[test]
fn checkpoints_of_different_iterations_make_it_global() {
    let mut o = offers(6, &[2], (23, 22), 20);
    o[4].checkpoint = Ok(10);
    assert!(plan(&o).unwrap_err().contains("rank 4's 10"));
    o[4].checkpoint = Err("damaged".into());
    assert!(plan(&o).unwrap_err().contains("rank 4 cannot read"));
}

#[test]
fn every_rank_failed_or_none_kept_data() {
    assert!(plan(&offers(3, &[0, 1, 2], (5, 4), 0)).is_err());
    let p = plan(&offers(5, &[], (7, 6), 4)).unwrap();
    assert!(p.failed.is_empty() && (0..5).all(|r| p.cone.role(r) == Role::Idle));
}

#[test]
fn live_data_older_than_the_checkpoint_makes_it_global() {
    assert!(plan(&offers(6, &[2], (3, 3), 5))
        .unwrap_err()
        .contains("older"));
}
