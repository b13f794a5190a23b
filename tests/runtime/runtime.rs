//! The runtime with real processes: `frame run` with virtual nodes, spares,
//! injected failures (real SIGKILLs), online recovery and redeploy.

use crate::common;

use common::heat2d::Heat2d;
use common::{example, final_value, reference, ring, scratch, serial, Job};

const RING: [&str; 4] = ["--iterations", "200", "--checkpoint-every", "10"];

/// Fails the test, showing the job's output, unless the output contains `needle`.
fn expect_line(job: &Job, needle: &str) {
    assert!(
        job.out.contains(needle),
        "expected {needle:?} in:\n{}",
        job.out
    );
}

/// `--nodes 2 --ranks-per-node 2` followed by `extra`.
fn two_by_two<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    ["--nodes", "2", "--ranks-per-node", "2"]
        .into_iter()
        .chain(extra.iter().copied())
        .collect()
}

/// (rank, state, epoch, node) of every entry into the resilient function.
fn entries(out: &str) -> Vec<(u32, String, u64, u32)> {
    out.lines()
        .filter_map(|l| l.strip_prefix("ring: rank "))
        .filter(|l| l.contains(" entered "))
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (
                w[0].parse().unwrap(),
                w[2].to_string(),
                w[4].parse().unwrap(),
                w[6].parse().unwrap(),
            )
        })
        .collect()
}

fn states_in(out: &str, epoch: u64) -> Vec<(u32, String, u32)> {
    let mut v: Vec<_> = entries(out)
        .into_iter()
        .filter(|e| e.2 == epoch)
        .map(|(r, s, _, n)| (r, s, n))
        .collect();
    v.sort();
    v
}

/// Greetings are read in the epoch they were sent in: none was left over from
/// an interrupted epoch.
fn assert_no_stale_greetings(out: &str) {
    let mut seen = 0;
    for l in out.lines().filter(|l| l.starts_with("ring: rank 1 got")) {
        let nums: Vec<u64> = l
            .split(|c: char| !c.is_ascii_digit())
            .filter_map(|x| x.parse().ok())
            .collect();
        // "ring: rank 1 got "hello from epoch E" in epoch F"
        assert_eq!(nums[1], nums[2], "stale message delivered: {l}");
        seen += 1;
    }
    assert!(seen >= 1, "no greeting read:\n{out}");
}

#[test]
fn a_killed_rank_is_respawned_and_survivors_roll_back() {
    let _g = serial();
    let want = reference(&RING);
    let dir = scratch();
    let job = ring(
        dir.path(),
        &two_by_two(&["--inject", "rank:2@iter=55"]),
        &RING,
    );
    assert!(job.status.success(), "{}", job.out);
    assert_eq!(
        states_in(&job.out, 2),
        vec![
            (0, "REINITED".into(), 0),
            (1, "REINITED".into(), 0),
            (2, "RESTARTED".into(), 1),
            (3, "REINITED".into(), 1)
        ],
        "{}",
        job.out
    );
    expect_line(&job, "failed_ranks [2] failed_nodes []");
    expect_line(&job, "restored checkpoint 5 at iteration 50");
    assert_eq!(final_value(&job.out), want);
    assert_no_stale_greetings(&job.out);
    let records = runtime_records(&job);
    assert_eq!(records.len(), 1);
    let m = records[0];
    assert_eq!(
        (m["kind"].as_str(), m["epoch"].as_u64()),
        (Some("rank"), Some(2))
    );
    let (d, s, r, b) = (
        m["detected_ns"].as_u64().unwrap(),
        m["reinit_sent_ns"].as_u64().unwrap(),
        m["replacements_started_ns"].as_u64().unwrap(),
        m["barrier_ns"].as_u64().unwrap(),
    );
    assert!(d <= s && s <= r && r <= b, "timeline out of order: {m}");
    assert!(m["runtime_recovery_ms"].as_f64().unwrap() > 0.0);
    // The replacement said it was ready in between (the release waits for
    // the ranks that start again, not for the survivors' roll-back), and
    // the root counted what it read after the failure (at least the
    // replacement's start and its ready) and the CPU it spent.
    let (first, last) = (
        m["first_ready_ns"].as_u64().unwrap(),
        m["last_ready_ns"].as_u64().unwrap(),
    );
    assert!(s <= first && first <= last && last <= b, "{m}");
    assert!(m["root_messages"].as_u64().unwrap() >= 2, "{m}");
    assert!(m["root_cpu_ms"].as_f64().unwrap() > 0.0, "{m}");
    // The start: launch to the first release, with every rank's hello.
    let start = (job.metrics.iter())
        .find(|m| m["event"] == "runtime_start")
        .unwrap_or_else(|| panic!("no start record: {:?}", job.metrics));
    assert_eq!(
        (start["ranks"].as_u64(), start["nodes"].as_u64()),
        (Some(4), Some(2))
    );
    assert!(start["startup_ms"].as_f64().unwrap() > 0.0, "{start}");
    assert!(start["released_ns"].as_u64().unwrap() < d, "{start}");
    // Nothing left in the node-local directories after the job finalized.
    assert!(common::files_under(&dir.path().join("local")).is_empty());
}

#[test]
fn a_killed_node_moves_its_ranks_to_the_spare() {
    let _g = serial();
    // Without checkpoints: the node's local storage is gone, so everyone
    // starts over, and still reaches the same value.
    let plain = ["--iterations", "200"];
    let want = reference(&plain);
    let dir = scratch();
    let job = ring(
        dir.path(),
        &two_by_two(&["--spare-nodes", "1", "--inject", "node:1@iter=60"]),
        &plain,
    );
    assert!(job.status.success(), "{}", job.out);
    assert_eq!(
        states_in(&job.out, 2),
        vec![
            (0, "REINITED".into(), 0),
            (1, "REINITED".into(), 0),
            (2, "RESTARTED".into(), 2),
            (3, "RESTARTED".into(), 2)
        ],
        "{}",
        job.out
    );
    expect_line(&job, "failed_ranks [2, 3] failed_nodes [1]");
    assert_eq!(final_value(&job.out), want);
    assert_eq!(runtime_records(&job)[0]["kind"], "node");
    assert_eq!(
        runtime_records(&job)[0]["failed_nodes"],
        serde_json::json!([1])
    );
}

#[test]
fn two_failures_in_sequence() {
    let _g = serial();
    let want = reference(&RING);
    let dir = scratch();
    let job = ring(
        dir.path(),
        &two_by_two(&["--inject", "rank:1@iter=42", "--inject", "rank:3@iter=137"]),
        &RING,
    );
    assert!(job.status.success(), "{}", job.out);
    assert_eq!(runtime_records(&job).len(), 2, "{}", job.out);
    assert_eq!(
        states_in(&job.out, 2)
            .iter()
            .filter(|e| e.1 == "RESTARTED")
            .count(),
        1
    );
    assert_eq!(states_in(&job.out, 3)[3], (3, "RESTARTED".into(), 1));
    assert_eq!(states_in(&job.out, 3)[1], (1, "REINITED".into(), 0));
    assert_eq!(final_value(&job.out), want);
    assert_no_stale_greetings(&job.out);
}

#[test]
fn two_nodes_in_one_event() {
    let _g = serial();
    let plain = ["--iterations", "300", "--pace", "4ms"];
    let want = reference(&plain);
    let dir = scratch();
    let job = ring(
        dir.path(),
        &two_by_two(&[
            "--spare-nodes",
            "2",
            "--transport",
            "tcp",
            "--inject",
            "node:0,1@400ms",
        ]),
        &plain,
    );
    assert!(job.status.success(), "{}", job.out);
    expect_line(&job, "injecting node:0,1@400ms");
    let last = entries(&job.out).iter().map(|e| e.2).max().unwrap();
    let mut nodes: Vec<u32> = states_in(&job.out, last).iter().map(|e| e.2).collect();
    nodes.sort();
    assert_eq!(nodes, vec![2, 2, 3, 3], "{}", job.out);
    assert!(
        states_in(&job.out, last).iter().all(|e| e.1 == "RESTARTED"),
        "{}",
        job.out
    );
    assert_eq!(final_value(&job.out), want);
}

#[test]
fn a_failure_during_recovery() {
    let _g = serial();
    let want = reference(&RING);
    let dir = scratch();
    // Rank 1 dies at iteration 70; rank 3 dies during that recovery, as it
    // rolls back, before it reaches the world barrier.
    let job = ring(
        dir.path(),
        &two_by_two(&["--inject", "rank:1@iter=70", "--inject", "rank:3@reinit=1"]),
        &RING,
    );
    assert!(job.status.success(), "{}", job.out);
    assert_eq!(runtime_records(&job).len(), 2, "{}", job.out);
    // Rank 3 never entered epoch 2 and restarted into epoch 3. Epoch 2's
    // release waits for the ranks that start again (rank 1), not for the
    // survivors' roll-back: the others may have entered epoch 2 before
    // rank 3's death rolled them back again, or not (then its barrier
    // never passed). Rank 1 restarted into the first epoch that began.
    let (e2, e3) = (states_in(&job.out, 2), states_in(&job.out, 3));
    assert!(e2.iter().all(|e| e.0 != 3), "{}", job.out);
    assert!(e3.contains(&(3, "RESTARTED".into(), 1)), "{}", job.out);
    let first = if e2.is_empty() { &e3 } else { &e2 };
    assert!(first.contains(&(1, "RESTARTED".into(), 0)), "{}", job.out);
    assert_eq!(final_value(&job.out), want);
}

#[test]
fn no_spare_left_is_a_clear_error_and_a_clean_exit() {
    let _g = serial();
    let dir = scratch();
    let job = ring(
        dir.path(),
        &two_by_two(&["--inject", "node:1@iter=30"]),
        &["--iterations", "200"],
    );
    assert!(!job.status.success(), "{}", job.out);
    assert!(
        job.out
            .contains("node 1 failed and no spare node is left for its ranks [2, 3]"),
        "{}",
        job.out
    );
}

#[test]
fn a_time_triggered_kill_and_redeploy_mode() {
    let _g = serial();
    let args = [
        "--iterations",
        "150",
        "--checkpoint-every",
        "10",
        "--pace",
        "4ms",
    ];
    let want = reference(&args);
    let dir = scratch();
    let job = ring(
        dir.path(),
        &two_by_two(&["--recovery", "redeploy", "--inject", "rank:0@300ms"]),
        &args,
    );
    assert!(job.status.success(), "{}", job.out);
    // Everyone was relaunched as a new process and recovered from checkpoints.
    assert_eq!(
        states_in(&job.out, 2)
            .iter()
            .map(|e| e.1.as_str())
            .collect::<Vec<_>>(),
        vec!["NEW"; 4],
        "{}",
        job.out
    );
    assert_eq!(
        job.out.matches("restored checkpoint").count(),
        4,
        "{}",
        job.out
    );
    assert_eq!(runtime_records(&job)[0]["mode"], "redeploy");
    assert_eq!(final_value(&job.out), want);
}

#[test]
fn a_hung_daemon_is_caught_by_its_heartbeat() {
    let _g = serial();
    let plain = ["--iterations", "400", "--pace", "5ms"];
    let dir = scratch();
    let run = dir.path().join("run");
    // Freeze node 1's daemon once it has launched its ranks; its heartbeats stop.
    let freezer = {
        let run = run.clone();
        std::thread::spawn(move || {
            let mut patience = common::Patience::new(std::time::Duration::from_secs(60));
            let mut polls = 0u32;
            loop {
                polls += 1;
                if polls % 64 == 0 && patience.exhausted().is_some() {
                    return false;
                }
                let procs: Vec<(i32, String)> = common::processes_mentioning(&run)
                    .into_iter()
                    .map(|pid| {
                        let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
                        (pid, String::from_utf8_lossy(&env).into_owned())
                    })
                    .collect();
                let ranks_up = procs
                    .iter()
                    .any(|(_, e)| e.contains("FRAME_RT_ROLE=rank") && e.contains("FRAME_NODE=1\0"));
                let daemon = procs
                    .iter()
                    .find(|(_, e)| e.contains("FRAME_RT_ROLE=daemon") && e.contains("\"node\":1,"));
                if let (true, Some((pid, _))) = (ranks_up, daemon) {
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(*pid),
                        nix::sys::signal::Signal::SIGSTOP,
                    );
                    return true;
                }
                std::thread::yield_now();
            }
        })
    };
    let job = ring(
        dir.path(),
        &two_by_two(&["--spare-nodes", "1", "--heartbeat-timeout", "1s"]),
        &plain,
    );
    assert!(freezer.join().unwrap(), "never found node 1's daemon");
    assert!(job.status.success(), "{}", job.out);
    assert!(
        job.out
            .contains("node 1 died (its daemon stopped sending heartbeats)"),
        "{}",
        job.out
    );
    let last = entries(&job.out).iter().map(|e| e.2).max().unwrap();
    assert!(
        states_in(&job.out, last).iter().any(|e| e.2 == 2),
        "{}",
        job.out
    );
}

#[test]
fn heat2d_recovers_a_killed_rank_bit_exactly() {
    let _g = serial();
    let heat = Heat2d::new([
        "--nx", "96", "--ny", "80", "--steps", "300", "--every", "25",
    ]);
    let dir = scratch();
    let clean = heat.frame_run(dir.path(), &two_by_two(&[]));
    assert!(clean.status.success(), "{}", clean.out);
    let failed = heat.frame_run(dir.path(), &two_by_two(&["--inject", "rank:1@iter=140"]));
    assert!(failed.status.success(), "{}", failed.out);
    assert!(
        failed.out.contains("recovered checkpoint 5 (step 125)"),
        "{}",
        failed.out
    );
    let sum = |out: &str| {
        out.lines()
            .rev()
            .find(|l| l.starts_with("final checksum: "))
            .map(str::to_string)
    };
    assert!(sum(&clean.out).is_some());
    assert_eq!(sum(&failed.out), sum(&clean.out));
}

#[test]
fn killing_the_launcher_takes_everything_with_it() {
    let _g = serial();
    let dir = scratch();
    let run = dir.path().join("run");
    let mut cmd = std::process::Command::new(common::frame_bin());
    cmd.arg("run")
        .arg("--run-dir")
        .arg(&run)
        .args(["--nodes", "2", "--ranks-per-node", "2", "--"])
        .arg(example("ring"))
        .args(["--iterations", "100000", "--pace", "1ms"])
        .env("FRAME_STORAGE_LOCAL_DIR", dir.path().join("local"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let mut child = common::ChildGuard::spawn(&mut cmd);
    let lines = child.stdout_lines();
    for _ in 0..4 {
        common::wait_for_line(&lines, "entered NEW", std::time::Duration::from_secs(60));
    }
    // Daemons and ranks, at least; standby processes may still be starting.
    assert!(common::processes_mentioning(&run).len() >= 6);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.pid()),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    child.wait(std::time::Duration::from_secs(30));
    common::assert_no_survivors(&run, std::time::Duration::from_secs(30));
}

/// The runtime's recovery records of a job's metrics file.
fn runtime_records(job: &Job) -> Vec<&serde_json::Value> {
    (job.metrics.iter())
        .filter(|m| m["event"] == "runtime_recovery")
        .collect()
}
