use super::*;

#[test]
fn specs_parse_and_print_back() {
    for spec in [
        "rank:3@2s",
        "node:1,2@500ms",
        "rank:0@iter=50",
        "node:1@iter=7",
        "rank:2@reinit=1",
        "node:3@reinit=1",
        "rank:3@2s:stop",
        "node:1@iter=9:stop",
    ] {
        let i: Injection = spec.parse().unwrap();
        assert_eq!(i.to_string(), spec);
    }
    let i: Injection = "node:1,2@3s".parse().unwrap();
    assert_eq!(i.target, Target::Nodes(vec![1, 2]));
    assert_eq!(i.trigger, Trigger::After(Duration::from_secs(3)));
    assert_eq!(i.action, Action::Kill);
    let s: Injection = "rank:3@iter=4:stop".parse().unwrap();
    assert_eq!((s.trigger, s.action), (Trigger::Iteration(4), Action::Stop));
}

#[test]
fn bad_specs_say_what_is_wrong() {
    for (spec, want) in [
        ("rank3@2s", "missing `rank:`"),
        ("rank:3", "missing `@`"),
        ("cpu:1@2s", "`rank` or `node`"),
        ("rank:x@2s", "numbers"),
        ("rank:1@soon", "bad injection `rank:1@soon`"),
        ("rank:1@reinit=0", "numbered from 1"),
    ] {
        let e = spec.parse::<Injection>().unwrap_err();
        assert!(e.contains(want), "{spec}: {e}");
    }
}

#[test]
fn iteration_triggers_match_rank_or_node() {
    let r: Injection = "rank:3@iter=5".parse().unwrap();
    assert!(r.fires_at(3, 0, 5) && !r.fires_at(3, 0, 6) && !r.fires_at(2, 0, 5));
    let n: Injection = "node:1@iter=5".parse().unwrap();
    assert!(n.fires_at(2, 1, 5) && !n.fires_at(2, 0, 5));
}
