use super::job::{Job, Repair};
use super::*;

/// 8 working ranks on nodes of 2 (processes 0-7 on nodes 0-3) and the
/// spares 8 and 9 on node 4, seen from process `me`.
fn job(me: usize) -> Job {
    Job {
        me,
        node_of: (0..10).map(|p| (p / 2) as u32).collect(),
        holders: (0..8).collect(),
        spares: vec![8, 9],
        dead: BTreeSet::new(),
    }
}

fn alive_but(dead: &[usize], of: usize) -> BTreeSet<usize> {
    (0..of).filter(|p| !dead.contains(p)).collect()
}

#[test]
fn a_dead_rank_takes_the_lowest_spare_and_keeps_its_place() {
    let mut j = job(8);
    assert_eq!(j.rank(), None);
    let r = j.repair(&alive_but(&[5], 10), false).unwrap();
    assert_eq!(r.failed_ranks, vec![5]);
    assert!(r.failed_nodes.is_empty(), "node 2 still has process 4");
    assert_eq!(j.rank(), Some(5));
    assert_eq!(j.holders, vec![0, 1, 2, 3, 4, 8, 6, 7]);
    assert_eq!(j.spares, vec![9]);
}

#[test]
fn a_node_whose_every_process_died_is_a_failed_node() {
    let mut j = job(0);
    let r = j.repair(&alive_but(&[2, 3], 10), false).unwrap();
    assert_eq!(r.failed_ranks, vec![2, 3]);
    assert_eq!(r.failed_nodes, vec![1]);
    assert_eq!(&j.holders[2..4], &[8, 9]);
    assert_eq!(j.rank(), Some(0));
}

#[test]
fn a_second_failure_counts_only_what_is_newly_gone() {
    let mut j = job(0);
    j.repair(&alive_but(&[5], 10), false).unwrap();
    // The replacement (process 8) dies too: rank 5 again, node 4 not yet
    // failed (process 9 lives).
    let r = j.repair(&alive_but(&[5, 8], 10), false).unwrap();
    assert_eq!(r.failed_ranks, vec![5]);
    assert!(r.failed_nodes.is_empty());
    assert_eq!(j.holders[5], 9);
    assert!(j.spares.is_empty());
}

#[test]
fn a_dead_spare_is_no_failed_rank_and_is_never_used() {
    let mut j = job(0);
    let r = j.repair(&alive_but(&[8], 10), false).unwrap();
    assert!(r.failed_ranks.is_empty());
    assert_eq!(j.spares, vec![9]);
    let r = j.repair(&alive_but(&[8, 6], 10), false).unwrap();
    assert_eq!(r.failed_ranks, vec![6]);
    assert_eq!(j.holders[6], 9);
}

#[test]
fn more_failures_than_spares_name_the_ranks_and_the_spares_left() {
    let mut j = job(0);
    let e = j.repair(&alive_but(&[1, 2, 3], 10), false).unwrap_err();
    assert!(
        e.contains("rank(s) 1, 2, 3 failed") && e.contains("2 spare process(es)"),
        "{e}"
    );
}

/// 12 processes on 4 nodes of 3, the last of each node a spare: working
/// ranks 0-7 two per node, as in `job`.
fn per_node(me: usize) -> Job {
    let node_of: Vec<u32> = (0..12).map(|p| (p / 3) as u32).collect();
    let spares = Spares::PerNode(1).choose(&node_of);
    Job {
        me,
        holders: (0..12).filter(|p| !spares.contains(p)).collect(),
        node_of,
        spares,
        dead: BTreeSet::new(),
    }
}

#[test]
fn spares_are_the_last_processes_of_the_job_or_of_every_node() {
    let node_of: Vec<u32> = (0..12).map(|p| (p / 3) as u32).collect();
    assert_eq!(Spares::Last(2).choose(&node_of), vec![10, 11]);
    assert_eq!(Spares::PerNode(1).choose(&node_of), vec![2, 5, 8, 11]);
    assert_eq!(
        Spares::PerNode(2).choose(&node_of),
        vec![1, 2, 4, 5, 7, 8, 10, 11]
    );
    let j = per_node(0);
    assert_eq!(j.holders, vec![0, 1, 3, 4, 6, 7, 9, 10]);
}

#[test]
fn a_dead_rank_is_replaced_on_its_own_node_while_it_has_a_spare() {
    let mut j = per_node(8);
    // Rank 5 is process 7, on node 2, whose spare is process 8.
    let r = j.repair(&alive_but(&[7], 12), false).unwrap();
    assert_eq!(r.failed_ranks, vec![5]);
    assert!(r.failed_nodes.is_empty());
    assert_eq!(j.rank(), Some(5));
    assert_eq!(j.spares, vec![2, 5, 11]);
    // Its replacement dies too: node 2 has no spare left, the lowest goes.
    let r = j.repair(&alive_but(&[7, 8], 12), false).unwrap();
    assert_eq!(r.failed_ranks, vec![5]);
    assert_eq!(j.holders[5], 2);
}

#[test]
fn the_ranks_of_a_dead_node_go_to_the_lowest_spares_elsewhere() {
    let mut j = per_node(0);
    // Node 1 (processes 3, 4 and its spare 5) dies.
    let r = j.repair(&alive_but(&[3, 4, 5], 12), false).unwrap();
    assert_eq!(r.failed_ranks, vec![2, 3]);
    assert_eq!(r.failed_nodes, vec![1]);
    assert_eq!(&j.holders[2..4], &[2, 8]);
    assert_eq!(j.spares, vec![11]);
}

#[test]
fn the_configuration_names_the_spares_their_layout_and_the_error_modes() {
    let text = "[ulfm]\nspares = 3\nspare_layout = \"per-node\"\nerror_scope = \"universe\"\nuniform_errors = true\n[topology]\nranks_per_node = 4\n";
    let cfg = Config::from_toml_str(text, "inline").unwrap();
    let options = Options::from_config(&cfg);
    assert_eq!(options.spares, Spares::PerNode(3));
    assert_eq!(options.error_scope, ErrorScope::Universe);
    assert!(options.uniform_errors);
    assert!(matches!(options.nodes, Nodes::Consecutive(4)));
    let defaults = Options::from_config(&Config::default());
    assert_eq!(defaults.spares, Spares::Last(0));
    assert_eq!(defaults.error_scope, ErrorScope::Operation);
    assert!(!defaults.uniform_errors);
    let bad = Config::from_toml_str("[ulfm]\nspare_layout = \"first\"\n", "inline").unwrap_err();
    assert!(bad.to_string().contains("ulfm.spare_layout"), "{bad}");
}

#[test]
fn with_no_spare_left_a_failed_rank_gets_a_new_process_on_its_node() {
    let mut j = job(0);
    j.repair(&alive_but(&[5], 10), true).unwrap();
    j.repair(&alive_but(&[5, 9], 10), true).unwrap();
    // Rank 1 dies (process 1): no spare left, a process 10 starts on node 0.
    let r = j.repair(&alive_but(&[1, 5, 9], 10), true).unwrap();
    assert_eq!(
        r,
        Repair {
            failed_ranks: vec![1],
            failed_nodes: vec![],
            started: vec![0],
        }
    );
    assert_eq!(j.holders[1], 10);
    assert_eq!(j.node_of.len(), 11);
    // The started process dies in turn: another one, process 11.
    let r = j.repair(&alive_but(&[1, 5, 9, 10], 11), true).unwrap();
    assert_eq!(r.started, vec![0]);
    assert_eq!(j.holders[1], 11);
}

#[test]
fn the_ranks_of_a_dead_node_get_new_processes_on_one_new_node() {
    // 8 working ranks on 4 nodes of 2, no spares.
    let mut j = Job::new(3, (0..8).map(|p| (p / 2) as u32).collect(), vec![]);
    let r = j.repair(&alive_but(&[2, 3, 6], 8), true).unwrap();
    assert_eq!(r.failed_ranks, vec![2, 3, 6]);
    assert_eq!(r.failed_nodes, vec![1]);
    // Ranks 2 and 3 on a new node 4; rank 6 on its own node 3.
    assert_eq!(r.started, vec![4, 4, 3]);
    assert_eq!(&j.holders, &[0, 1, 8, 9, 4, 5, 10, 7]);
    assert_eq!(j.rank(), None, "process 3 is dead");
    // Without starting processes, the job ends naming the key.
    let mut j = Job::new(0, vec![0, 0, 1, 1], vec![]);
    let e = j.repair(&alive_but(&[3], 4), false).unwrap_err();
    assert!(
        e.contains("rank(s) 3 failed") && e.contains("ulfm.spawn"),
        "{e}"
    );
}

#[test]
fn spares_are_used_before_new_processes_are_started() {
    let mut j = job(0);
    let r = j.repair(&alive_but(&[0, 1, 2], 10), true).unwrap();
    assert_eq!(r.failed_ranks, vec![0, 1, 2]);
    assert_eq!(r.failed_nodes, vec![0]);
    assert_eq!(&j.holders[..3], &[8, 9, 10]);
    // Rank 2's node (1) still has process 3: its new process starts there.
    assert_eq!(r.started, vec![1]);
    assert!(j.spares.is_empty());
}
