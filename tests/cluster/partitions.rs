//! Failure detection across hosts (virtual hosts of `common::vhost`, 4
//! plus 2 spares over ssh, heartbeat timeout 3 s): a host whose link is
//! cut for good is declared dead and recovered, and its own processes stop
//! by themselves when their lease runs out; the root cut off from every
//! host leaves no process on them and every checkpoint committed before
//! the cut, from which the same job resumes; two hosts that lose each
//! other only, each still reaching the root, cost the job one of them,
//! replaced by a spare; a host cut off for 2, 6 or 12 s and back never
//! runs a rank beside its replacement; a daemon stopped past its lease is
//! replaced, and ends by itself once thawed; a host frozen while its
//! manager writes to the global directory lands nothing there once thawed
//! (the fence), and the next recovery restores the right data; and
//! slow starts (one host's ssh 7 s late, every host's 3 s) are not
//! failures.

use crate::common;

use common::hosts_job::{host_args, on_one_host, Running, LOCAL, LONG};
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
    // Found silent, or (while the root was still patient after the
    // start) unreachable from its peers first.
    assert!(
        out.contains("node 3 died (its daemon stopped sending heartbeats)")
            || out.contains("node 3 died (cut off from node"),
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
        out.contains(&format!(
            "cut off from node {other} while both reach the root"
        )),
        "{out}"
    );
    assert!(out.contains(&format!("failed nodes [{given_up}]")), "{out}");
    // The node given up stopped at once; the other runs on.
    c.wait_job_gone(given_up, OUTLIVE);
}

/// Each rank's incarnations in the step logs of `dir` (see heat2d's
/// `--step-log`): per rank, per pid, the first and last time it stepped.
fn incarnations(dir: &std::path::Path) -> Vec<Vec<(u64, u64, u32)>> {
    (0..8)
        .map(|rank| {
            let text = std::fs::read_to_string(dir.join(format!("rank-{rank}")))
                .unwrap_or_else(|e| panic!("rank {rank}'s step log: {e}"));
            let mut by_pid: std::collections::BTreeMap<u32, (u64, u64)> = Default::default();
            for line in text.lines() {
                let f: Vec<u64> = line.split(' ').filter_map(|x| x.parse().ok()).collect();
                assert_eq!(f.len(), 4, "rank {rank}: {line:?}");
                let span = by_pid.entry(f[1] as u32).or_insert((f[0], f[0]));
                span.0 = span.0.min(f[0]);
                span.1 = span.1.max(f[0]);
            }
            let mut spans: Vec<(u64, u64, u32)> = by_pid
                .into_iter()
                .map(|(pid, (a, b))| (a, b, pid))
                .collect();
            spans.sort();
            spans
        })
        .collect()
}

#[test]
fn a_host_cut_off_for_2_6_and_12_s_never_runs_a_rank_twice_at_once() {
    let _g = serial();
    let reference = on_one_host(&LONG);
    let c = Cluster::start(6);
    for secs in [2, 6, 12] {
        // A node given up in the run before kept its files on its host.
        c.remove_everywhere(std::path::Path::new(LOCAL));
        let log = c.shared_dir().join(format!("steps-{secs}"));
        std::fs::create_dir_all(&log).unwrap();
        let tag = format!("blip-{secs}");
        let job = Running::start_with(
            &c,
            &tag,
            &[],
            &["--step-log", log.to_str().unwrap()],
            "warn,frame::checkpoint::promotion=info",
        );
        job.wait_for_commits(2);
        c.link(3, false);
        // The fault itself lasts this long: not a wait for a state.
        std::thread::sleep(Duration::from_secs(secs));
        c.link(3, true);
        let (ok, out) = job.finish();
        assert!(ok, "{secs} s:\n{out}");
        assert_eq!(final_checksum(&out), reference, "{secs} s:\n{out}");
        for (rank, spans) in incarnations(&log).iter().enumerate() {
            for pair in spans.windows(2) {
                assert!(
                    pair[0].1 < pair[1].0,
                    "{secs} s: rank {rank}'s pid {} stepped until {} ns, after pid {} began at {} ns:\n{out}",
                    pair[0].2,
                    pair[0].1,
                    pair[1].2,
                    pair[1].0
                );
            }
        }
        // Whatever of host 3's job was given up ended by its lease.
        if out.contains("node 3 died") {
            c.wait_job_gone(3, OUTLIVE);
        }
    }
}

#[test]
fn a_daemon_stopped_past_its_lease_is_replaced_and_ends_once_thawed() {
    let _g = serial();
    let reference = on_one_host(&LONG);
    let c = Cluster::start(6);
    let job = Running::start(&c, "frozen", &[]);
    job.wait_for_commits(2);
    let daemon = c.with_role(3, "daemon");
    assert_eq!(daemon.len(), 1, "host 3 runs one daemon: {daemon:?}");
    let daemon = rustix::process::Pid::from_raw(daemon[0]).expect("a pid");
    rustix::process::kill_process(daemon, rustix::process::Signal::STOP).expect("SIGSTOP");
    // Its ranks end by their lease; the node is declared dead and its
    // ranks recover on a spare while the daemon is still frozen.
    wait_for_line(
        &job.lines,
        "recovered from failure 1",
        Duration::from_secs(120),
    );
    rustix::process::kill_process(daemon, rustix::process::Signal::CONT).expect("SIGCONT");
    // Thawed, it finds its lease over and ends with whatever it ran.
    c.wait_job_gone(3, OUTLIVE);
    let (ok, out) = job.finish();
    assert!(ok, "{out}");
    assert_eq!(final_checksum(&out), reference, "{out}");
    assert!(
        out.contains("node 3 died (its daemon stopped sending heartbeats)"),
        "{out}"
    );
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

/// Whether process `pid` is stopped (state `T`).
fn stopped(pid: i32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rsplit_once(") ")
        .is_some_and(|(_, rest)| rest.starts_with('T'))
}

fn signal(pid: i32, sig: rustix::process::Signal) {
    if let Some(pid) = rustix::process::Pid::from_raw(pid) {
        let _ = rustix::process::kill_process(pid, sig);
    }
}

/// The run and epoch of each manifest of checkpoint `id`'s level-4
/// directory under `l4` (name, epoch).
fn manifest_epochs(l4: &std::path::Path, id: u64) -> Vec<(String, u64)> {
    let dir = l4.join(format!("ckpt-{id:020}"));
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.ends_with(".l4.json") || name.starts_with('.') {
            continue;
        }
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        let json: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        let epoch = json["fence"]["epoch"].as_u64().unwrap_or(0);
        out.push((name, epoch));
    }
    out
}

#[test]
fn a_host_frozen_while_its_manager_writes_lands_nothing_there_once_thawed() {
    let _g = serial();
    let reference = on_one_host(&LONG);
    let c = Cluster::start(6);
    let metrics = c.shared_dir().join("metrics-frozen.jsonl");
    let _ = std::fs::remove_file(&metrics);
    let l4 = c.shared_dir().join("global-frozen/heat2d/l4");
    let fence = l4.join("FENCE");
    // Host 3's manager stops itself at the worst moment of a level-4
    // write: its first manifest of checkpoint 30 written and checked
    // against the fence, about to be synced and renamed into place. The
    // test freezes the rest of the host with it.
    let env = [
        (
            "FRAME_TEST_MANAGER_CRASH_AT",
            "1000003:stop:fsync:ckpt-00000000000000000030/.rank-000006.l4.json.tmp-6",
        ),
        (
            "FRAME_METRICS_FILE",
            metrics.to_str().expect("a UTF-8 path"),
        ),
    ];
    let job = Running::start(&c, "frozen", &env);
    let patience = Duration::from_secs(120);
    let manager = common::patience::poll(patience, Duration::from_millis(20), || {
        c.with_role(3, "manager").into_iter().find(|&p| stopped(p))
    })
    .unwrap_or_else(|why| panic!("host 3's manager never stopped: {why}"));

    // Cut off (so that nothing reaches it to end it: its ssh session
    // stays) and frozen whole, as a host that hangs.
    c.link(3, false);
    let frozen: Vec<i32> = c.job_processes(3).into_iter().map(|(p, _)| p).collect();
    for &pid in &frozen {
        signal(pid, rustix::process::Signal::STOP);
    }
    // The job gives the silent host up and goes on on a spare; its
    // recovered ranks move the global directory's fence to the epoch the
    // recovery started (2, or later if the recovery itself had to start
    // again).
    let recovered = wait_for_line(&job.lines, "recovered from failure 1", patience);
    let epoch: u64 = recovered
        .rsplit("epoch ")
        .next()
        .and_then(|t| t.trim_end_matches(')').trim().parse().ok())
        .unwrap_or_else(|| panic!("no epoch in {recovered:?}"));
    assert!(epoch >= 2, "{recovered}");
    common::patience::poll(patience, Duration::from_millis(20), || {
        let text = std::fs::read_to_string(&fence).unwrap_or_default();
        let json: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        (json["epoch"].as_u64().unwrap_or(0) >= epoch).then_some(())
    })
    .unwrap_or_else(|why| {
        panic!(
            "the fence never reached epoch {epoch}: {why}; it reads {:?}; the job said:\n{}",
            std::fs::read_to_string(&fence),
            job.so_far()
        )
    });
    // Thawed alone, the manager completes the write it had checked, and
    // goes on with its next one, which the fence refuses; it says how its
    // promotion ended in its record.
    signal(manager, rustix::process::Signal::CONT);
    let ended = common::patience::poll(patience, Duration::from_millis(20), || {
        let text = std::fs::read_to_string(&metrics).unwrap_or_default();
        text.lines()
            .find(|l| {
                l.contains("\"event\":\"promotion\"")
                    && l.contains("\"node\":3,")
                    && l.contains("\"checkpoint\":30,")
                    && l.contains("\"level\":4,")
            })
            .map(String::from)
    })
    .unwrap_or_else(|why| {
        panic!(
            "host 3's late promotion never ended: {why}; the job said:\n{}",
            job.so_far()
        )
    });
    assert!(ended.contains("\"ok\":false"), "{ended}");
    // Nothing of epoch 1 reached checkpoint 30's directory, where the
    // recovered ranks may be writing it again: the manifest completed
    // late went to the directory set aside when the fence moved.
    let late: Vec<(String, u64)> = manifest_epochs(&l4, 30)
        .into_iter()
        .filter(|(_, epoch)| *epoch < 2)
        .collect();
    assert!(
        late.is_empty(),
        "manifests of epoch 1 in checkpoint 30 after the recovery: {late:?} ({ended})"
    );
    // The rest of the host thaws and ends by its lease.
    for &pid in &frozen {
        signal(pid, rustix::process::Signal::CONT);
    }
    c.wait_job_gone(3, OUTLIVE);
    c.link(3, true);
    // The next recovery restores the right data: host 1 is lost too.
    c.link(1, false);
    let (ok, out) = job.finish();
    assert!(ok, "{out}");
    assert!(out.contains("recovered from failure 2"), "{out}");
    assert_eq!(final_checksum(&out), reference, "{out}");
}
