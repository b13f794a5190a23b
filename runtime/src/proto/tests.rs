use super::*;
use std::path::PathBuf;

fn at(name: &str) -> Endpoint {
    Endpoint::Unix(PathBuf::from(format!("/run/{name}.sock")))
}

#[test]
fn changes_turn_the_old_table_into_the_new_one() {
    let old = vec![at("a"), at("b"), at("c")];
    let new = vec![at("a"), at("b2"), at("c")];
    let changes = Table::changes(&old, &new).expect("same ranks");
    assert_eq!(changes, vec![(1, at("b2"))]);
    let held = Arc::new(old.clone());
    let applied = Table::Changed(changes).apply(Some(&held)).expect("applies");
    assert_eq!(*applied, new);
    // Nothing changed: the same table, not a copy.
    let same = Table::Changed(Vec::new())
        .apply(Some(&held))
        .expect("applies");
    assert!(Arc::ptr_eq(&same, &held));
    // A table of another size is sent whole.
    assert_eq!(Table::changes(&old, &new[..2]), None);
}

#[test]
fn changes_need_a_table_that_has_their_ranks() {
    assert!(Table::Changed(vec![(0, at("a"))]).apply(None).is_none());
    let held = Arc::new(vec![at("a")]);
    assert!(Table::Changed(vec![(1, at("b"))])
        .apply(Some(&held))
        .is_none());
    // An empty change list without a table has nothing to give.
    assert!(Table::Changed(Vec::new()).apply(None).is_none());
    // A whole table needs nothing held.
    let full = Table::Full(vec![at("x")]).apply(None).expect("whole");
    assert_eq!(*full, vec![at("x")]);
}
