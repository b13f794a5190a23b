//! A process failure recovered three ways, for the same heat2d job of 8
//! ranks (4 virtual nodes of 2) with MiB of grid per rank: online inside
//! MPI through ULFM (two spare processes), by relaunching the MPI job
//! (the baseline: the dead job's teardown, a new `mpirun`, the restore),
//! online under frame's own runtime (a spare node), and online through
//! ULFM with a spare process on every node (4 nodes of 3 processes: the
//! replacement is on the dead rank's node and reads its level-1 files).
//!
//! `PATH=<Open MPI 5>/bin:$PATH MPICC=<Open MPI 5>/bin/mpicc cargo bench
//! --features ulfm --bench ulfm [-- --mib N --runs R]` (defaults 16 MiB, 5
//! runs of each, alternating). Rank 7 SIGKILLs itself after step 10 (two
//! checkpoints, at steps 4 and 8, once the managers finished promoting
//! them to partner copies); the time is
//! from its kill to rank 0 having restored the checkpoint (both
//! timestamps printed by heat2d, one clock). Every run must end with the
//! fault-free checksum. Medians.
//!
//! First, without failures, what each error scope and the uniform mode
//! cost an operation on a communicator (examples/error_scopes.rs
//! `--cost`, 4 processes, `--rounds N` operations per trial, default
//! 2000), against the operation scope (ULFM's own); `--modes-only` stops
//! there.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const RANKS: usize = 8;
const SPARES: usize = 2;
const NY: usize = 1024;

fn main() {
    let arg = |name: &str, default: usize| {
        std::env::args()
            .skip_while(|a| a != name)
            .nth(1)
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let (mib, runs) = (arg("--mib", 16), arg("--runs", 5).max(1));
    modes_cost(arg("--rounds", 2000).max(1));
    if std::env::args().any(|a| a == "--modes-only") {
        return;
    }
    let heat = build(
        &["--features", "ulfm", "--example", "heat2d"],
        "examples/heat2d",
    );
    let frame = build(&["-p", "frame-cli"], "frame");
    let lib = mpi_library_dir();
    let nx = (mib << 20) * RANKS / (8 * NY);
    let grid = vec![
        "--nx".to_string(),
        nx.to_string(),
        "--ny".into(),
        NY.to_string(),
        "--steps".into(),
        "12".into(),
        "--every".into(),
        "4".into(),
        "--config".into(),
        concat!(env!("CARGO_MANIFEST_DIR"), "/config/levels.toml").into(),
    ];
    let die = [
        "--die-at",
        "10",
        "--die-rank",
        "7",
        "--die-after-promotions",
    ]
    .map(String::from);
    let shm = tempfile::Builder::new()
        .prefix("frame-bench-ulfm-")
        .tempdir_in("/dev/shm")
        .expect("a directory in /dev/shm");
    println!(
        "heat2d, {RANKS} ranks on 4 virtual nodes, {mib} MiB of grid per rank ({nx}x{NY}), rank 7 killed after step 10; {runs} runs of each, medians"
    );
    let reference = {
        let dir = shm.path().join("reference");
        let out = mpirun(
            &heat,
            &dir,
            false,
            RANKS,
            &[&grid[..], &ulfm_args(0)].concat(),
        );
        checksum(&out).expect("the fault-free run's checksum")
    };
    let mut times: [Vec<f64>; 4] = Default::default();
    let mut phases: Vec<[f64; 5]> = Vec::new();
    let mut per_node_phases: Vec<[f64; 5]> = Vec::new();
    let mut levels: [String; 4] = Default::default();
    for run in 0..runs {
        // Online through ULFM.
        let dir = shm.path().join(format!("ulfm-{run}"));
        let args = [&grid[..], &ulfm_args(SPARES), &die[..]].concat();
        let out = mpirun(&heat, &dir, true, RANKS + SPARES, &args);
        times[0].push(recovery_ms(&out, &out, &reference));
        levels[0] = level(&out);
        phases.push(split_of(&out));
        // The relaunch: the job dies with its rank, and runs again.
        let dir = shm.path().join(format!("relaunch-{run}"));
        let killed = mpirun(
            &heat,
            &dir,
            false,
            RANKS,
            &[&grid[..], &ulfm_args(0), &die[..]].concat(),
        );
        let again = mpirun(
            &heat,
            &dir,
            false,
            RANKS,
            &[&grid[..], &ulfm_args(0)].concat(),
        );
        times[1].push(recovery_ms(&killed, &again, &reference));
        levels[1] = level(&again);
        // Online under frame's own runtime.
        let dir = shm.path().join(format!("own-{run}"));
        let out = own_runtime(&frame, &heat, &lib, &dir, &[&grid[..], &die[..]].concat());
        times[2].push(recovery_ms(&out, &out, &reference));
        levels[2] = level(&out);
        // Online through ULFM, a spare on every node (4 nodes of 3).
        let dir = shm.path().join(format!("ulfm-per-node-{run}"));
        let layout = [
            "--ulfm-spares",
            "1",
            "--ulfm-spare-layout",
            "per-node",
            "--ulfm-ranks-per-node",
            "3",
        ]
        .map(String::from);
        let args = [&grid[..], &layout[..], &die[..]].concat();
        let out = mpirun(&heat, &dir, true, RANKS + 4, &args);
        times[3].push(recovery_ms(&out, &out, &reference));
        levels[3] = level(&out);
        per_node_phases.push(split_of(&out));
    }
    let m: Vec<f64> = times.into_iter().map(median).collect();
    println!(
        "{:<40} {:>12} {:>8} {:>8}",
        "recovery", "kill->restored", "level", "ratio"
    );
    let names = [
        "online, ULFM, spare process",
        "relaunch (baseline)",
        "online, frame's runtime, spare node",
        "online, ULFM, spare on the rank's node",
    ];
    for i in 0..4 {
        println!(
            "{:<40} {:>11.1}ms {:>8} {:>7.2}x",
            names[i],
            m[i],
            levels[i],
            m[1] / m[i]
        );
    }
    println!(
        "relaunch / ULFM: {:.1}x (spare on the rank's node: {:.1}x); ULFM / frame's runtime: {:.2}x ({:.2}x)",
        m[1] / m[0],
        m[1] / m[3],
        m[0] / m[2],
        m[3] / m[2]
    );
    for (name, phases) in [
        ("ULFM", &phases),
        ("ULFM, spare on the rank's node", &per_node_phases),
    ] {
        let phase = |i: usize| median(phases.iter().map(|p| p[i]).collect());
        println!(
            "{name}, split (ms): detection and unwinding {:.1}, agreement {:.1}, revoke+shrink+survivors {:.1}, split {:.1}, checkpointer and restore {:.1}",
            phase(0),
            phase(1),
            phase(2),
            phase(3),
            phase(4)
        );
    }
}

/// Runs examples/error_scopes.rs `--cost` and prints each mode's time per
/// operation against the operation scope's.
fn modes_cost(rounds: usize) {
    let program = build(
        &["--features", "ulfm", "--example", "error_scopes"],
        "examples/error_scopes",
    );
    let mut cmd = Command::new("mpirun");
    cmd.args(["--with-ft", "ulfm", "--oversubscribe", "-n", "4"]);
    if rustix::process::geteuid().is_root() {
        cmd.arg("--allow-run-as-root");
    }
    let out = cmd
        .arg(&program)
        .args(["--cost", &rounds.to_string()])
        .stdin(Stdio::null())
        .output()
        .expect("mpirun");
    let costs: Vec<(String, String, f64)> = text(&out)
        .lines()
        .filter_map(|l| {
            let mut f = l.strip_prefix("cost: ")?.split(' ');
            Some((f.next()?.into(), f.next()?.into(), f.next()?.parse().ok()?))
        })
        .collect();
    assert!(!costs.is_empty(), "no costs measured:\n{}", text(&out));
    println!(
        "fault-free cost of the error modes, 4 processes, {rounds} operations per trial, median of 5 (slowest rank), against the operation scope"
    );
    println!(
        "{:<18} {:<14} {:>10} {:>8}",
        "operation", "mode", "us/op", "ratio"
    );
    for (op, mode, us) in &costs {
        let base = costs
            .iter()
            .find(|(o, m, _)| o == op && m == "operation")
            .map_or(f64::NAN, |c| c.2);
        println!("{op:<18} {mode:<14} {us:>10.2} {:>7.2}x", us / base);
    }
}

/// A ULFM run's recovery in phases (ms): from the kill to rank 0 leaving
/// the program, the agreement, the shrink with learning the survivors,
/// the split, and from entering the program again to the restore.
fn split_of(out: &Output) -> [f64; 5] {
    let all = text(out);
    let line = all
        .lines()
        .find(|l| l.starts_with("frame (ULFM): into epoch"))
        .expect("the repair's line");
    let number = |after: &str| -> f64 {
        line.split(after)
            .nth(1)
            .and_then(|t| t.split_whitespace().next())
            .and_then(|t| t.trim_end_matches(',').parse().ok())
            .expect("a figure of the repair's line")
    };
    let left = number("unix ns ");
    let kill = stamp(out, "dying at").expect("the kill's time") as f64;
    let restored = stamp(out, "rank 0 restored").expect("the restore's time") as f64;
    let (agreement, split) = (number("agreement "), number("split "));
    let shrink = number("shrink ") + number("start ");
    let detection = (left - kill) / 1e6;
    let restore = (restored - left) / 1e6 - agreement - shrink - split;
    [detection, agreement, shrink, split, restore]
}

/// heat2d's flags for a job under ULFM with `spares`.
fn ulfm_args(spares: usize) -> Vec<String> {
    [
        "--ulfm-spares".to_string(),
        spares.to_string(),
        "--ulfm-ranks-per-node".into(),
        "2".into(),
    ]
    .to_vec()
}

/// Builds `what` in release mode; the path of `produces` in the profile.
fn build(what: &[&str], produces: &str) -> PathBuf {
    let status = Command::new(env!("CARGO"))
        .arg("build")
        .arg("--release")
        .args(what)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .expect("cargo build");
    assert!(status.success(), "building {what:?} failed");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"));
    let target = if target.is_absolute() {
        target
    } else {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(target)
    };
    target.join("release").join(produces)
}

/// The `lib` directory of the `mpirun` on the `PATH`.
fn mpi_library_dir() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mpirun = std::env::split_paths(&path)
        .map(|d| d.join("mpirun"))
        .find(|p| p.is_file())
        .expect("mpirun on the PATH (Open MPI 5 with ULFM: see docs/ULFM.md)");
    let real = std::fs::canonicalize(&mpirun).unwrap_or(mpirun);
    real.parent()
        .and_then(Path::parent)
        .map(|p| p.join("lib"))
        .expect("mpirun's installation")
}

/// Runs heat2d under `mpirun` (with ULFM if `ft`) on `procs` processes,
/// storage in `dir`.
fn mpirun(heat: &Path, dir: &Path, ft: bool, procs: usize, args: &[String]) -> Output {
    let mut cmd = Command::new("mpirun");
    if ft {
        cmd.args(["--with-ft", "ulfm"]);
    }
    cmd.args(["--oversubscribe", "-n", &procs.to_string()]);
    if rustix::process::geteuid().is_root() {
        cmd.arg("--allow-run-as-root");
    }
    cmd.arg(heat)
        .args(args)
        .args(["--job", "bench"])
        .env("FRAME_STORAGE_LOCAL_DIR", dir.join("l1"))
        .env("FRAME_STORAGE_GLOBAL_DIR", dir.join("global"))
        .stdin(Stdio::null())
        .output()
        .expect("mpirun")
}

/// Runs heat2d under `frame run` (4 nodes of 2 and a spare node).
fn own_runtime(frame: &Path, heat: &Path, lib: &Path, dir: &Path, args: &[String]) -> Output {
    Command::new(frame)
        .args([
            "run",
            "--nodes",
            "4",
            "--ranks-per-node",
            "2",
            "--spare-nodes",
            "1",
        ])
        .arg("--run-dir")
        .arg(dir.join("run"))
        .arg("--")
        .arg(heat)
        .args(args)
        .args(["--job", "bench"])
        .env("FRAME_STORAGE_LOCAL_DIR", dir.join("l1"))
        .env("FRAME_STORAGE_GLOBAL_DIR", dir.join("global"))
        .env("LD_LIBRARY_PATH", lib)
        .stdin(Stdio::null())
        .output()
        .expect("frame run")
}

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

/// The number after `unix ns ` on the first line containing `what`.
fn stamp(out: &Output, what: &str) -> Option<u128> {
    text(out)
        .lines()
        .find(|l| l.contains(what))
        .and_then(|l| l.split("unix ns ").nth(1))
        .and_then(|t| t.trim_end_matches(')').parse().ok())
}

fn checksum(out: &Output) -> Option<String> {
    text(out)
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("final checksum: "))
        .map(str::to_string)
}

/// Milliseconds from the kill (in `killed`) to rank 0's restore (in
/// `restored`), once the run is checked to end with `reference`.
fn recovery_ms(killed: &Output, restored: &Output, reference: &str) -> f64 {
    assert_eq!(
        checksum(restored).as_deref(),
        Some(reference),
        "{}",
        text(restored)
    );
    let from = stamp(killed, "dying at").expect("the kill's time");
    let to = stamp(restored, "rank 0 restored").expect("the restore's time");
    (to.saturating_sub(from)) as f64 / 1e6
}

/// The level rank 0 restored from.
fn level(out: &Output) -> String {
    text(out)
        .lines()
        .find_map(|l| l.split(" from ").nth(1))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or("?")
        .to_string()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}
