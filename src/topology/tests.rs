use super::*;

#[test]
fn nodes_are_the_placements_distinct_ids_ascending() {
    let t = Topology::new(vec![5, 0, 0, 9, 5]).unwrap();
    assert_eq!(t.nodes(), &[0, 5, 9]);
    assert_eq!(t.ranks_on(5), vec![0, 4]);
    assert_eq!(t.node_of(3), Some(9));
    assert_eq!(t.node_of(5), None);
    assert_eq!(Topology::new(vec![]), Err(TopologyError::Empty));
}

#[test]
fn a_layout_records_its_rule_and_reads_older_markers() {
    let t = Topology::new(vec![0, 0, 1]).unwrap();
    let layout = Layout::new(&t, Rule::new("partner", [("copies", 2)]));
    let text = serde_json::to_string(&layout).unwrap();
    assert_eq!(
        text,
        r#"{"placement":[0,0,1],"rule":{"scheme":"partner","params":{"copies":2}}}"#
    );
    assert_eq!(serde_json::from_str::<Layout>(&text).unwrap(), layout);
    // A marker written before rules were recorded.
    let old: Layout =
        serde_json::from_str(r#"{"placement":[0,1],"group_size":4,"parity":1}"#).unwrap();
    assert_eq!(
        (old.rule, old.group_size, old.parity),
        (None, Some(4), Some(1))
    );
    // Unknown fields are refused, in the layout and in the rule.
    assert!(serde_json::from_str::<Layout>(r#"{"placement":[0],"x":1}"#).is_err());
    assert!(serde_json::from_str::<Rule>(r#"{"scheme":"partner","k":1}"#).is_err());
    assert_eq!(
        Rule::new("reed-solomon", [("group_size", 4), ("parity", 1)]).to_string(),
        "reed-solomon group_size=4, parity=1"
    );
}
