//! The runtime against stuck ranks, broken programs and hostile neighbours:
//! each test reproduces one way a job once hung, looped, lost its
//! configuration, or let a stranger in.

use crate::common;

use common::{example, final_value, frame_bin, frame_run, reference, ring, run, scratch, serial};
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const RING: [&str; 4] = ["--iterations", "300", "--pace", "5ms"];

/// The environment of each live process of the job running in `run`.
fn job_processes(run: &Path) -> Vec<(i32, String)> {
    common::processes_mentioning(run)
        .into_iter()
        .map(|pid| {
            let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            (pid, String::from_utf8_lossy(&env).into_owned())
        })
        .collect()
}

/// Runs `act` in a thread until the job is over (or 60 s passed); returns
/// what it returned last.
fn alongside<T: Send + 'static>(
    mut act: impl FnMut() -> Option<T> + Send + 'static,
) -> (Arc<AtomicBool>, std::thread::JoinHandle<Option<T>>) {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    let h = std::thread::spawn(move || {
        let until = Instant::now() + Duration::from_secs(60);
        let mut last = None;
        while !flag.load(Ordering::Relaxed) && Instant::now() < until {
            if let Some(v) = act() {
                last = Some(v);
            }
            std::thread::yield_now();
        }
        last
    });
    (stop, h)
}

#[test]
fn a_stopped_rank_is_killed_and_replaced() {
    let _g = serial();
    let want = reference(&RING);
    let dir = scratch();
    // Rank 2 stops itself (SIGSTOP) at iteration 50: it hangs, and every
    // other rank waits for it.
    let job = ring(
        dir.path(),
        &[
            "--nodes",
            "2",
            "--ranks-per-node",
            "2",
            "--rank-timeout",
            "1s",
            "--inject",
            "rank:2@iter=50:stop",
        ],
        &RING,
    );
    assert!(job.status.success(), "{}", job.out);
    assert!(
        job.out.contains(
            "rank 2 died (killed by its daemon: stopped responding (no heartbeat for 1s))"
        ),
        "{}",
        job.out
    );
    assert_eq!(final_value(&job.out), want);
}

#[test]
fn a_rank_stuck_in_computation_during_a_recovery_is_replaced() {
    let _g = serial();
    let args = ["--iterations", "300", "--checkpoint-every", "10"];
    let want = reference(&args);
    let dir = scratch();
    // Rank 3 gets stuck at iteration 40 without ever calling the runtime;
    // then rank 0 is killed: rank 3 never rolls back on its own.
    let mut program: Vec<&str> = args.to_vec();
    program.extend(["--spin-rank", "3", "--spin-at", "40", "--pace", "2ms"]);
    let job = ring(
        dir.path(),
        &[
            "--nodes",
            "2",
            "--ranks-per-node",
            "2",
            "--rank-timeout",
            "2s",
            "--inject",
            "rank:0@1s",
        ],
        &program,
    );
    assert!(job.status.success(), "{}", job.out);
    assert!(
        job.out.contains("rank 0 died (killed by signal 9)"),
        "{}",
        job.out
    );
    assert!(
        job.out
            .contains("rank 3 died (killed by its daemon: did not roll back within 2s"),
        "{}",
        job.out
    );
    assert_eq!(final_value(&job.out), want);
}

#[test]
fn the_launchers_configuration_reaches_the_ranks() {
    let _g = serial();
    let dir = scratch();
    let local = dir.path().join("from-config");
    let file = dir.path().join("job.toml");
    std::fs::write(
        &file,
        format!(
            "[storage]\nlocal_dir = \"{}\"\n[retention]\nkeep_on_finalize = true\n",
            local.display()
        ),
    )
    .unwrap();
    let cfg = file.display().to_string();
    // The file names local_dir, which overrides the test's environment.
    let job = common::frame_run_with(
        dir.path(),
        &["--nodes", "2", "--ranks-per-node", "1", "--config", &cfg],
        &example("ring"),
        &["--iterations", "30", "--checkpoint-every", "10"],
        &[("FRAME_STORAGE_LOCAL_DIR", None)],
    );
    assert!(job.status.success(), "{}", job.out);
    // keep_on_finalize came from the file: the checkpoints are still there,
    // in the node directories under the file's local_dir.
    let kept = common::files_under(&local);
    assert!(
        kept.iter()
            .any(|p| p.ends_with("node-1/ring/l1/ckpt-00000000000000000003/rank-000001.fck")),
        "{kept:#?}\n{}",
        job.out
    );
    assert!(!job.out.contains("warning"), "{}", job.out);
}

#[test]
fn a_program_keeping_l1_elsewhere_is_warned() {
    let _g = serial();
    let dir = scratch();
    let elsewhere = dir.path().join("elsewhere");
    let job = ring(
        dir.path(),
        &["--nodes", "1", "--ranks-per-node", "2"],
        &[
            "--iterations",
            "20",
            "--checkpoint-every",
            "5",
            "--local-dir",
            &elsewhere.display().to_string(),
        ],
    );
    assert!(job.status.success(), "{}", job.out);
    assert!(
        job.out.contains("keeps its L1 checkpoints in") && job.out.contains("set by the program"),
        "{}",
        job.out
    );
}

#[test]
fn a_program_that_never_joins_is_reported_once() {
    let _g = serial();
    for (program, args, timeout, how) in [
        ("true", vec![], "10s", "exited with status 0"),
        (
            "sleep",
            vec!["100"],
            "1s",
            "did not join the runtime within 1s",
        ),
    ] {
        let dir = scratch();
        let started = Instant::now();
        let exe = PathBuf::from(format!("/bin/{program}"));
        let job = frame_run(
            dir.path(),
            &[
                "--nodes",
                "2",
                "--ranks-per-node",
                "2",
                "--rank-timeout",
                timeout,
            ],
            &exe,
            &args,
        );
        assert!(!job.status.success(), "{}", job.out);
        let lines: Vec<&str> = job
            .out
            .lines()
            .filter(|l| l.contains("without joining"))
            .collect();
        assert_eq!(lines.len(), 1, "{}", job.out);
        assert!(lines[0].contains(how), "{}", job.out);
        assert!(
            !job.out.contains("died"),
            "no failure and respawn loop:\n{}",
            job.out
        );
        eprintln!("{program}: reported after {:?}", started.elapsed());
    }
}

#[test]
fn a_rank_failing_twice_in_one_recovery_is_listed_once() {
    let _g = serial();
    let dir = scratch();
    // Rank 2 dies at iteration 55, and its replacement dies again during
    // that recovery: one recovery, rank 2 failed (once).
    let job = ring(
        dir.path(),
        &[
            "--nodes",
            "2",
            "--ranks-per-node",
            "2",
            "--inject",
            "rank:2@iter=55",
            "--inject",
            "rank:2@reinit=1",
        ],
        &["--iterations", "200", "--checkpoint-every", "10"],
    );
    assert!(job.status.success(), "{}", job.out);
    let lists: Vec<&str> = job
        .out
        .lines()
        .filter(|l| l.contains(" entered ") && !l.contains("failed_ranks []"))
        .collect();
    assert!(!lists.is_empty(), "{}", job.out);
    for l in lists {
        assert!(l.contains("failed_ranks [2] "), "{l}\n{}", job.out);
    }
}

/// One forged data frame: rank 0's token for rank `to`, in epoch 1.
fn forged_frame() -> Vec<u8> {
    let mut f = Vec::new();
    f.extend(1u64.to_le_bytes()); // epoch
    f.extend(1u64.to_le_bytes()); // tag: ring's token
    f.extend(0u32.to_le_bytes()); // src
    f.extend(0u32.to_le_bytes());
    f.extend(8u64.to_le_bytes()); // length
    f.extend(0xdead_beef_u64.to_le_bytes());
    f
}

/// A header claiming a 2^39-byte payload.
fn huge_frame() -> Vec<u8> {
    let mut f = Vec::new();
    f.extend(1u64.to_le_bytes());
    f.extend(1u64.to_le_bytes());
    f.extend(0u32.to_le_bytes());
    f.extend(0u32.to_le_bytes());
    f.extend((1u64 << 39).to_le_bytes());
    f
}

/// A control frame: a 4-byte big-endian length, then JSON.
fn control(json: &str) -> Vec<u8> {
    let mut f = (json.len() as u32).to_be_bytes().to_vec();
    f.extend(json.as_bytes());
    f
}

#[test]
fn strangers_can_neither_join_nor_disturb_a_job() {
    let _g = serial();
    let want = reference(&RING);
    let dir = scratch();
    let run_dir = dir.path().join("run");
    let mut idle = Vec::new();
    let mut attacked = std::collections::BTreeSet::new();
    let mut modes = std::collections::BTreeSet::new();
    let (stop, h) = alongside(move || {
        let procs = job_processes(&run_dir);
        // The root's control port, from a daemon's environment.
        let root = procs.iter().find_map(|(_, e)| {
            e.split('\0')
                .find_map(|v| v.strip_prefix("FRAME_RT_ROOT="))
                .map(str::to_string)
        });
        if let Some(addr) = root.filter(|a| attacked.insert(a.clone())) {
            if let Ok(mut s) = std::net::TcpStream::connect(&addr) {
                // A fake hello for node 0, then garbage.
                let _ = s.write_all(&control(r#"{"Hello":{"node":0,"pid":1}}"#));
                let _ = s.write_all(&[0xff; 64]);
            }
            // An idle connection, held for the whole job.
            if let Ok(s) = std::net::TcpStream::connect(&addr) {
                idle.push(s);
            }
        }
        // The job's sockets are in its own directory inside the base.
        let sockets = std::fs::read_dir(&run_dir)
            .into_iter()
            .flatten()
            .flatten()
            .flat_map(|d| std::fs::read_dir(d.path()).into_iter().flatten().flatten());
        for e in sockets {
            let path = e.path();
            if path.extension().is_none_or(|x| x != "sock") {
                continue;
            }
            if let Ok(m) = std::fs::symlink_metadata(&path) {
                modes.insert(m.mode() & 0o777);
            }
            if !attacked.insert(path.display().to_string()) {
                continue;
            }
            if let Ok(mut s) = std::os::unix::net::UnixStream::connect(&path) {
                let _ = s.set_write_timeout(Some(Duration::from_millis(200)));
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                if name.starts_with("node-") {
                    let _ = s.write_all(&control(r#"{"Hello":{"rank":0,"pid":1,"epoch":1}}"#));
                } else {
                    for _ in 0..50 {
                        let _ = s.write_all(&forged_frame());
                    }
                    let _ = s.write_all(&huge_frame());
                }
            }
        }
        Some(modes.clone())
    });
    let job = ring(
        dir.path(),
        &[
            "--nodes",
            "2",
            "--ranks-per-node",
            "2",
            "--recovery",
            "redeploy",
            "--inject",
            "rank:1@iter=150",
        ],
        &RING,
    );
    stop.store(true, Ordering::Relaxed);
    let modes = h.join().unwrap().unwrap_or_default();
    assert!(job.status.success(), "{}", job.out);
    assert_eq!(final_value(&job.out), want, "{}", job.out);
    assert!(!job.out.contains("node 0 died"), "{}", job.out);
    assert_eq!(
        modes.into_iter().collect::<Vec<_>>(),
        vec![0o600],
        "sockets must be private"
    );
    let metrics = std::fs::metadata(dir.path().join("metrics.jsonl")).unwrap();
    assert_eq!(metrics.mode() & 0o777, 0o600);
}

#[test]
fn run_directories_of_others_are_left_alone() {
    let _g = serial();
    if !nix::unistd::geteuid().is_root() {
        eprintln!("needs root to make files of another user; skipped");
        return;
    }
    let dir = scratch();
    let base = dir.path().join("base");
    std::fs::create_dir(&base).unwrap();
    let theirs = base.join("run-99999-theirs");
    std::fs::create_dir(&theirs).unwrap();
    std::fs::write(theirs.join(".frame-run.lock"), b"").unwrap();
    std::os::unix::fs::chown(&theirs, Some(4242), Some(4242)).unwrap();
    let unmarked = base.join("run-99998-unmarked");
    std::fs::create_dir(&unmarked).unwrap();
    let stale = base.join("run-99997-stale");
    std::fs::create_dir(&stale).unwrap();
    std::fs::set_permissions(&stale, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::write(stale.join(".frame-run.lock"), b"").unwrap();
    let local = dir.path().join("local");
    let (status, out, err) = run(
        Command::new(frame_bin())
            .args(["run", "--nodes", "1", "--ranks-per-node", "1", "--run-dir"])
            .arg(&base)
            .arg("--")
            .arg(example("ring"))
            .args(["--iterations", "5"])
            .env("FRAME_STORAGE_LOCAL_DIR", &local),
        Duration::from_secs(120),
    );
    assert!(status.success(), "{out}{err}");
    assert!(theirs.exists(), "another user's directory was removed");
    assert!(
        unmarked.exists(),
        "a directory without frame's lock was removed"
    );
    assert!(!stale.exists(), "a stale run directory of this user stays");

    // A base directory that another user owns is refused.
    let foreign = dir.path().join("foreign");
    std::fs::create_dir(&foreign).unwrap();
    std::os::unix::fs::chown(&foreign, Some(4242), Some(4242)).unwrap();
    let (status, out, err) = run(
        Command::new(frame_bin())
            .args(["run", "--nodes", "1", "--ranks-per-node", "1", "--run-dir"])
            .arg(&foreign)
            .arg("--")
            .arg(example("ring"))
            .env("FRAME_STORAGE_LOCAL_DIR", &local),
        Duration::from_secs(120),
    );
    assert!(!status.success(), "{out}{err}");
    assert!(err.contains("owned by uid 4242"), "{err}");
}

#[test]
fn progress_is_reported_and_the_bind_address_is_checked() {
    let _g = serial();
    let dir = scratch();
    // The ranks hold at iteration 100 until the launcher has reported
    // progress: however slowly heartbeats travel, the report comes while
    // the job runs.
    let (watched, go) = held_ring(
        dir.path(),
        &[
            "--nodes",
            "1",
            "--ranks-per-node",
            "2",
            "--transport",
            "tcp",
            "--bind",
            "127.0.0.1",
        ],
    );
    std::fs::write(&go, b"go").expect("release the ranks");
    let (status, out) = watched.finish_status(Duration::from_secs(120));
    let job = common::finished_run(dir.path(), status, out);
    assert!(job.status.success(), "{}", job.out);
    assert!(
        job.out
            .contains("frame: job finished: 2 rank(s) on 1 node(s), 0 failure(s) recovered"),
        "{}",
        job.out
    );
    // An address this machine does not have: a clear error, at once.
    let (status, out, err) = run(
        Command::new(frame_bin())
            .args([
                "run",
                "--nodes",
                "1",
                "--ranks-per-node",
                "1",
                "--bind",
                "192.0.2.1",
                "--run-dir",
            ])
            .arg(dir.path().join("run"))
            .arg("--")
            .arg(example("ring"))
            .env("FRAME_STORAGE_LOCAL_DIR", dir.path().join("local")),
        Duration::from_secs(60),
    );
    assert!(!status.success(), "{out}{err}");
    assert!(err.contains("cannot listen on 192.0.2.1"), "{err}");
}

/// The nice value of every thread of process `pid` (field 19 of each
/// thread's `stat`, after the command's parentheses).
fn thread_nices(pid: i32) -> Vec<i64> {
    thread_stat_field(pid, 19)
}

/// The scheduling policy of every thread of process `pid` (0: ordinary,
/// 3: batch).
fn thread_policies(pid: i32) -> Vec<i64> {
    thread_stat_field(pid, 41)
}

/// Field `field` (numbered from 1, as proc(5) does) of every thread's
/// `stat` of process `pid`.
fn thread_stat_field(pid: i32, field: usize) -> Vec<i64> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("stat")).ok())
        .filter_map(|stat| {
            // Fields after the command's closing parenthesis start at 3.
            let rest = &stat[stat.rfind(')')? + 1..];
            rest.split_whitespace().nth(field - 3)?.parse().ok()
        })
        .collect()
}

/// ring under `frame run` with `run_args` (and progress reports), its
/// ranks held at iteration 100 until the returned file exists; returns
/// once the launcher reported progress (every rank runs).
fn held_ring(dir: &Path, run_args: &[&str]) -> (common::Watched, PathBuf) {
    held_ring_in(dir, run_args, 1, 0)
}

/// [`held_ring`], held in epoch `epoch` (after `epoch - 1` recoveries);
/// with `standbys` above zero, the ranks start iterating (and the faults
/// `run_args` inject can happen) only once the daemons report that many
/// standby processes ready.
fn held_ring_in(
    dir: &Path,
    run_args: &[&str],
    epoch: u64,
    standbys: usize,
) -> (common::Watched, PathBuf) {
    let go = dir.join("go");
    let go_arg = go.to_str().expect("utf-8 path");
    let start = dir.join("start");
    let start_arg = start.to_str().expect("utf-8 path");
    let run_args: Vec<&str> = run_args
        .iter()
        .copied()
        .chain(["--progress", "200ms"])
        .collect();
    let log = [("RUST_LOG", Some("frame_runtime::daemon=debug"))];
    let mut cmd = common::frame_run_command(
        dir,
        &run_args,
        &example("ring"),
        &[
            "--iterations",
            "200",
            "--hold-at",
            "100",
            "--hold-file",
            go_arg,
            "--hold-epoch",
            &epoch.to_string(),
        ]
        .into_iter()
        .chain(
            (standbys > 0)
                .then_some(["--start-file", start_arg])
                .into_iter()
                .flatten(),
        )
        .collect::<Vec<_>>(),
        // The daemons say when a standby is ready at debug level.
        &log[..usize::from(standbys > 0)],
    );
    let watched = common::Watched::spawn(&mut cmd);
    if standbys > 0 {
        let ready = std::cell::Cell::new(0);
        watched.wait_until(
            &format!("reporting the {standbys}th standby process ready"),
            |line| {
                ready.set(ready.get() + usize::from(line.contains("standby process ready")));
                ready.get() >= standbys
            },
            Duration::from_secs(120),
        );
        std::fs::write(&start, b"start").expect("let the ranks start");
    }
    if epoch > 1 {
        let recovered = format!("recovered from failure {}", epoch - 1);
        watched.wait_for(&[&recovered], Duration::from_secs(120));
        // Every rank at the hold.
        watched.wait_for(
            &["frame: progress: iteration 100 "],
            Duration::from_secs(120),
        );
    } else {
        watched.wait_for(&["frame: progress: iteration "], Duration::from_secs(120));
    }
    (watched, go)
}

/// The CPU group of process `pid` (its line of `/proc/PID/cgroup` for the
/// CPU controller: a cgroup v1 hierarchy with `cpu`, else cgroup v2's).
fn cpu_group_of(pid: i32) -> Option<String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let line = |l: &&str| {
        l.split(':')
            .nth(1)
            .is_some_and(|c| c.split(',').any(|c| c == "cpu"))
    };
    let found = text
        .lines()
        .find(line)
        .or_else(|| text.lines().find(|l| l.starts_with("0::")));
    found
        .and_then(|l| l.splitn(3, ':').nth(2))
        .map(str::to_string)
}

/// Whether the runtime can make CPU groups here: the launcher runs as
/// the superuser and the CPU controller has a cgroup v1 hierarchy.
fn cpu_groups_here() -> bool {
    let root = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|u| u.split_whitespace().nth(1).map(|e| e == "0"))
        })
        .unwrap_or(false);
    let v1 = std::fs::read_to_string("/proc/self/cgroup").is_ok_and(|t| {
        t.lines().any(|l| {
            l.split(':')
                .nth(1)
                .is_some_and(|c| c.split(',').any(|c| c == "cpu"))
        })
    });
    root && v1
}

/// With more ranks than cores on the machine, the daemon starts ranks
/// and managers at nice 10, so the root and the daemons (at the
/// launcher's priority) get a core as soon as they wake; every thread of
/// a rank runs at that priority. Standbys wait at the launcher's
/// priority. Where the runtime may make CPU groups, the ranks and
/// managers run in one of their own (`frame-<root's pid>`), apart from
/// the root, the daemons and the standbys; a standby that replaced a
/// failed rank joins the ranks (group and priority) once released, and
/// the group goes when the job ends.
#[test]
fn on_a_crowded_machine_ranks_and_managers_yield_to_the_runtime() {
    let _g = serial();
    let dir = scratch();
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let per_node = cores.to_string();
    // Rank 1 fails before the hold, once every node's standby is ready:
    // its replacement is a standby.
    let (watched, go) = held_ring_in(
        dir.path(),
        &[
            "--nodes",
            "2",
            "--ranks-per-node",
            &per_node,
            "--inject",
            "rank:1@iter=50",
        ],
        2,
        2,
    );
    let launcher = thread_nices(watched.pid());
    let base = launcher.first().copied().expect("the launcher's priority");
    let home = cpu_group_of(watched.pid()).expect("the launcher's CPU group");
    let ranks_group = match cpu_groups_here() {
        true => format!("{}/frame-{}", home.trim_end_matches('/'), watched.pid()),
        false => home.clone(),
    };
    let mut seen: std::collections::BTreeMap<String, usize> = Default::default();
    let mut wrong = Vec::new();
    for pid in common::processes_mentioning(dir.path()) {
        let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        let env = String::from_utf8_lossy(&env);
        let var = |name: &str| {
            env.split('\0')
                .find_map(|v| v.strip_prefix(name)?.strip_prefix('='))
                .map(str::to_string)
        };
        let Some(role) = var("FRAME_RT_ROLE") else {
            continue;
        };
        let nices = thread_nices(pid);
        let Some(group) = cpu_group_of(pid) else {
            continue;
        };
        if nices.is_empty() {
            continue;
        }
        // A standby has no rank in its environment: an idle one stays in
        // the launcher's group, the one that replaced rank 1 is in the
        // ranks' (counted apart).
        let role = match (role.as_str(), var("FRAME_RANK")) {
            ("rank", None) if group == ranks_group => "replacement".to_string(),
            ("rank", None) => "standby".to_string(),
            (r, _) => r.to_string(),
        };
        // A standby waits as batch work (policy 3).
        let (nice, policy, in_group) = match role.as_str() {
            "rank" | "manager" | "replacement" => (base.max(10), 0, &ranks_group),
            "standby" => (base, 3, &home),
            _ => (base, 0, &home),
        };
        let policies = thread_policies(pid);
        *seen.entry(role.clone()).or_default() += 1;
        if nices.iter().any(|n| *n != nice)
            || policies.iter().any(|p| *p != policy)
            || group != *in_group
        {
            wrong.push(format!(
                "{role} {pid}: threads at {nices:?}, policies {policies:?}, in group {group}; \
                 expected {nice}, {policy}, in {in_group}"
            ));
        }
    }
    let root = watched.pid();
    std::fs::write(&go, b"go").expect("release the ranks");
    let (status, out) = watched.finish_status(Duration::from_secs(120));
    assert!(status.success(), "{out}");
    assert!(out.contains("recovered from failure 1"), "{out}");
    assert!(wrong.is_empty(), "{wrong:?}");
    assert_eq!(
        seen.get("rank").copied().unwrap_or(0) + seen.get("replacement").copied().unwrap_or(0),
        2 * cores,
        "{seen:?}"
    );
    if cpu_groups_here() {
        assert_eq!(seen.get("replacement"), Some(&1), "{seen:?}");
        assert!(seen.get("standby") >= Some(&1), "{seen:?}");
        let left: Vec<_> = std::fs::read_dir("/sys/fs/cgroup/cpu")
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_name() == *format!("frame-{root}").as_str())
            .collect();
        assert!(left.is_empty(), "the job left its CPU group: {left:?}");
    }
    assert_eq!(seen.get("manager"), Some(&2), "{seen:?}");
    assert_eq!(seen.get("daemon"), Some(&2), "{seen:?}");
}
