use super::*;

fn groups(nodes: u32, size: u32, parity: u32) -> Groups {
    let placement: Vec<u32> = (0..nodes * 2).map(|r| r / 2).collect();
    Groups::new(&Topology::new(placement).unwrap(), size, parity)
}

#[test]
fn any_node_count_and_group_size_is_accepted() {
    for nodes in 1..=40u32 {
        for size in 2..=MAX_GROUP {
            for parity in 1..size {
                let g = groups(nodes, size, parity);
                // Every node in exactly one group; groups within bounds.
                let mut seen: Vec<u32> = g.all().iter().flat_map(|g| g.nodes.clone()).collect();
                seen.sort_unstable();
                assert_eq!(seen, (0..nodes).collect::<Vec<_>>());
                for group in g.all() {
                    // Larger than asked only when leftovers could not
                    // form a group.
                    let len = group.nodes.len();
                    assert!(
                        len <= size as usize || len < 2 * (parity as usize + 1),
                        "{group:?}"
                    );
                    if nodes > parity {
                        assert!(len > parity as usize, "{group:?}");
                        assert_eq!(group.parity, parity);
                    }
                    for &n in &group.nodes {
                        assert_eq!(g.of(n), Some(group));
                    }
                }
            }
        }
    }
}

#[test]
fn uneven_groups_are_balanced() {
    let sizes = |g: Groups| g.all().iter().map(|g| g.nodes.len()).collect::<Vec<_>>();
    assert_eq!(sizes(groups(5, 4, 1)), vec![3, 2]);
    assert_eq!(sizes(groups(9, 4, 1)), vec![3, 3, 3]);
    // Parity 2 needs three members: 5 nodes make one group.
    assert_eq!(sizes(groups(5, 4, 2)), vec![5]);
}

#[test]
fn groups_follow_the_ranks_to_a_spare() {
    // Node 1 died; its ranks moved to spare node 3.
    let after = Groups::new(&Topology::new(vec![0, 0, 3, 3, 2, 2]).unwrap(), 4, 1);
    assert!(after.of(1).is_none());
    assert_eq!(after.of(3).unwrap().nodes, vec![0, 2, 3]);
}

#[test]
fn a_group_survives_up_to_its_parity_in_losses() {
    let lost = |n: &[u32]| n.iter().copied().collect::<BTreeSet<u32>>();
    let g = groups(6, 3, 1);
    assert!(g.survives(&lost(&[0, 3])));
    assert!(!g.survives(&lost(&[0, 1])));
    // A single node keeps no parity: its loss is not survived.
    let single = groups(1, 4, 1);
    assert_eq!(single.all()[0].parity, 0);
    assert!(!single.survives(&lost(&[0])));
}
