//! Jobs across hosts: the runtime on virtual hosts (network and mount
//! namespaces, each with its own sshd and RAM disk; see `common::vhost`),
//! its daemons started by the ssh launcher. A job on 4 hosts plus 2 spares
//! computes what it computes on one machine, and recovers online and
//! bit-exact when a rank is killed, a host is killed (every process of it,
//! its RAM disk gone), a host and its partner, or two hosts of one group
//! (cut links: `tests/cluster/partitions.rs`). A host that refuses ssh stops the start
//! with its name, and the job's secret is on no remote command line and in
//! no remote daemon's environment. Inside a Slurm allocation (its
//! variables, and an `srun` stand-in: no slurmd runs in the namespaces) the
//! job takes its hosts from Slurm; the C heat2d and the `ring` example run
//! across hosts under `frame run` unchanged.

use crate::common;

use common::hosts_job::{
    heat2d, host_args, on_one_host, strs, Running, DEADLINE, LOCAL, LONG, SHORT,
};
use common::vhost::{contains, Cluster};
use common::{final_checksum, run, serial, wait_for_line};
use std::time::{Duration, Instant};

/// Kills `hosts` once a checkpoint reached `level` (and so is at every
/// level below), and checks the job recovered from `expect` to the
/// fault-free checksum, online. The newest checkpoint any level can bring
/// back wins: `env` keeps the levels above `expect` from having a newer one.
fn kill_hosts_and_recover(hosts: &[usize], level: u8, expect: &str, env: &[(&str, &str)]) {
    let _g = serial();
    let reference = on_one_host(&LONG);
    let mut c = Cluster::start(6);
    let job = Running::start(&c, "kill", env);
    job.wait_for_commits(level);
    c.kill_together(hosts);
    let (ok, out) = job.finish();
    assert!(ok, "{out}");
    assert_eq!(final_checksum(&out), reference, "{out}");
    let recovered: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("recovered checkpoint"))
        .collect();
    assert_eq!(recovered.len(), 1, "one recovery of both hosts:\n{out}");
    assert!(recovered[0].contains(&format!("from {expect}")), "{out}");
    assert!(out.contains("(online recovery"), "{out}");
}

#[test]
fn a_job_on_four_hosts_computes_what_it_computes_on_one() {
    let _g = serial();
    let reference = on_one_host(&SHORT);
    let c = Cluster::start(6);
    let global = c.shared_dir().join("global");
    let args = host_args(&c);
    let (status, out, err) = run(&mut heat2d(&SHORT, &global, &strs(&args)), DEADLINE);
    assert!(status.success(), "{out}{err}");
    assert_eq!(final_checksum(&out), reference, "{out}");
    assert!(err.contains("on 4 node(s) + 2 spare"), "{err}");
}

#[test]
fn a_killed_rank_is_recovered_online_from_level_1() {
    let _g = serial();
    let reference = on_one_host(&SHORT);
    let c = Cluster::start(6);
    let mut args = host_args(&c);
    args.extend(["--inject".into(), "rank:3@iter=95".into()]);
    let global = c.shared_dir().join("global");
    let (status, out, err) = run(&mut heat2d(&SHORT, &global, &strs(&args)), DEADLINE);
    assert!(status.success(), "{out}{err}");
    assert_eq!(final_checksum(&out), reference, "{out}");
    assert!(
        out.contains("failed ranks [3]") && out.contains("from L1"),
        "{out}"
    );
}

#[test]
fn a_killed_host_is_recovered_from_its_partner_copies() {
    // Level 2 takes every checkpoint: none above is newer.
    kill_hosts_and_recover(&[2], 2, "L2", &[]);
}

/// In logged mode a killed host is one logged recovery: once its manager
/// promoted checkpoint 15 to level 2 (the ranks hold before step 155
/// until then), host 2 dies; its ranks 4 and 5 restart on a spare host
/// and take checkpoint 15 from their partner host's manager over TCP; the
/// others never roll back; bit-exact. The hosts whose ranks all wait try
/// to set the idle governor.
#[test]
fn a_killed_host_is_a_logged_recovery_from_its_partner_copies() {
    let _g = serial();
    let reference = on_one_host(&LONG);
    let mut c = Cluster::start(6);
    let env = [
        ("FRAME_RECOVERY_MODE", "logged"),
        ("FRAME_RECOVERY_IDLE_GOVERNOR", "powersave"),
        ("FRAME_L3_INTERVAL", "0"),
        ("FRAME_L4_INTERVAL", "0"),
    ];
    let log = "warn,frame::manager=info,frame::checkpoint::rejoin=info";
    let job = Running::start_with(&c, "logged", &env, &["--hold-at", "155"], log);
    let promoted = "promoted checkpoint=15 level=L2 node=2 ";
    let seen = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        wait_for_line(&job.lines, promoted, Duration::from_secs(120))
    }));
    if seen.is_err() {
        let (_, out) = job.finish();
        panic!("no {promoted:?} in:\n{out}");
    }
    c.kill_together(&[2]);
    let (ok, out) = job.finish();
    assert!(ok, "{out}");
    assert_eq!(final_checksum(&out), reference, "{out}");
    assert!(out.contains("(logged recovery"), "{out}");
    assert!(!out.contains("restarting globally"), "{out}");
    let back: Vec<&str> = out
        .lines()
        .filter(|l| l.contains(" restored checkpoint "))
        .collect();
    assert_eq!(back.len(), 2, "{out}");
    for rank in [4, 5] {
        let line = format!("heat2d: rank {rank} restored checkpoint 15 (step 150) from L2");
        assert!(out.contains(&line), "{out}");
    }
    // The hosts whose ranks all waited tried to lower their CPUs (this
    // machine has no cpufreq interface, which they say); the spare running
    // the replacements did not.
    for node in [0, 1, 3] {
        let line = format!(
            "node {node}: cannot set governor powersave while its ranks wait: no cpufreq interface"
        );
        assert!(out.contains(&line), "{out}");
    }
    assert!(!out.contains("node 4: cannot set governor"), "{out}");
}

#[test]
fn a_host_and_its_partner_are_recovered_from_erasure_groups() {
    // Hosts 1 and 2 are partners in groups {0, 1} and {2, 3}.
    kill_hosts_and_recover(&[1, 2], 3, "L3", &[("FRAME_L4_INTERVAL", "100000")]);
}

#[test]
fn two_hosts_of_one_group_are_recovered_from_the_global_directory() {
    kill_hosts_and_recover(&[0, 1], 4, "L4", &[]);
}

#[test]
fn the_secret_is_on_no_remote_command_line_or_daemon_environment() {
    let _g = serial();
    let c = Cluster::start(6);
    let job = Running::start(&c, "secret", &[]);
    // Ranks hold the secret in their environment (readable by their user
    // alone): that is where the test learns it.
    let secret =
        common::patience::poll(Duration::from_secs(120), Duration::from_millis(20), || {
            c.with_role(0, "rank").into_iter().find_map(|rank| {
                let environ = std::fs::read(format!("/proc/{rank}/environ")).ok()?;
                environ
                    .split(|b| *b == 0)
                    .find_map(|v| v.strip_prefix(b"FRAME_RT_SECRET="))
                    .map(<[u8]>::to_vec)
            })
        })
        .unwrap_or_else(|why| panic!("no rank with the job's secret on host 0: {why}"));
    assert_eq!(secret.len(), 64);
    for host in 0..6 {
        c.wait_role(host, "daemon", Duration::from_secs(60));
        let mut daemons = 0;
        for p in c.processes(host) {
            let cmdline = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
            assert!(
                !contains(&cmdline, &secret),
                "on host {host}, process {p}'s command line"
            );
            // One read of the environment: a process forking or exiting
            // meanwhile is judged on what it was.
            let env = std::fs::read(format!("/proc/{p}/environ")).unwrap_or_default();
            if contains(&env, b"FRAME_RT_ROLE=daemon\0") {
                daemons += 1;
                assert!(
                    !contains(&env, &secret),
                    "on host {host}, daemon {p}'s environment"
                );
                assert!(
                    contains(&env, b"FRAME_RT_HANDOFF=stdin"),
                    "daemon {p} read its handoff"
                );
            }
        }
        assert!(daemons > 0, "no daemon seen on host {host}");
    }
    // Nor on any command line of this machine (the ssh clients').
    for e in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        assert!(
            !contains(&cmdline, &secret),
            "{:?}'s command line",
            e.path()
        );
    }
    let (ok, out) = job.finish();
    assert!(ok, "{out}");
}

#[test]
fn a_host_that_refuses_ssh_stops_the_start_with_its_name_and_leaves_nothing() {
    let _g = serial();
    let c = Cluster::start(3);
    c.stop_sshd(2);
    // What runs there before the job (the sshd, and perhaps the session
    // of a probe connection that is ending: that may go, nothing may come).
    let before: Vec<Vec<i32>> = (0..2).map(|h| c.processes(h)).collect();
    let new_ones = |h: usize| -> Vec<i32> {
        let mut p = c.processes(h);
        p.retain(|p| !before[h].contains(p));
        p
    };
    let args = [
        "--hosts".to_string(),
        c.list(0..3, 1),
        "--launcher-command".into(),
        c.launcher_command(),
    ];
    let global = c.shared_dir().join("global");
    let began = Instant::now();
    let (status, out, err) = run(&mut heat2d(&SHORT, &global, &strs(&args)), DEADLINE);
    let took = began.elapsed();
    assert!(!status.success(), "{out}{err}");
    let host = c.host(2);
    assert!(
        err.contains(&format!("node 2 on host {host} did not start: ssh exited")),
        "{err}"
    );
    assert!(err.contains("Connection refused"), "{err}");
    // Nothing of the job is left on the hosts that started it.
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        let left: Vec<(usize, i32, String)> = (0..2)
            .flat_map(|h| new_ones(h).into_iter().map(move |p| (h, p)))
            .map(|(h, p)| {
                let cmd = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
                (h, p, String::from_utf8_lossy(&cmd).replace('\0', " "))
            })
            .collect();
        if left.is_empty() {
            break;
        }
        assert!(
            Instant::now() < end,
            "processes left on the hosts (host, pid, command): {left:?}; the start failed after {took:?}: {err}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    for h in 0..2 {
        assert!(c.with_role(h, "daemon").is_empty() && c.with_role(h, "rank").is_empty());
    }
}

#[test]
fn inside_a_slurm_allocation_the_hosts_come_from_slurm_and_srun_starts_the_daemons() {
    let _g = serial();
    let reference = on_one_host(&SHORT);
    let c = Cluster::start(6);
    let global = c.shared_dir().join("global");
    let standin = c.srun_standin();
    let args = [
        "--spare-nodes",
        "2",
        "--launcher-command",
        standin.to_str().expect("utf-8 path"),
        "--inject",
        "node:2@iter=175",
    ];
    let mut cmd = heat2d(&SHORT, &global, &args);
    cmd.env("SLURM_JOB_NODELIST", c.nodelist(0..6))
        .env("SLURM_TASKS_PER_NODE", "2(x6)");
    let (status, out, err) = run(&mut cmd, DEADLINE);
    assert!(status.success(), "{out}{err}");
    assert!(err.contains("on 4 node(s) + 2 spare"), "{err}");
    assert!(err.contains("node 2 died"), "{err}");
    assert!(
        out.contains("failed nodes [2]") && out.contains("from L2"),
        "{out}"
    );
    assert_eq!(final_checksum(&out), reference, "{out}");
}

#[test]
fn the_c_heat2d_and_the_ring_example_run_across_hosts_under_frame_run() {
    let _g = serial();
    let c = Cluster::start(3);
    // Built where every host sees it.
    let exe = c.shared_dir().join("heat2d_c");
    common::compile_c("examples/c/heat2d.c", &exe);
    let program_args = ["--nx", "96", "--ny", "80", "--steps", "400"];
    let global = c.shared_dir().join("global-c");
    let global = global.to_str().expect("utf-8 path");
    let env = [
        ("FRAME_SNAPSHOT_INTERVAL", Some("50")),
        ("FRAME_L2_INTERVAL", Some("1")),
        ("FRAME_CONFIG", None),
        ("FRAME_STORAGE_GLOBAL_DIR", Some(global)),
    ];
    let dir = common::scratch();
    let local = common::frame_run_with(
        dir.path(),
        &["--nodes", "2", "--ranks-per-node", "2"],
        &exe,
        &program_args,
        &env,
    );
    assert!(local.status.success(), "{}", local.out);
    let list = c.list(0..3, 2);
    let command = c.launcher_command();
    let mut across = env.to_vec();
    across.push(("FRAME_STORAGE_LOCAL_DIR", Some(LOCAL)));
    let on_hosts = |inject: &'static str| {
        vec![
            "--hosts",
            list.as_str(),
            "--spare-nodes",
            "1",
            "--launcher-command",
            command.as_str(),
            "--inject",
            inject,
        ]
    };
    let hosts = on_hosts("node:1@iter=275");
    let job = common::frame_run_with(dir.path(), &hosts, &exe, &program_args, &across);
    assert!(job.status.success(), "{}", job.out);
    assert!(job.out.contains("node 1 died"), "{}", job.out);
    assert_eq!(
        final_checksum(&job.out),
        final_checksum(&local.out),
        "{}",
        job.out
    );
    // The smallest Rust example, as its documentation runs it.
    let reference = common::reference(&["--checkpoint-every", "10"]);
    let ring = common::frame_run_with(
        dir.path(),
        &on_hosts("rank:2@iter=50"),
        &common::example("ring"),
        &["--checkpoint-every", "10"],
        &[("FRAME_STORAGE_LOCAL_DIR", Some(LOCAL))],
    );
    assert!(ring.status.success(), "{}", ring.out);
    assert_eq!(common::final_value(&ring.out), reference, "{}", ring.out);
}
