use super::*;

fn names(hosts: &[Host]) -> Vec<&str> {
    hosts.iter().map(|h| h.name.as_str()).collect()
}

#[test]
fn a_list_gives_names_and_slots() {
    let h = parse_list("a:4, b ,10.0.0.3:2").unwrap();
    assert_eq!(names(&h), ["a", "b", "10.0.0.3"]);
    assert_eq!(
        h.iter().map(|h| h.slots).collect::<Vec<_>>(),
        [Some(4), None, Some(2)]
    );
}

#[test]
fn bad_lists_name_what_is_wrong() {
    for (list, says) in [
        ("", "no hosts"),
        ("a,a", "listed twice"),
        ("a:0", "slots `0`"),
        ("a:x", "slots `x`"),
        ("-oProxyCommand=x", "not a host name"),
        ("a b", "not a host name"),
        ("a:99999", "between 1 and"),
    ] {
        let e = parse_list(list).unwrap_err();
        assert!(e.contains(says), "{list}: {e}");
        assert!(e.starts_with("--hosts"), "{e}");
    }
}

#[test]
fn a_hostfile_reads_like_mpiruns() {
    let text = "# cluster\nn1 slots=4 max_slots=8\n\n  n2 slots=4   # spare\n";
    let h = parse_file(text, "hf").unwrap();
    assert_eq!(names(&h), ["n1", "n2"]);
    assert_eq!(h[1].slots, Some(4));
    let e = parse_file("n1 cpus=3\n", "hf").unwrap_err();
    assert!(
        e.contains("hostfile hf, line 1") && e.contains("cpus=3"),
        "{e}"
    );
    assert!(parse_file("# nothing\n", "hf")
        .unwrap_err()
        .contains("no hosts"));
}

#[test]
fn slurm_lists_expand() {
    let h = from_slurm("n[01-03,07],gpu9,x[8]", Some("2(x3),1,1,2")).unwrap();
    assert_eq!(names(&h), ["n01", "n02", "n03", "n07", "gpu9", "x8"]);
    assert_eq!(
        h.iter().map(|h| h.slots.unwrap()).collect::<Vec<_>>(),
        [2, 2, 2, 1, 1, 2]
    );
    assert!(from_slurm("n[3-1]", None).is_err());
    assert!(from_slurm("n[1-99999999]", None).is_err());
    assert!(from_slurm("n[1-2", None).is_err());
    assert!(from_slurm("n1", Some("2(xq)")).is_err());
}

#[test]
fn ranks_per_node_comes_from_slots_or_the_flag() {
    let h = parse_list("a:4,b:4").unwrap();
    assert_eq!(ranks_per_node(&h, None).unwrap(), 4);
    assert_eq!(ranks_per_node(&h, Some(2)).unwrap(), 2);
    assert!(ranks_per_node(&h, Some(5)).unwrap_err().contains("host a"));
    let uneven = parse_list("a:4,b:2").unwrap();
    assert!(ranks_per_node(&uneven, None)
        .unwrap_err()
        .contains("differ"));
    assert_eq!(
        ranks_per_node(&parse_list("a,b").unwrap(), None).unwrap(),
        1
    );
}
