use super::*;
use crate::topology::Layout;

/// A rank's report on `node`: the commit markers it read, with the
/// placement each recorded.
fn report(node: u32, empty: bool, layouts: &[Vec<u32>]) -> Report {
    Report {
        node,
        empty,
        commits: (layouts.iter().enumerate())
            .map(|(i, placement)| Commit {
                job_id: "j".into(),
                checkpoint_id: i as u64 + 1,
                level: 2,
                stamp: 1,
                layout: Some(Layout::new(
                    &Topology::new(placement.clone()).unwrap(),
                    crate::scheme::partner::rule(1),
                )),
            })
            .collect(),
        ..Report::default()
    }
}

#[test]
fn a_node_no_rank_runs_on_is_lost() {
    // Recorded on nodes 0 and 1; node 1's ranks run on spare node 2 now.
    let reports = [report(0, false, &[vec![0, 1]]), report(2, true, &[])];
    let failure = failure_topology(&reports, &RecoveryContext::default());
    assert_eq!(failure.nodes, BTreeSet::from([1, 2]));
}

#[test]
fn a_node_a_spare_stood_in_for_lives_on_the_spare() {
    // Spare node 2 stood in for node 1 (the layouts still name node 1, its
    // copies are on node 2); then node 0 died, its ranks now on node 3.
    let stood_in = BTreeMap::from([(1, 2)]);
    let runtime = RecoveryContext {
        failed: FailureTopology::of_nodes([0, 1]),
        stood_in: stood_in.clone(),
        ..RecoveryContext::default()
    };
    let reports = [
        report(3, true, &[]),
        report(2, false, &[vec![0, 1], vec![0, 1]]),
    ];
    let failure = failure_topology(&reports, &runtime);
    assert_eq!(failure.nodes, BTreeSet::from([0, 3]));
    // Once the spare dies too, node 1's storage is gone with it.
    let runtime = RecoveryContext {
        failed: FailureTopology::of_nodes([2]),
        stood_in,
        ..RecoveryContext::default()
    };
    let reports = [report(0, false, &[vec![0, 1]]), report(4, true, &[])];
    let failure = failure_topology(&reports, &runtime);
    assert_eq!(failure.nodes, BTreeSet::from([1, 2, 4]));
}

/// A report on `node` holding the given markers.
fn holding(node: u32, commits: Vec<Commit>) -> Report {
    Report {
        node,
        commits,
        ..Report::default()
    }
}

fn marker(level: u8, id: u64, layout: Option<Layout>) -> Commit {
    Commit {
        job_id: "j".into(),
        checkpoint_id: id,
        level,
        stamp: id,
        layout,
    }
}

fn chosen(reports: &[Report], lost: &[u32]) -> Option<(Level, u64)> {
    let placement: Vec<u32> = reports.iter().map(|r| r.node).collect();
    let failure = FailureTopology::of_nodes(lost.iter().copied());
    plan(&failure, &committed(reports, &placement), &[]).map(|c| (c.level, c.id))
}

#[test]
fn each_marker_is_planned_under_the_rule_it_records() {
    let four = Topology::new(vec![0, 1, 2, 3]).unwrap();
    // Checkpoint 1 at level 2 with one partner, checkpoint 2 with two.
    let one = Layout::new(&four, crate::scheme::partner::rule(1));
    let two = Layout::new(&four, crate::scheme::partner::rule(2));
    let reports: Vec<Report> = (0..4)
        .map(|n| {
            holding(
                n,
                vec![
                    marker(2, 1, Some(one.clone())),
                    marker(2, 2, Some(two.clone())),
                ],
            )
        })
        .collect();
    // Node 1 and its first partner lost: only two copies survive it.
    assert_eq!(chosen(&reports, &[1, 2]), Some((Level::L2, 2)));
    // Three neighbours lost: neither.
    assert_eq!(chosen(&reports, &[1, 2, 3]), None);
}

#[test]
fn markers_from_before_rules_are_planned_under_the_rules_of_their_time() {
    let old = |group_size, parity| Layout {
        placement: vec![0, 1, 2, 3],
        rule: None,
        group_size: Some(group_size),
        parity: Some(parity),
    };
    let reports: Vec<Report> = (0..4)
        .map(|n| {
            holding(
                n,
                vec![marker(2, 1, Some(old(4, 1))), marker(3, 2, Some(old(4, 2)))],
            )
        })
        .collect();
    // One partner: node 1 alone is survived at level 2.
    assert_eq!(chosen(&reports, &[1]), Some((Level::L3, 2)));
    // Partners 1 and 2 lost: level 2 is out, the group of four with two
    // parity keeps checkpoint 2.
    assert_eq!(chosen(&reports, &[1, 2]), Some((Level::L3, 2)));
    assert_eq!(chosen(&reports, &[0, 1, 2]), None);
    // Level 4 without any layout follows no placement.
    let global = [holding(0, vec![marker(4, 3, None)]), holding(1, vec![])];
    assert_eq!(chosen(&global, &[0, 1]), Some((Level::L4, 3)));
}

#[test]
fn a_marker_whose_rule_this_build_cannot_read_is_passed_over() {
    let four = Topology::new(vec![0, 1, 2, 3]).unwrap();
    let unknown = Layout::new(&four, Rule::new("mirror", [("copies", 3)]));
    let bad = Layout::new(&four, Rule::new("partner", [("copies", 99)]));
    let known = Layout::new(&four, crate::scheme::partner::rule(1));
    let reports: Vec<Report> = (0..4)
        .map(|n| {
            holding(
                n,
                vec![
                    marker(2, 1, Some(known.clone())),
                    marker(2, 2, Some(unknown.clone())),
                    marker(2, 3, Some(bad.clone())),
                ],
            )
        })
        .collect();
    assert_eq!(chosen(&reports, &[1]), Some((Level::L2, 1)));
}

#[test]
fn a_checkpoint_promoted_again_under_a_new_layout_counts_under_both() {
    // Checkpoint 5 protected on nodes 0-3, then (after node 1's ranks
    // moved to spare node 9) promoted again; node 1's old storage held the
    // first layout's marker, the spare the second's.
    let before = Layout::new(
        &Topology::new(vec![0, 1, 2, 3]).unwrap(),
        crate::scheme::partner::rule(1),
    );
    let after = Layout::new(
        &Topology::new(vec![0, 9, 2, 3]).unwrap(),
        crate::scheme::partner::rule(1),
    );
    let reports = [
        holding(0, vec![marker(2, 5, Some(before.clone()))]),
        holding(9, vec![marker(2, 5, Some(after.clone()))]),
        holding(
            2,
            vec![marker(2, 5, Some(before)), marker(2, 5, Some(after))],
        ),
        holding(3, vec![]),
    ];
    // Nodes 0 and 1 lost: under the first layout node 0's partner was
    // node 1, gone too; under the second it is node 2, which lives. The
    // first marker seen no longer decides alone.
    assert_eq!(chosen(&reports, &[0, 1]), Some((Level::L2, 5)));
    let placement: Vec<u32> = reports.iter().map(|r| r.node).collect();
    assert_eq!(committed(&reports, &placement).len(), 2);
}
