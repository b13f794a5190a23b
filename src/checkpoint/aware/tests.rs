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
                layout: Some(Layout {
                    placement: placement.clone(),
                    group_size: 4,
                    parity: 1,
                }),
            })
            .collect(),
        ..Report::default()
    }
}

#[test]
fn a_node_no_rank_runs_on_is_lost() {
    // Recorded on nodes 0 and 1; node 1's ranks run on spare node 2 now.
    let reports = [report(0, false, &[vec![0, 1]]), report(2, true, &[])];
    let failure = failure_topology(&reports, &Failures::default());
    assert_eq!(failure.nodes, BTreeSet::from([1, 2]));
}

#[test]
fn a_node_a_spare_stood_in_for_lives_on_the_spare() {
    // Spare node 2 stood in for node 1 (the layouts still name node 1, its
    // copies are on node 2); then node 0 died, its ranks now on node 3.
    let stood_in = BTreeMap::from([(1, 2)]);
    let runtime = Failures {
        nodes: vec![0, 1],
        stood_in: stood_in.clone(),
        ..Failures::default()
    };
    let reports = [
        report(3, true, &[]),
        report(2, false, &[vec![0, 1], vec![0, 1]]),
    ];
    let failure = failure_topology(&reports, &runtime);
    assert_eq!(failure.nodes, BTreeSet::from([0, 3]));
    // Once the spare dies too, node 1's storage is gone with it.
    let runtime = Failures {
        nodes: vec![2],
        stood_in,
        ..Failures::default()
    };
    let reports = [report(0, false, &[vec![0, 1]]), report(4, true, &[])];
    let failure = failure_topology(&reports, &runtime);
    assert_eq!(failure.nodes, BTreeSet::from([1, 2, 4]));
}
