//! Online recovery across hosts, against the same job on one machine and
//! against redeploying it across the hosts.
//!
//! The same heat2d job (4 nodes of 2 ranks, 1 spare node, partner copies
//! at every checkpoint) runs on virtual nodes of this machine and on 5
//! virtual hosts (network and mount namespaces with their own sshd and RAM
//! disk, as `tests/cluster/hosts.rs` builds them; needs root), with a rank or a
//! node killed at step 1234. The figure is the root's runtime recovery
//! time (detection to the world barrier), median of the runs; the runs of
//! the three set-ups alternate. Run: `sudo cargo bench --bench hosts`.

#[path = "../tests/common/patience.rs"]
#[allow(dead_code)]
mod patience;
mod support;
#[path = "../tests/common/tools.rs"]
#[allow(dead_code)]
mod tools;
#[path = "../tests/common/vhost.rs"]
#[allow(dead_code)]
mod vhost;

use std::path::Path;
use std::process::{Command, Stdio};
use support::heat2d;

const RUNS: usize = 7;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Runs the job once with `launch` options and returns its recovery time
/// in milliseconds.
fn run(exe: &Path, launch: &[String], fault: &str, dir: &Path, local: &Path) -> f64 {
    let metrics = dir.join("metrics.jsonl");
    let _ = std::fs::remove_file(&metrics);
    let out = Command::new(exe)
        .args(["--steps", "2000", "--every", "100", "--inject", fault])
        .args(launch)
        .arg("--metrics")
        .arg(&metrics)
        .env("FRAME_STORAGE_LOCAL_DIR", local)
        .env("FRAME_STORAGE_GLOBAL_DIR", dir.join("global"))
        .env("FRAME_L2_INTERVAL", "1")
        .stdin(Stdio::null())
        .output()
        .expect("run heat2d");
    assert!(
        out.status.success(),
        "heat2d failed with {launch:?} {fault}:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&metrics).expect("metrics");
    let record: serde_json::Value =
        serde_json::from_str(text.lines().next().expect("one recovery")).expect("json");
    record["runtime_recovery_ms"].as_f64().unwrap_or(f64::NAN)
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn main() {
    let exe = heat2d();
    let cluster = vhost::Cluster::start(5);
    let dir = tempfile::Builder::new()
        .prefix("bench-hosts-")
        .tempdir_in(cluster.shared_dir())
        .expect("temp dir");
    let one_host_local = tempfile::Builder::new()
        .prefix("bench-hosts-local-")
        .tempdir_in("/dev/shm")
        .expect("RAM disk dir");
    let on_hosts = |mode: &str| {
        strings(&[
            "--hosts",
            &cluster.list(0..5, 2),
            "--spare-nodes",
            "1",
            "--launcher-command",
            &cluster.launcher_command(),
            "--recovery",
            mode,
        ])
    };
    let setups: [(&str, Vec<String>, &Path); 3] = [
        (
            "one machine, online",
            strings(&[
                "--nodes",
                "4",
                "--ranks-per-node",
                "2",
                "--spare-nodes",
                "1",
            ]),
            one_host_local.path(),
        ),
        (
            "4 hosts, online",
            on_hosts("online"),
            Path::new("/dev/shm/frame-bench-hosts"),
        ),
        (
            "4 hosts, redeploy",
            on_hosts("redeploy"),
            Path::new("/dev/shm/frame-bench-hosts"),
        ),
    ];
    println!(
        "heat2d 512x512, 2000 steps, checkpoint every 100 (L1 + L2), 8 ranks on 4 nodes + 1 spare; \
         failure at step 1234; runtime recovery (detection to world barrier), median of {RUNS} runs"
    );
    println!(
        "{:>12} {:>20} | {:>9} | {:>16} {:>18}",
        "failure", "set-up", "ms", "vs one machine", "redeploy / this"
    );
    let faults: Vec<String> = match std::env::var("FRAME_BENCH_FAULTS") {
        Ok(f) => f.split(',').map(String::from).collect(),
        Err(_) => strings(&["rank:7@iter=1234", "node:2@iter=1234"]),
    };
    for fault in &faults {
        let mut times: Vec<Vec<f64>> = vec![Vec::new(); setups.len()];
        for _ in 0..RUNS {
            for (i, (_, launch, local)) in setups.iter().enumerate() {
                times[i].push(run(&exe, launch, fault, dir.path(), local));
                // A node whose daemon was killed keeps its files on its
                // host: the next job must not find them.
                cluster.remove_everywhere(local);
                let _ = std::fs::remove_dir_all(local);
                let _ = std::fs::remove_dir_all(dir.path().join("global"));
            }
        }
        let med: Vec<f64> = times.into_iter().map(median).collect();
        for (i, (name, _, _)) in setups.iter().enumerate() {
            println!(
                "{:>12} {:>20} | {:>9.2} | {:>15.2}x {:>17.1}x",
                fault.split('@').next().unwrap_or(fault),
                name,
                med[i],
                med[i] / med[0],
                med[2] / med[i]
            );
        }
    }
}
