//! A failure recovered six ways, for the same heat2d job of `--ranks`
//! ranks (virtual nodes of 2) with `--mib` MiB of grid per rank: online
//! inside MPI through ULFM with a spare process (two spares, the job's
//! last processes), with a new process started for each failed rank
//! (`ulfm.spawn`, no spares: the paper "Reinit++"'s ULFM way), with a
//! spare on every node (nodes of 3 processes: a process failure's
//! replacement reads the rank's level-1 files on its own node); online
//! under frame's own runtime (a spare node); by hand, the same solver
//! with in-memory buddy copies and ULFM calls of its own
//! (examples/heat2d_buddy, two spares: what frame's ULFM mode is held
//! to); and the baseline, relaunching the MPI job (the dead job's
//! teardown, a new `mpirun`, the restore).
//! Two failures: the last rank SIGKILLs itself, or the last node's two
//! ranks do (`--node`; its level-1 storage removed: no spare per node
//! then, as a dead node takes its spare).
//!
//! `PATH=<Open MPI 5>/bin:$PATH MPICC=<Open MPI 5>/bin/mpicc cargo bench
//! --features ulfm --bench ulfm [-- --ranks N --mib M --runs R --node]`
//! (defaults 8 ranks, 16 MiB, 5 runs of each, alternating). The kill
//! comes after step 10 (two checkpoints, at steps 4 and 8, once the
//! managers finished promoting them to partner copies); the time is from
//! the kill to rank 0 having restored the checkpoint (both timestamps
//! printed by heat2d, one clock), split as the runtime reports it. Every
//! run must end with the fault-free checksum. Medians. Then the
//! fault-free run's wall time of each way against the same job under
//! plain MPI (`mpirun` without `--with-ft ulfm`): the cost of being able
//! to recover.
//!
//! First, without failures, what each error scope and the uniform mode
//! cost an operation on a communicator (examples/error_scopes.rs
//! `--cost`, 4 processes, `--rounds N` operations per trial, default
//! 2000), against the operation scope (ULFM's own); `--modes-only` stops
//! there, `--no-modes` skips it (and the next).
//!
//! Then the shrink and the reload of a recovery in turn and overlapped
//! (examples/shrink_overlap.rs, 4 processes, one killed, `--trials N`
//! trials of each order, default 15, at 1, 4 and 16 MiB per process).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const NY: usize = 1024;

/// How a way of recovering is run.
#[derive(Clone, Copy)]
enum Way {
    /// ULFM with these heat2d flags and this many processes beyond the
    /// working ranks.
    Ulfm(&'static [&'static str], usize),
    /// ULFM with `n` spares per node of 3 (nodes of 3 processes).
    UlfmPerNode,
    /// frame's own runtime with a spare node.
    Own,
    /// The same solver recovered by hand through ULFM, with in-memory
    /// buddy copies and two spares (examples/heat2d_buddy): the
    /// baseline of frame's ULFM mode.
    ByHand,
    /// The relaunch.
    Relaunch,
}

const WAYS: [(&str, Way); 6] = [
    (
        "online, ULFM, spare process",
        Way::Ulfm(&["--ulfm-spares", "2"], 2),
    ),
    (
        "online, ULFM, new process (spawn)",
        Way::Ulfm(&["--ulfm-spares", "0", "--ulfm-spawn"], 0),
    ),
    ("online, ULFM, spare on the rank's node", Way::UlfmPerNode),
    ("online, frame's runtime, spare node", Way::Own),
    ("online, ULFM by hand, buddy copies", Way::ByHand),
    ("relaunch (baseline)", Way::Relaunch),
];

fn main() {
    let arg = |name: &str, default: usize| {
        std::env::args()
            .skip_while(|a| a != name)
            .nth(1)
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let flag = |name: &str| std::env::args().any(|a| a == name);
    let (mib, runs) = (arg("--mib", 16), arg("--runs", 5).max(1));
    let ranks = (arg("--ranks", 8).max(4) / 2) * 2;
    let node = flag("--node");
    if !flag("--no-modes") {
        modes_cost(arg("--rounds", 2000).max(1));
        overlap(arg("--trials", 15).max(1));
    }
    if flag("--modes-only") {
        return;
    }
    let heat = build(
        &["--features", "ulfm", "--example", "heat2d"],
        "examples/heat2d",
    );
    let frame = build(&["-p", "frame-cli"], "frame");
    let by_hand = build(
        &["--features", "ulfm", "--example", "heat2d_buddy"],
        "examples/heat2d_buddy",
    );
    let lib = mpi_library_dir();
    let nx = (mib << 20) * ranks / (8 * NY);
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
    let victim = if node { ranks / 2 - 1 } else { ranks - 1 };
    let die = [
        "--die-at",
        "10",
        if node { "--die-node" } else { "--die-rank" },
        &victim.to_string(),
        "--die-after-promotions",
        "--measure",
    ]
    .map(String::from);
    let shm = tempfile::Builder::new()
        .prefix("frame-bench-ulfm-")
        .tempdir_in("/dev/shm")
        .expect("a directory in /dev/shm");
    let failure = if node {
        format!(
            "node {victim} (ranks {} and {}) killed",
            ranks - 2,
            ranks - 1
        )
    } else {
        format!("rank {victim} killed")
    };
    println!(
        "heat2d, {ranks} ranks on {} virtual nodes, {mib} MiB of grid per rank ({nx}x{NY}), {failure} after step 10; {runs} runs of each, medians",
        ranks / 2
    );
    let ways: Vec<(&str, Way)> = WAYS
        .iter()
        .copied()
        // A node takes a rank and its buddy: nothing to recover from by
        // hand.
        .filter(|(_, w)| !(node && matches!(w, Way::UlfmPerNode | Way::ByHand)))
        .collect();
    let run_way = |way: Way, dir: &Path, extra: &[String]| -> Output {
        let args = [&grid[..], extra].concat();
        match way {
            Way::Ulfm(flags, more) => {
                let flags: Vec<String> = flags.iter().map(|f| f.to_string()).collect();
                let nodes = ["--ulfm-ranks-per-node", "2"].map(String::from);
                mpirun(
                    &heat,
                    dir,
                    true,
                    ranks + more,
                    &[&args[..], &flags, &nodes].concat(),
                )
            }
            Way::UlfmPerNode => {
                let layout = [
                    "--ulfm-spares",
                    "1",
                    "--ulfm-spare-layout",
                    "per-node",
                    "--ulfm-ranks-per-node",
                    "3",
                ]
                .map(String::from);
                mpirun(
                    &heat,
                    dir,
                    true,
                    ranks / 2 * 3,
                    &[&args[..], &layout].concat(),
                )
            }
            Way::Own => own_runtime(&frame, &heat, &lib, dir, ranks / 2, &args),
            Way::ByHand => {
                // The solver's flags (not frame's configuration), and the
                // kill's time and rank.
                let mut args: Vec<String> = grid[..grid.len() - 2].to_vec();
                if extra.iter().any(|a| a == "--die-at") {
                    args.extend(["--die-at", "10", "--die-rank"].map(String::from));
                    args.push(victim.to_string());
                }
                let session = dir.join("mpirun");
                std::fs::create_dir_all(&session).expect("mpirun's session directory");
                mpirun_command(true, ranks + 2, &session)
                    .arg(&by_hand)
                    .args(&args)
                    .stdin(Stdio::null())
                    .output()
                    .expect("mpirun")
            }
            Way::Relaunch => {
                let nodes = ["--ulfm-spares", "0", "--ulfm-ranks-per-node", "2"].map(String::from);
                mpirun(&heat, dir, false, ranks, &[&args[..], &nodes].concat())
            }
        }
    };
    // The fault-free run: its checksum, and each way's time in the
    // program against plain MPI's.
    let mut plain = Vec::new();
    let mut fault_free: Vec<Vec<f64>> = vec![Vec::new(); ways.len()];
    let mut reference = String::new();
    for run in 0..runs {
        // Each round starts with another way; every run's storage goes
        // before the next starts (RAM disks of earlier runs would press
        // on memory).
        for k in 0..ways.len() {
            let i = (k + run) % ways.len();
            let dir = shm.path().join(format!("fault-free-{i}-{run}"));
            let out = run_way(ways[i].1, &dir, &[]);
            let sum = checksum(&out).expect("the fault-free run's checksum");
            if reference.is_empty() {
                reference = sum;
            } else {
                assert_eq!(sum, reference, "{}", text(&out));
            }
            if matches!(ways[i].1, Way::Relaunch) {
                plain.push(inside_ms(&out));
            } else {
                fault_free[i].push(inside_ms(&out));
            }
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); ways.len()];
    let mut phases: Vec<Vec<[f64; 6]>> = vec![Vec::new(); ways.len()];
    let mut levels: Vec<String> = vec![String::new(); ways.len()];
    for run in 0..runs {
        for k in 0..ways.len() {
            let i = (k + run) % ways.len();
            let way = ways[i].1;
            let dir = shm.path().join(format!("way-{i}-{run}"));
            let out = run_way(way, &dir, &die);
            let restored = if matches!(way, Way::Relaunch) {
                // The job died with its rank: run it again (its restore
                // timed).
                run_way(way, &dir, &["--measure".to_string()])
            } else {
                out.clone()
            };
            times[i].push(recovery_ms(&out, &restored, &reference));
            levels[i] = level(&restored);
            if matches!(way, Way::Ulfm(..) | Way::UlfmPerNode) {
                phases[i].push(split_of(&out));
            }
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
    let base = ways.len() - 1;
    let m: Vec<f64> = times.into_iter().map(median).collect();
    // Each way's time against the recovery by hand, where it ran.
    let by_hand = ways.iter().position(|(_, w)| matches!(w, Way::ByHand));
    println!(
        "{:<40} {:>14} {:>6} {:>10} {:>10} {:>14}",
        "recovery", "kill->restored", "level", "vs relaunch", "/ by hand", "fault-free cost"
    );
    let plain_ms = median(plain);
    for (i, (name, _)) in ways.iter().enumerate() {
        let cost = if i == base {
            "(plain MPI)".to_string()
        } else {
            format!(
                "{:+.1}%",
                (median(fault_free[i].clone()) / plain_ms - 1.0) * 100.0
            )
        };
        let against = by_hand.map_or("-".to_string(), |h| format!("{:.2}x", m[i] / m[h]));
        println!(
            "{name:<40} {:>12.1}ms {:>6} {:>9.1}x {against:>10} {cost:>14}",
            m[i],
            levels[i],
            m[base] / m[i]
        );
    }
    println!(
        "fault-free cost: rank 0's time in the program (12 steps, 3 checkpoints), against plain MPI's {plain_ms:.0} ms"
    );
    for (i, (name, _)) in ways.iter().enumerate() {
        if phases[i].is_empty() {
            continue;
        }
        let phase = |k: usize| median(phases[i].iter().map(|p| p[k]).collect());
        println!(
            "{name}, split (ms): detection and unwinding {:.1}, agreement {:.1}, revoke+shrink+survivors {:.1}, new processes {:.1}, split {:.1}, checkpointer and restore {:.1}",
            phase(0),
            phase(1),
            phase(2),
            phase(3),
            phase(4),
            phase(5)
        );
    }
}

/// Rank 0's time in the program, from its entry to the end (ms).
fn inside_ms(out: &Output) -> f64 {
    text(out)
        .lines()
        .find_map(|l| l.strip_prefix("done in "))
        .and_then(|t| t.split_whitespace().next())
        .and_then(|t| t.parse::<f64>().ok())
        .map(|s| s * 1e3)
        .unwrap_or_else(|| panic!("no time in the program:\n{}", text(out)))
}

/// Runs examples/shrink_overlap.rs at 1, 4 and 16 MiB and prints each
/// order's time against the shrink then the reload.
fn overlap(trials: usize) {
    let program = build(
        &["--features", "ulfm", "--example", "shrink_overlap"],
        "examples/shrink_overlap",
    );
    println!(
        "the shrink and the reload of a checkpoint (read from /dev/shm, CRC-32 checked), 4 processes, one killed; median of {trials} trials (slowest survivor)"
    );
    println!(
        "{:>5} {:>9} {:>9} {:>19} {:>19} {:>11} {:>6}",
        "MiB", "shrink", "reload", "shrink-then-reload", "reload-then-shrink", "overlapped", "gain"
    );
    for mib in [1, 4, 16] {
        let session = session_dir();
        let out = mpirun_command(true, 4, session.path())
            .arg(&program)
            .args(["--mib", &mib.to_string(), "--trials", &trials.to_string()])
            .stdin(Stdio::null())
            .output()
            .expect("mpirun");
        let all = text(&out);
        let ms = |order: &str| -> f64 {
            all.lines()
                .filter_map(|l| l.strip_prefix("overlap: "))
                .find_map(|l| {
                    let mut f = l.split(' ');
                    (f.nth(1)? == order).then(|| f.next()?.parse().ok())?
                })
                .unwrap_or_else(|| panic!("no {order} time:\n{all}"))
        };
        let (first, second) = (ms("shrink-then-reload"), ms("reload-then-shrink"));
        let both = ms("overlapped");
        println!(
            "{mib:>5} {:>7.2}ms {:>7.2}ms {first:>17.2}ms {second:>17.2}ms {both:>9.2}ms {:>5.0}%",
            ms("shrink"),
            ms("reload"),
            (1.0 - both / first) * 100.0
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
    let session = session_dir();
    let out = mpirun_command(true, 4, session.path())
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
/// starting new processes, the split, and from entering the program
/// again to the restore.
fn split_of(out: &Output) -> [f64; 6] {
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
    let (agreement, shrink, start, split) = (
        number("agreement "),
        number("shrink "),
        number("start "),
        number("split "),
    );
    let detection = (left - kill) / 1e6;
    let restore = (restored - left) / 1e6 - agreement - shrink - start - split;
    [detection, agreement, shrink, start, split, restore]
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
    let session = dir.join("mpirun");
    std::fs::create_dir_all(&session).expect("mpirun's session directory");
    mpirun_command(ft, procs, &session)
        .arg(heat)
        .args(args)
        .args(["--job", "bench"])
        .env("FRAME_STORAGE_LOCAL_DIR", dir.join("l1"))
        .env("FRAME_STORAGE_GLOBAL_DIR", dir.join("global"))
        .stdin(Stdio::null())
        .output()
        .expect("mpirun")
}

/// `mpirun` (with ULFM if `ft`) on `procs` processes, its session
/// directory in `session`: a stale one of a killed mpirun left in /tmp
/// can collide with a new one's (see tests/common/mpirun.rs).
fn mpirun_command(ft: bool, procs: usize, session: &Path) -> Command {
    let mut cmd = Command::new("mpirun");
    if ft {
        cmd.args(["--with-ft", "ulfm"]);
    }
    cmd.args(["--oversubscribe", "-n", &procs.to_string()])
        .env("TMPDIR", session);
    if rustix::process::geteuid().is_root() {
        cmd.arg("--allow-run-as-root");
    }
    cmd
}

/// A fresh session directory for one `mpirun`, removed when dropped.
fn session_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("frame-bench-mpirun-")
        .tempdir()
        .expect("mpirun's session directory")
}

/// Runs heat2d under `frame run` (`nodes` nodes of 2 and a spare node).
fn own_runtime(
    frame: &Path,
    heat: &Path,
    lib: &Path,
    dir: &Path,
    nodes: usize,
    args: &[String],
) -> Output {
    Command::new(frame)
        .args(["run", "--nodes", &nodes.to_string()])
        .args(["--ranks-per-node", "2", "--spare-nodes", "1"])
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
