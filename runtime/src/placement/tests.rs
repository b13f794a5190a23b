use super::*;

fn nodes(alive: &[bool], slots: usize) -> Vec<NodeSlots> {
    alive
        .iter()
        .enumerate()
        .map(|(i, &a)| NodeSlots {
            id: i as u32,
            alive: a,
            slots,
        })
        .collect()
}

#[test]
fn a_soft_failure_respawns_on_the_same_node() {
    let (p, spawn) = place(&nodes(&[true, true, true], 2), &[0, 0, 1, 1], &[3]).unwrap();
    assert_eq!(p, vec![0, 0, 1, 1]);
    assert_eq!(spawn, BTreeMap::from([(1, vec![3])]));
}

#[test]
fn a_dead_node_moves_to_the_empty_spare() {
    // Nodes 0, 1 busy; node 2 is a spare; node 1 dies.
    let (p, spawn) = place(&nodes(&[true, false, true], 2), &[0, 0, 1, 1], &[]).unwrap();
    assert_eq!(p, vec![0, 0, 2, 2]);
    assert_eq!(spawn, BTreeMap::from([(2, vec![2, 3])]));
}

#[test]
fn two_dead_nodes_take_two_spares() {
    let (p, spawn) = place(
        &nodes(&[false, true, false, true, true], 2),
        &[0, 0, 1, 1, 2, 2],
        &[],
    )
    .unwrap();
    assert_eq!(p, vec![3, 3, 1, 1, 4, 4]);
    assert_eq!(spawn, BTreeMap::from([(3, vec![0, 1]), (4, vec![4, 5])]));
}

#[test]
fn ranks_spread_when_no_single_node_has_room() {
    // Node 2 died with two ranks; nodes 0 and 1 have one free slot each.
    let (p, spawn) = place(&nodes(&[true, true, false], 3), &[0, 0, 1, 1, 2, 2], &[]).unwrap();
    assert_eq!(p, vec![0, 0, 1, 1, 0, 1]);
    assert_eq!(spawn, BTreeMap::from([(0, vec![4]), (1, vec![5])]));
}

#[test]
fn no_room_names_the_node_and_ranks() {
    let err = place(&nodes(&[true, false], 2), &[0, 0, 1, 1], &[]).unwrap_err();
    assert_eq!(
        err,
        NoRoom {
            node: 1,
            ranks: vec![2, 3]
        }
    );
}

#[test]
fn a_soft_failure_and_a_dead_node_together() {
    let (p, spawn) = place(&nodes(&[true, false, true], 2), &[0, 0, 1, 1], &[0]).unwrap();
    assert_eq!(p, vec![0, 0, 2, 2]);
    assert_eq!(spawn, BTreeMap::from([(0, vec![0]), (2, vec![2, 3])]));
}
