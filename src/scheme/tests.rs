use super::*;
use crate::level::Level;
use crate::topology::Layout;

fn four_nodes() -> Topology {
    Topology::new(vec![0, 0, 1, 1, 2, 2, 3, 3]).unwrap()
}

#[test]
fn every_registered_scheme_builds_from_the_rule_it_records() {
    let t = four_nodes();
    for rule in [
        partner::rule(1),
        partner::rule(3),
        reed_solomon::rule(4, 1),
        reed_solomon::rule(3, 2),
        global::rule(),
    ] {
        let p = protection(&t, &rule).unwrap();
        assert_eq!(p.rule(), rule);
        // No scheme loses anything to no loss.
        assert!(p.survives(&BTreeSet::new()), "{rule}");
    }
}

#[test]
fn unknown_schemes_and_parameters_are_refused_by_name() {
    let t = four_nodes();
    let refused = |rule: Rule| protection(&t, &rule).unwrap_err().to_string();
    assert_eq!(
        refused(Rule::new("mirror", [])),
        "unknown redundancy scheme \"mirror\""
    );
    assert_eq!(
        refused(Rule::new("partner", [])),
        "scheme partner: parameter copies is missing"
    );
    assert_eq!(
        refused(Rule::new("partner", [("copies", 0)])),
        "scheme partner: parameter copies is 0, outside 1..=8"
    );
    assert_eq!(
        refused(Rule::new("partner", [("copies", 1), ("spread", 2)])),
        "scheme partner: parameter spread is not one the scheme takes"
    );
    assert_eq!(
        refused(reed_solomon::rule(4, 4)),
        "scheme reed-solomon: parameter parity is 4, outside 1..=3"
    );
    assert_eq!(
        refused(reed_solomon::rule(65, 1)),
        "scheme reed-solomon: parameter group_size is 65, outside 2..=64"
    );
    assert!(refused(Rule::new("global", [("copies", 1)])).contains("copies"));
}

#[test]
fn markers_without_a_rule_read_as_the_rules_of_their_time() {
    let old = Layout {
        placement: vec![0, 1, 2],
        rule: None,
        group_size: Some(3),
        parity: Some(1),
    };
    assert_eq!(recorded(&old, Level::L2), Some(partner::rule(1)));
    assert_eq!(recorded(&old, Level::L3), Some(reed_solomon::rule(3, 1)));
    assert_eq!(recorded(&old, Level::L4), Some(global::rule()));
    assert_eq!(recorded(&old, Level::L1), None);
    // A level-3 marker without its settings is not guessed at.
    let bare = Layout {
        group_size: None,
        ..old.clone()
    };
    assert_eq!(recorded(&bare, Level::L3), None);
    // A recorded rule wins over the level's old one.
    let new = Layout::new(&old.topology().unwrap(), partner::rule(2));
    assert_eq!(recorded(&new, Level::L2), Some(partner::rule(2)));
}

proptest::proptest! {
    /// Any recorded rule on any placement: a protection or an error naming
    /// the scheme or parameter, never a panic; and what it survives is
    /// decided for any loss.
    #[test]
    fn any_rule_is_a_protection_or_an_error(
        scheme in proptest::sample::select(vec!["partner", "reed-solomon", "xor", "global", "mirror"]),
        params in proptest::collection::btree_map(
            proptest::sample::select(vec!["copies", "group_size", "parity", "spread"]),
            proptest::prelude::any::<u64>(),
            0..4,
        ),
        small in proptest::prelude::any::<bool>(),
        placement in proptest::collection::vec(0u32..40, 1..60),
        lost in proptest::collection::btree_set(0u32..45, 0..10),
    ) {
        let params = params
            .into_iter()
            .map(|(k, v)| (k, if small { v % 10 } else { v }))
            .collect::<Vec<_>>();
        let rule = Rule::new(scheme, params);
        let t = Topology::new(placement).unwrap();
        match protection(&t, &rule) {
            Ok(p) => {
                proptest::prop_assert_eq!(p.rule(), rule);
                let _ = p.survives(&lost);
            }
            Err(e) => {
                let text = e.to_string();
                proptest::prop_assert!(text.contains(scheme) || text.contains("parameter"), "{}", text);
            }
        }
    }
}
