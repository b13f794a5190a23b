//! Another local user holding every job listener's table of handshakes in
//! progress full of silent connections (up to a thousand), re-opening
//! them as fast as they are dropped, does not
//! keep the job's own processes out: a rank killed during the flood is
//! replaced and reaches its peers over TCP (online), or the job is
//! redeployed and its daemons reach the root's control port.

use crate::common;

use common::{final_value, frame_run, is_child, reference, scratch, self_as_child, serial};
use common::{wait_for_line, ChildGuard};
use std::collections::BTreeSet;
use std::io::Read;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// Connections the attacker holds.
const FLOOD: usize = 1000;
/// The job's TCP listeners: the root's control port and one per rank.
const JOB_PORTS: usize = 5;
/// Connections opened to one port before the attacker says it floods it
/// (most of the 128 handshakes a listener holds).
const SATURATED: usize = 100;
const PORTS: &str = "FRAME_TEST_FLOOD_PORTS";
const STOP: &str = "FRAME_TEST_FLOOD_STOP";
/// How often the attacker looks for connections the listeners closed.
const SWEEP: Duration = Duration::from_millis(50);

/// Ports listening on 127.0.0.1, with their sockets' inodes (from
/// /proc/net/tcp, readable by anyone).
fn listening() -> Vec<(u16, u64)> {
    let text = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (ip, port) = f.get(1)?.split_once(':')?;
            let inode = f.get(9)?.parse().ok()?;
            (ip == "0100007F" && f.get(3) == Some(&"0A"))
                .then(|| Some((u16::from_str_radix(port, 16).ok()?, inode)))?
        })
        .collect()
}

/// The ports the job of `scratch` listens on: those of the sockets its
/// processes (the root, daemons and ranks, whose environment names the
/// directory) hold open.
fn job_ports(scratch: &Path) -> BTreeSet<u16> {
    let mut inodes = BTreeSet::new();
    for pid in common::processes_mentioning(scratch) {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            let target = std::fs::read_link(fd.path()).unwrap_or_default();
            let target = target.to_string_lossy();
            if let Some(inode) = target
                .strip_prefix("socket:[")
                .and_then(|t| t.strip_suffix(']'))
            {
                inodes.extend(inode.parse::<u64>());
            }
        }
    }
    (listening().into_iter())
        .filter(|(_, inode)| inodes.contains(inode))
        .map(|(port, _)| port)
        .collect()
}

/// Until `stop` exists, keeps `file` (readable by the attacker) listing
/// the ports the job of `scratch` listens on, a port a line.
fn scout(scratch: PathBuf, file: PathBuf, stop: PathBuf) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let tmp = file.with_extension("tmp");
        while !stop.exists() {
            let text: Vec<String> = job_ports(&scratch).iter().map(u16::to_string).collect();
            if std::fs::write(&tmp, text.join("\n")).is_ok() {
                let _ = std::fs::rename(&tmp, &file);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    })
}

/// The attacker: floods the job's ports (as the test's scout lists them:
/// other tests' listeners on the machine are left alone, so that neither
/// they nor the flood are slowed by each other), keeping up to [`FLOOD`]
/// silent connections open (at most `FLOOD / JOB_PORTS` to a port), until
/// told to stop. A listener of the
/// job holds at most 128 handshakes in progress, dropping the oldest for
/// a new one, so that is about what one port keeps open. Prints one line
/// once it has opened [`SATURATED`] connections to each of at least
/// [`JOB_PORTS`] ports. Counting what it opened, not what it holds at one
/// instant, keeps the verdict off the machine's speed: a listener drops a
/// silent connection after the handshake timeout (5 s), and a slow
/// attacker (a debug build on a loaded machine) may never hold 100 on
/// five ports at once, while it keeps flooding all of them.
#[test]
#[ignore = "runs as the child process of the flood test"]
fn flood_child() {
    if !is_child() {
        return;
    }
    let targets = PathBuf::from(std::env::var_os(PORTS).unwrap());
    let stop = PathBuf::from(std::env::var_os(STOP).unwrap());
    // The connections held, by port, at most FLOOD / JOB_PORTS each: the
    // ports that listen first (the root's, before the ranks start) cannot
    // take all of them.
    let mut conns: Vec<(u16, TcpStream)> = Vec::new();
    let per_port = FLOOD / JOB_PORTS;
    let (mut next, mut announced) = (0usize, false);
    let mut opened: std::collections::BTreeMap<u16, usize> = Default::default();
    let mut buf = [0u8; 256];
    let mut swept = std::time::Instant::now();
    while !stop.exists() {
        let wanted: BTreeSet<u16> = (std::fs::read_to_string(&targets).unwrap_or_default())
            .lines()
            .filter_map(|p| p.parse().ok())
            .collect();
        let ports: Vec<u16> = (listening().into_iter())
            .map(|(port, _)| port)
            .filter(|p| wanted.contains(p))
            .collect();
        // A connection the listener closed is opened again.
        if swept.elapsed() >= SWEEP {
            swept = std::time::Instant::now();
            conns.retain_mut(|(_, s)| match s.read(&mut buf) {
                Ok(0) => false,
                Ok(_) => true,
                Err(e) => e.kind() == std::io::ErrorKind::WouldBlock,
            });
        }
        let mut tried = 0;
        while conns.len() < FLOOD && tried < ports.len() {
            let port = ports[next % ports.len()];
            next += 1;
            if conns.iter().filter(|(p, _)| *p == port).count() >= per_port {
                tried += 1;
                continue;
            }
            // A listener whose backlog is full drops the handshake: a
            // plain connect would wait for the kernel's retries (minutes)
            // and the flood would stall on that one port.
            let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
            let Ok(s) = TcpStream::connect_timeout(&addr, Duration::from_millis(250)) else {
                tried += 1;
                continue;
            };
            tried = 0;
            let _ = s.set_nonblocking(true);
            conns.push((port, s));
            *opened.entry(port).or_default() += 1;
        }
        let flooded: Vec<u16> = (opened.iter())
            .filter(|(_, n)| **n >= SATURATED)
            .map(|(p, _)| *p)
            .collect();
        if flooded.len() >= JOB_PORTS && !announced {
            println!(
                "flood: holding {} connections to ports {ports:?}, {SATURATED} opened to each of {flooded:?}",
                conns.len()
            );
            announced = true;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Starts the attacker on the ports listed in `ports`, as user `nobody`
/// when this test runs as root.
fn attacker(ports: &Path, stop: &Path) -> ChildGuard {
    let mut cmd = self_as_child(concat!(module_path!(), "::flood_child"));
    cmd.env(PORTS, ports)
        .env(STOP, stop)
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if rustix::process::getuid().is_root() {
        use std::os::unix::process::CommandExt;
        cmd.uid(65534).gid(65534);
    }
    ChildGuard::spawn(&mut cmd)
}

/// The pid of rank `rank` of the job whose run directory is `run`.
fn rank_pid(run: &Path, rank: u32, deadline: Duration) -> i32 {
    let want = format!("FRAME_RANK={rank}").into_bytes();
    common::patience::poll(deadline, Duration::from_millis(20), || {
        common::processes_mentioning(run).into_iter().find(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .unwrap_or_default()
                .split(|b| *b == 0)
                .any(|v| v == want.as_slice())
        })
    })
    .unwrap_or_else(|why| panic!("no rank {rank} in {}: {why}", run.display()))
}

#[test]
fn a_flood_of_silent_connections_keeps_no_process_of_the_job_out() {
    if is_child() {
        return;
    }
    let _g = serial();
    let program = ["--iterations", "300", "--pace", "2ms"];
    let expected = reference(&program);
    // The job waits at iteration 100 until the rank dies, however long the
    // attacker takes to open its connections.
    let held: Vec<&str> = program
        .iter()
        .copied()
        .chain(["--hold-at", "100"])
        .collect();
    for mode in ["online", "redeploy"] {
        let dir = scratch();
        let stop = dir.path().join("stop-flood");
        let ports = dir.path().join("job-ports");
        let scouting = scout(dir.path().to_path_buf(), ports.clone(), stop.clone());
        let mut flood = attacker(&ports, &stop);
        let lines = flood.stdout_lines();
        let base = dir.path().to_path_buf();
        let held = held.clone();
        let job = std::thread::spawn(move || {
            let args = [
                "--transport",
                "tcp",
                "--nodes",
                "2",
                "--ranks-per-node",
                "2",
                "--recovery",
                mode,
            ];
            frame_run(&base, &args, &common::example("ring"), &held)
        });
        // Once the attacker holds its connections to every listener of
        // the job, a rank dies. Flooding is CPU work on both sides (the
        // listeners check every handshake); beside other tests on two
        // cores the test's processes once used the 120 s of CPU a 60 s
        // limit allows before the attacker opened enough.
        wait_for_line(&lines, "flood: holding", Duration::from_secs(180));
        let pid = rank_pid(&dir.path().join("run"), 1, Duration::from_secs(60));
        rustix::process::kill_process(
            rustix::process::Pid::from_raw(pid).unwrap(),
            rustix::process::Signal::KILL,
        )
        .unwrap();
        let job = job.join().unwrap();
        std::fs::write(&stop, b"").unwrap();
        flood.wait(Duration::from_secs(30));
        scouting.join().unwrap();
        assert!(job.status.success(), "{mode}: {}", job.out);
        assert!(
            job.out.contains("1 failure(s) recovered"),
            "{mode}: {}",
            job.out
        );
        assert_eq!(final_value(&job.out), expected, "{mode}");
    }
}
