use super::*;

fn copy(id: u64, rank: u32, stamp: u64) -> Copy {
    Copy { id, rank, stamp }
}

#[test]
fn a_lost_node_is_restored_from_its_partner() {
    // Ranks 0,1 on node A (lost, now empty); ranks 2,3 on node B, which
    // keeps A's copies; C keeps B's.
    let offers = vec![
        Offer::default(),
        Offer::default(),
        Offer {
            node: 1,
            own: vec![(4, 9), (5, 10)],
            copies: vec![copy(4, 0, 9), copy(4, 1, 9), copy(5, 0, 10), copy(5, 1, 10)],
            committed: vec![],
        },
        Offer {
            node: 1,
            own: vec![(4, 9), (5, 10)],
            ..Offer::default()
        },
    ];
    let p = plan(&offers, &[]).unwrap();
    assert_eq!((p.id, p.stamp), (5, 10));
    // Node 1's two ranks share the sending.
    assert_eq!(p.fetch, vec![(0, 2), (1, 3)]);
}

#[test]
fn the_ranks_of_the_keeping_node_take_turns_sending() {
    // Node 0 (ranks 0-2) lost; node 1 keeps its copies and has two ranks.
    let mut offers = vec![Offer::default(); 3];
    offers.push(Offer {
        node: 1,
        own: vec![(2, 7)],
        copies: (0..3).map(|r| copy(2, r, 7)).collect(),
        committed: vec![],
    });
    offers.push(Offer {
        node: 1,
        own: vec![(2, 7)],
        ..Offer::default()
    });
    let p = plan(&offers, &[]).unwrap();
    assert_eq!(p.fetch, vec![(0, 3), (1, 4), (2, 3)]);
}

#[test]
fn the_newest_complete_checkpoint_wins_and_stamps_must_match() {
    let offers = vec![
        Offer {
            own: vec![(7, 1)],
            ..Offer::default()
        },
        Offer {
            node: 1,
            // Checkpoint 7 of another attempt: not the same checkpoint.
            own: vec![(6, 5)],
            copies: vec![copy(7, 1, 2), copy(6, 0, 5)],
            committed: vec![],
        },
    ];
    let p = plan(&offers, &[]).unwrap();
    assert_eq!((p.id, p.stamp), (6, 5));
    assert_eq!(p.fetch, vec![(0, 1)]);
    assert_eq!(plan(&[Offer::default(), Offer::default()], &[]), None);
    // Once 6 failed to arrive, nothing older is complete.
    assert_eq!(plan(&offers, &[6]), None);
}

#[test]
fn a_copy_on_another_node_is_preferred_to_the_ranks_own_node() {
    // Rank 1's level-1 file is damaged; node 0 (rank 0) keeps its own
    // ranks' copies as names of the same files, node 1 (rank 2) a copy.
    let offers = vec![
        Offer {
            own: vec![(3, 1)],
            copies: vec![copy(3, 0, 1), copy(3, 1, 1)],
            ..Offer::default()
        },
        Offer::default(),
        Offer {
            node: 1,
            own: vec![(3, 1)],
            copies: vec![copy(3, 0, 1), copy(3, 1, 1)],
            committed: vec![],
        },
    ];
    assert_eq!(plan(&offers, &[]).unwrap().fetch, vec![(1, 2)]);
    // Without one elsewhere, the own node's copy is used.
    let mut only_own = offers.clone();
    only_own[2].copies.clear();
    assert_eq!(plan(&only_own, &[]).unwrap().fetch, vec![(1, 0)]);
}

#[test]
fn a_copy_counts_when_any_node_committed_its_checkpoint() {
    // Node 1 wrote the marker of checkpoint 8 (stamp 3); node 0, whose
    // copies of it are whole, was killed before writing its own, and
    // its older checkpoint 6 is committed there only. A half-written
    // checkpoint 9 is committed nowhere.
    let mut offers = vec![
        Offer {
            node: 0,
            copies: vec![copy(8, 1, 3), copy(6, 1, 2), copy(9, 1, 4)],
            committed: vec![(6, 2)],
            ..Offer::default()
        },
        Offer {
            node: 1,
            copies: vec![copy(8, 0, 3), copy(9, 0, 4)],
            committed: vec![(8, 3)],
            ..Offer::default()
        },
    ];
    retain_committed(&mut offers);
    assert_eq!(offers[0].copies, vec![copy(8, 1, 3), copy(6, 1, 2)]);
    assert_eq!(offers[1].copies, vec![copy(8, 0, 3)]);
    let p = plan(&offers, &[]).unwrap();
    assert_eq!((p.id, p.stamp), (8, 3));
    assert_eq!(p.fetch, vec![(0, 1), (1, 0)]);
    // A marker of another attempt of checkpoint 8 does not commit it.
    offers[1].committed = vec![(8, 5)];
    offers[0].copies.push(copy(9, 1, 4));
    retain_committed(&mut offers);
    assert!(offers.iter().all(|o| o.copies.iter().all(|c| c.id == 6)));
}
