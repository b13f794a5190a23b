use super::*;

fn check(t: &Topology, size: u32, parity: u32) {
    // Every node in exactly one group; groups within bounds.
    let mut seen: Vec<u32> = t.groups().iter().flat_map(|g| g.nodes.clone()).collect();
    seen.sort_unstable();
    assert_eq!(seen, t.nodes());
    for g in t.groups() {
        // Larger than asked only when leftovers could not form a group.
        let len = g.nodes.len();
        assert!(
            len <= size as usize || len < 2 * (parity as usize + 1),
            "{g:?}"
        );
        if t.nodes().len() > parity as usize {
            assert!(g.nodes.len() > parity as usize, "{g:?}");
            assert_eq!(g.parity, parity);
        }
    }
    // Partners: a permutation without fixed points (beyond one node).
    for &n in t.nodes() {
        if let Some(p) = t.partner(n) {
            assert_ne!(p, n);
            assert_eq!(t.partner_of(p), Some(n));
        } else {
            assert_eq!(t.nodes().len(), 1);
        }
    }
}

#[test]
fn any_node_count_and_group_size_is_accepted() {
    for nodes in 1..=40u32 {
        for size in 2..=MAX_GROUP {
            for parity in 1..size {
                let placement: Vec<u32> = (0..nodes * 2).map(|r| r / 2).collect();
                let t = Topology::new(placement, size, parity).unwrap();
                check(&t, size, parity);
            }
        }
    }
}

#[test]
fn uneven_groups_are_balanced() {
    let t = Topology::new((0..5).collect(), 4, 1).unwrap();
    let sizes: Vec<usize> = t.groups().iter().map(|g| g.nodes.len()).collect();
    assert_eq!(sizes, vec![3, 2]);
    let t = Topology::new((0..9).collect(), 4, 1).unwrap();
    let sizes: Vec<usize> = t.groups().iter().map(|g| g.nodes.len()).collect();
    assert_eq!(sizes, vec![3, 3, 3]);
    // Parity 2 needs three members: 5 nodes make one group.
    let t = Topology::new((0..5).collect(), 4, 2).unwrap();
    assert_eq!(t.groups().len(), 1);
}

#[test]
fn the_topology_follows_ranks_to_a_spare() {
    let before = Topology::new(vec![0, 0, 1, 1, 2, 2], 4, 1).unwrap();
    assert_eq!(before.partner(1), Some(2));
    // Node 1 died; its ranks moved to spare node 3.
    let after = Topology::new(vec![0, 0, 3, 3, 2, 2], 4, 1).unwrap();
    assert_eq!(after.nodes(), &[0, 2, 3]);
    assert_eq!(after.partner(0), Some(2));
    assert_eq!(after.partner(3), Some(0));
    assert_eq!(after.partner_of(0), Some(3));
    assert!(after.group_of(1).is_none());
    assert_eq!(after.ranks_on(3), vec![2, 3]);
}

#[test]
fn a_single_node_protects_nothing_and_bad_settings_are_named() {
    let t = Topology::new(vec![4, 4], 4, 1).unwrap();
    assert_eq!(t.partner(4), None);
    assert!(!t.protects_nodes());
    assert_eq!(t.groups()[0].parity, 0);
    assert!(matches!(
        Topology::new(vec![0], 4, 4),
        Err(TopologyError::Settings { .. })
    ));
    assert_eq!(Topology::new(vec![], 4, 1), Err(TopologyError::Empty));
}
