use super::*;

fn partners(placement: Vec<u32>, copies: u32) -> Partners {
    Partners::new(&Topology::new(placement).unwrap(), copies)
}

fn lost(nodes: &[u32]) -> BTreeSet<u32> {
    nodes.iter().copied().collect()
}

#[test]
fn copies_go_to_the_next_nodes_holding_ranks_and_wrap() {
    // Ranks 0-1 on node 0, 2-3 on node 1, 4 on node 5, 5 on node 7.
    let p = partners(vec![0, 0, 1, 1, 5, 7], 1);
    assert_eq!(p.of(0), vec![1]);
    assert_eq!(p.of(5), vec![7]);
    assert_eq!(p.of(7), vec![0]);
    assert_eq!(p.of(3), Vec::<u32>::new());
    let p = partners(vec![0, 0, 1, 1, 5, 7], 2);
    assert_eq!(p.of(5), vec![7, 0]);
    assert_eq!(p.of(7), vec![0, 1]);
    // More copies than other nodes: one on each.
    let p = partners(vec![3, 4, 5], 8);
    assert_eq!(p.of(4), vec![5, 3]);
    // A single node has nowhere to copy to.
    assert_eq!(partners(vec![4, 4], 1).of(4), Vec::<u32>::new());
}

#[test]
fn every_node_is_a_holder_of_exactly_k_others() {
    for nodes in 1..=12u32 {
        for copies in 1..=MAX_COPIES {
            let p = partners((0..nodes).map(|n| n * 3).collect(), copies);
            let k = copies.min(nodes - 1) as usize;
            let mut held = std::collections::BTreeMap::<u32, usize>::new();
            for n in 0..nodes {
                let of = p.of(n * 3);
                assert_eq!(of.len(), k);
                assert!(!of.contains(&(n * 3)));
                for h in of {
                    *held.entry(h).or_default() += 1;
                }
            }
            assert!(held.values().all(|c| *c == k), "{nodes} nodes, {copies}");
        }
    }
}

#[test]
fn a_node_survives_while_it_or_one_of_its_holders_does() {
    let one = partners(vec![0, 1, 2, 3], 1);
    assert!(one.survives(&lost(&[0, 2])));
    assert!(!one.survives(&lost(&[0, 1])));
    // Nodes outside the placement do not matter.
    assert!(one.survives(&lost(&[9])));
    let two = partners(vec![0, 1, 2, 3], 2);
    assert!(two.survives(&lost(&[0, 1])));
    assert!(!two.survives(&lost(&[0, 1, 2])));
    assert!(!partners(vec![4], 1).survives(&lost(&[4])));
}
