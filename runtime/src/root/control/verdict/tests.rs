use super::{pick, Report};

fn r(from: u32, lost: u32) -> Report {
    Report {
        from,
        rank: from * 2,
        lost,
        peer: lost * 2,
    }
}

#[test]
fn nothing_reported_gives_up_nothing() {
    assert_eq!(pick(&[]), None);
}

#[test]
fn one_report_gives_up_the_node_reported() {
    let reports = [r(1, 2)];
    assert_eq!(pick(&reports), Some((2, &reports[0])));
}

#[test]
fn two_nodes_that_lost_each_other_give_up_the_one_reported_first() {
    let reports = [r(2, 1), r(1, 2)];
    assert_eq!(pick(&reports).map(|(n, _)| n), Some(1));
    let reports = [r(1, 2), r(2, 1)];
    assert_eq!(pick(&reports).map(|(n, _)| n), Some(2));
}

#[test]
fn a_node_cut_off_from_several_is_given_up_whoever_spoke_first() {
    // Node 3 lost nodes 0 and 2 and they lost it; node 3 spoke first,
    // naming node 0.
    let reports = [r(3, 0), r(0, 3), r(2, 3), r(3, 2)];
    let (node, why) = pick(&reports).unwrap();
    assert_eq!(node, 3);
    assert_eq!(why, &reports[0]);
    // Node 1 alone says it lost two others: it is the odd one out.
    let reports = [r(1, 0), r(1, 2)];
    assert_eq!(pick(&reports).map(|(n, _)| n), Some(1));
}
