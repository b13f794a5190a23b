//! Failure detection across hosts (virtual hosts of `common::vhost`, 4
//! plus 2 spares over ssh, heartbeat timeout 3 s): a host whose link is
//! cut for good is declared dead and recovered, and its own processes stop
//! by themselves when their lease runs out; the root cut off from every
//! host leaves no process on them and every checkpoint committed before
//! the cut, from which the same job resumes; two hosts that lose each
//! other only, each still reaching the root, cost the job one of them,
//! replaced by a spare; and slow starts (one host's
//! ssh 7 s late, every host's 3 s) are not failures.

mod common;

use common::hosts_job::{host_args, on_one_host, Running, LONG};
use common::vhost::Cluster;
use common::{final_checksum, serial, wait_for_line};
use std::time::Duration;

/// How long a host's processes may outlive a cut: their lease (shorter
/// than the heartbeat timeout of `host_args`, 3 s) and 10 s.
const OUTLIVE: Duration = Duration::from_secs(13);

/// The newest checkpoint `line` says committed at level 2.
fn committed_at_l2(line: &str) -> Option<u64> {
    if !(line.contains("level committed") && line.contains("level=L2")) {
        return None;
    }
    line.split("checkpoint=")
        .nth(1)?
        .split(' ')
        .next()?
        .parse()
        .ok()
}

#[test]
fn a_host_cut_off_for_good_is_recovered_and_its_processes_end_by_their_lease() {
    let _g = serial();
    let reference = on_one_host(&LONG);
    let c = Cluster::start(6);
    let job = Running::start(&c, "link", &[]);
    job.wait_for_commits(2);
    c.link(3, false);
    let (ok, out) = job.finish();
    assert!(ok, "{out}");
    assert_eq!(final_checksum(&out), reference, "{out}");
    assert!(
        out.contains("node 3 died (its daemon stopped sending heartbeats)"),
        "{out}"
    );
    assert!(
        out.contains("failed nodes [3]") && out.contains("from L2"),
        "{out}"
    );
    // The cut-off host heard nothing more from the root: its daemon, its
    // ranks and its manager stopped by themselves.
    c.wait_job_gone(3, OUTLIVE);
}

#[test]
fn the_root_cut_off_leaves_no_process_on_the_hosts_and_every_checkpoint() {
    let _g = serial();
    let reference = on_one_host(&LONG);
    let c = Cluster::start(6);
    let job = Running::start(&c, "root", &[]);
    let mut newest = 0;
    let mut seen = 0;
    while seen < 3 {
        let line = wait_for_line(&job.lines, "level committed", Duration::from_secs(120));
        if let Some(id) = committed_at_l2(&line) {
            newest = newest.max(id);
            seen += 1;
        }
    }
    c.cut_root(true);
    let (ok, out) = job.finish();
    assert!(!ok, "the root cannot have finished the job:\n{out}");
    assert!(!out.contains("job finished"), "{out}");
    for host in 0..6 {
        c.wait_job_gone(host, OUTLIVE);
    }
    // Connected again, the same command resumes from a checkpoint at
    // least as new as the last one committed before the cut.
    c.cut_root(false);
    let again = Running::start(&c, "root", &[]);
    let (ok, out) = again.finish();
    assert!(ok, "{out}");
    assert_eq!(final_checksum(&out), reference, "{out}");
    let resumed: u64 = out
        .lines()
        .find_map(|l| l.split("recovered checkpoint ").nth(1))
        .and_then(|t| t.split(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("the job started over:\n{out}"));
    assert!(
        resumed >= newest,
        "resumed from {resumed}, {newest} had committed:\n{out}"
    );
}

#[test]
fn two_hosts_cut_from_each_other_only_lose_one_of_them_to_the_spare() {
    let _g = serial();
    let reference = on_one_host(&LONG);
    let c = Cluster::start(6);
    let job = Running::start(&c, "pair", &[]);
    job.wait_for_commits(2);
    // Nodes 1 and 3 (hosts 1 and 3) hold neighbouring ranks (2 and 6, 3
    // and 7 of heat2d's 2 by 4 blocks); each still reaches the root and
    // every other host.
    c.isolate(&[1, 3], true);
    let (ok, out) = job.finish();
    assert!(ok, "{out}");
    assert_eq!(final_checksum(&out), reference, "{out}");
    let given_up: usize = out
        .lines()
        .find_map(|l| l.strip_prefix("frame: giving up node "))
        .and_then(|t| t.split(':').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no node was given up:\n{out}"));
    assert!(given_up == 1 || given_up == 3, "{out}");
    let other = 4 - given_up;
    assert!(
        out.contains(&format!("cut off from node {other} while both reach the root")),
        "{out}"
    );
    assert!(out.contains(&format!("failed nodes [{given_up}]")), "{out}");
    // The node given up stopped at once; the other runs on.
    c.wait_job_gone(given_up, OUTLIVE);
}

#[test]
fn slow_starts_are_not_failures() {
    let _g = serial();
    let reference = on_one_host(&LONG);
    let c = Cluster::start(6);
    for (slow, every) in [(vec![(2, 7)], 0), (vec![], 3)] {
        let mut args = host_args(&c);
        let at = args.iter().position(|a| a == "--launcher-command").unwrap();
        args[at + 1] = c.slow_launcher(&slow, every);
        let job = Running::launch(&c, "slow", &[], &args, "warn");
        let (ok, out) = job.finish();
        assert!(ok, "{slow:?} and {every} s:\n{out}");
        assert!(!out.contains("died"), "{slow:?} and {every} s:\n{out}");
        assert_eq!(final_checksum(&out), reference, "{out}");
    }
}
