//! Memory and node-local storage of a job with every level on, under
//! `frame run` (heat2d: 8 ranks on 4 virtual nodes, levels 2, 3 and 4):
//! the peak resident memory of every process by role (root, daemons,
//! managers, ranks: the role the runtime gave it, `FRAME_RT_ROLE` in its
//! environment) and the peak bytes each node's directory held, at 16 and
//! 256 MiB per rank (`FRAME_BENCH_MIB=16,256` by default).
//!
//! A process's resident memory is split in two, sampled while the job
//! runs: its private memory (`RssAnon`: buffers, the program's arrays) and
//! the node-local files it has mapped (`RssShmem`: pages of the RAM disk,
//! which the node's storage already counts). A manager that held a
//! checkpoint to move it would show it in its private memory.
//!
//! Baselines from the same run: a manager's and a rank's peak against the
//! rank's data (a manager that held a checkpoint to move it would be at
//! 1x or more of a node's data), and every node's peak against the
//! formula of docs/STORAGE.md.

mod support;

// The tests' storage watch: its `held` counts each file once.
#[allow(dead_code)]
#[path = "../tests/common/storage.rs"]
mod storage;

use storage::held;

use frame::config::{Config, Interval, NodeData};
use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const NODES: u32 = 4;
const PER_NODE: u32 = 2;

/// Resident memory of a process now, if it still runs: private
/// (`RssAnon`) and mapped shared files (`RssShmem`), in bytes.
fn resident(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<u64> {
        let line = status.lines().find(|l| l.starts_with(name))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib << 10)
    };
    Some((field("RssAnon:")?, field("RssShmem:")?))
}

/// The role the runtime started process `pid` in (`FRAME_RT_ROLE`), or
/// `root` for the launcher, which has none.
fn role_of(pid: u32) -> Option<&'static str> {
    let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let role = env.split(|b| *b == 0).find_map(|v| {
        v.strip_prefix(frame::env::ROLE.as_bytes())?
            .strip_prefix(b"=")
    });
    Some(match role {
        Some(b"rank") => "rank",
        Some(b"daemon") => "daemon",
        Some(b"manager") => "manager",
        _ => "root",
    })
}

/// Every process of the tree under `root`.
fn tree(root: u32) -> Vec<u32> {
    let mut all = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(ppid) = stat
            .rsplit(')')
            .next()
            .and_then(|r| r.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        all.push((pid, ppid));
    }
    let mut inside: HashSet<u32> = HashSet::from([root]);
    let mut grew = true;
    while grew {
        grew = false;
        for (pid, ppid) in &all {
            if inside.contains(ppid) && inside.insert(*pid) {
                grew = true;
            }
        }
    }
    all.into_iter()
        .map(|(p, _)| p)
        .filter(|p| inside.contains(p))
        .collect()
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

/// `base` holds the node-local directories (a RAM disk when there is one),
/// `disk` the global directory (level 4, the parallel file system's
/// stand-in).
fn run(heat2d: &Path, mib: u64, base: &Path, disk: &Path) {
    // A square grid of doubles holding `mib` MiB per rank.
    let cells = (mib << 20) / 8 * u64::from(NODES * PER_NODE);
    let side = ((cells as f64).sqrt() as u64).to_string();
    let local = base.join(format!("local-{mib}"));
    let global = disk.join(format!("global-{mib}"));
    std::fs::create_dir_all(&local).expect("local dir");
    let started = Instant::now();
    let mut child = Command::new(heat2d)
        .args([
            "--nodes",
            &NODES.to_string(),
            "--ranks-per-node",
            &PER_NODE.to_string(),
        ])
        .args([
            "--nx", &side, "--ny", &side, "--steps", "10", "--every", "1",
        ])
        .env("FRAME_STORAGE_LOCAL_DIR", &local)
        .env("FRAME_STORAGE_GLOBAL_DIR", &global)
        .env("FRAME_L2_INTERVAL", "1")
        .env("FRAME_L3_INTERVAL", "2")
        .env("FRAME_L4_INTERVAL", "4")
        .env("FRAME_RETENTION_KEEP_ON_FINALIZE", "true")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("heat2d");
    let root = child.id();
    let mut roles: BTreeMap<u32, &str> = BTreeMap::new();
    // Per process: peak private and peak mapped-file memory.
    let mut rss: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
    let mut disk: BTreeMap<u32, u64> = BTreeMap::new();
    while child.try_wait().expect("wait").is_none() {
        for pid in tree(root) {
            if let Some(role) = role_of(pid) {
                roles.entry(pid).or_insert(role);
            }
            if let Some((private, mapped)) = resident(pid) {
                let e = rss.entry(pid).or_insert((0, 0));
                *e = (e.0.max(private), e.1.max(mapped));
            }
        }
        for n in 0..NODES {
            let now = held(&local.join(format!("node-{n}")));
            let e = disk.entry(n).or_insert(0);
            *e = (*e).max(now);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("output");
    assert!(
        out.status.success(),
        "heat2d failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let secs = started.elapsed().as_secs_f64();
    let mut by_role: BTreeMap<&str, Vec<(u64, u64)>> = BTreeMap::new();
    for (pid, r) in &rss {
        if let Some(role) = roles.get(pid) {
            by_role.entry(role).or_default().push(*r);
        }
    }
    let data = mib << 20;
    println!("{mib} MiB per rank, 8 ranks on 4 nodes, levels 2 (every), 3 (every 2), 4 (every 4), 10 checkpoints, {secs:.1} s:");
    for (role, v) in &by_role {
        let private: Vec<u64> = v.iter().map(|r| r.0).collect();
        let mapped: Vec<u64> = v.iter().map(|r| r.1).collect();
        let max = private.iter().copied().max().unwrap_or(0);
        println!(
            "  {role:8} x{}: peak private memory median {} MiB, max {} MiB = {:.2}x a rank's data; mapped node-local files median {} MiB",
            v.len(),
            median(private) >> 20,
            max >> 20,
            max as f64 / data as f64,
            median(mapped) >> 20,
        );
    }
    let mut cfg = Config::default();
    cfg.l2.interval = Interval::Calls(1);
    cfg.l3.interval = Interval::Calls(2);
    cfg.l4.interval = Interval::Calls(4);
    let own = data * u64::from(PER_NODE);
    let need = cfg.storage_need(NodeData {
        own,
        partner: own,
        largest_blob: own + (64 << 10),
        group: NODES,
    });
    for (n, d) in &disk {
        println!(
            "  node {n}: peak {} MiB of local storage = {:.2}x the node's data, {:.2} of the formula's {} MiB",
            d >> 20,
            *d as f64 / own as f64,
            *d as f64 / need.total() as f64,
            need.total() >> 20
        );
    }
    let _ = std::fs::remove_dir_all(&local);
    let _ = std::fs::remove_dir_all(&global);
}

fn main() {
    let heat2d = support::heat2d();
    let sizes: Vec<u64> = std::env::var("FRAME_BENCH_MIB")
        .unwrap_or_else(|_| "16,256".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let shm = Path::new("/dev/shm");
    let base = tempfile::Builder::new()
        .prefix("frame-bench-memory-")
        .tempdir_in(if shm.is_dir() { shm } else { Path::new("/tmp") })
        .expect("temp dir");
    let disk = tempfile::Builder::new()
        .prefix("frame-bench-memory-")
        .tempdir()
        .expect("temp dir");
    for mib in sizes {
        run(&heat2d, mib, base.path(), disk.path());
    }
}
