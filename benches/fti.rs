//! FTI programs on libfti under `mpiexec`: the cost of a checkpoint at L1
//! and at L4, and the time to restart after a node's directory is lost.
//!
//! `cargo bench --features mpi --bench fti [-- --mib N]` runs
//! `examples/c/fti_heat.c` (compiled with `mpicc` against `fti.h`) on 8 ranks
//! as 4 virtual nodes, with N MiB of protected grid per rank (default 256):
//! - L1: checkpoints to node-local storage (`/dev/shm`) only;
//! - L4: every checkpoint also flushed to the global directory (on disk)
//!   and waited for (`inline_l4 = 1`);
//! - restarts: the job is killed after its second checkpoint and run again,
//!   as is, after node 1's directory is deleted with partner copies on
//!   (L2), and after it is deleted with only the global directory (L4).
//!
//! Times are the slowest rank's (checkpoints: the first, to new files, and
//! the mean of the later ones, which reuse files; restarts: `FTI_Init` plus
//! the recovery). Every restarted run must print the
//! checksum of the run without a crash.

use std::path::{Path, PathBuf};
use std::process::Command;

const RANKS: usize = 8;
/// Grid columns (a row of 4096 doubles with its halo cells).
const NY: usize = 4094;
/// Jacobi steps, a checkpoint every 2: 8 checkpoints.
const STEPS: u32 = 16;
/// The crash comes after the 5th checkpoint (steps 1, 3, 5, 7, 9).
const CRASH_AT: u32 = 10;

fn main() {
    let mib: usize = std::env::args()
        .skip_while(|a| a != "--mib")
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(256);
    let rows_per_rank = (mib << 20) / ((NY + 2) * 8) - 2;
    let nx = rows_per_rank * RANKS;
    let lib = build_libfti();
    let work = tempfile::Builder::new()
        .prefix("frame-bench-fti-")
        .tempdir()
        .expect("temp dir");
    let shm = tempfile::Builder::new()
        .prefix("frame-bench-fti-")
        .tempdir_in("/dev/shm")
        .expect("temp dir in /dev/shm");
    let heat = compile(&lib, work.path());
    println!(
        "fti_heat on {RANKS} ranks (4 virtual nodes), {mib} MiB of grid per rank ({nx}x{NY}), {STEPS} steps, a checkpoint every 2"
    );
    let run = |name: &str, levels: Levels, crash: Option<u32>| {
        let dir = shm.path().join(name);
        let global = work.path().join(name);
        let config = config(
            &dir,
            &global,
            levels,
            work.path().join(format!("{name}.fti")),
        );
        let mut args = vec![
            config.display().to_string(),
            nx.to_string(),
            NY.to_string(),
            STEPS.to_string(),
        ];
        args.extend(crash.map(|c| c.to_string()));
        let heat = heat.clone();
        let env = levels.env();
        (dir, move || mpiexec(&heat, &args, env))
    };

    let (_, l1) = run("l1", Levels::L1, None);
    let reference = l1();
    let sum = checksum(&reference);
    let (_, l4) = run("l4", Levels::L4, None);
    let flushed = l4();
    assert_eq!(checksum(&flushed), sum);
    let (l1_first, l1_ms) = checkpoint_ms(&reference);
    let (l4_first, l4_ms) = checkpoint_ms(&flushed);
    println!("checkpoint, L1 only:            {l1_ms:9.1} ms  (the first, to new files: {l1_first:.1} ms)");
    println!(
        "checkpoint, L1 + L4 (waited):   {l4_ms:9.1} ms  (the first: {l4_first:.1} ms; {:.1}x L1)",
        l4_ms / l1_ms
    );

    for (name, levels, lost) in [
        ("restart-l1", Levels::L2, false),
        ("restart-l2", Levels::L2, true),
        ("restart-l4", Levels::L4, true),
    ] {
        let (dir, job) = run(name, levels, Some(CRASH_AT));
        let crashed = job();
        assert!(crashed.contains("crashing at step"), "{crashed}");
        if lost {
            std::fs::remove_dir_all(dir.join("node-1")).expect("remove node 1's directory");
        }
        let resumed = job();
        assert_eq!(checksum(&resumed), sum, "{name}: the restarted run differs");
        let line = resumed
            .lines()
            .find(|l| l.starts_with("restarted at step"))
            .unwrap_or_else(|| panic!("{name}: no restart:\n{resumed}"));
        let ms: f64 = line
            .split(" in ")
            .nth(1)
            .and_then(|t| t.trim_end_matches(" ms").parse().ok())
            .unwrap_or(f64::NAN);
        let what = match name {
            "restart-l1" => "restart, nothing lost (L1):    ",
            "restart-l2" => "restart, node 1 lost (L2):     ",
            _ => "restart, node 1 lost (L4 only):",
        };
        println!("{what} {ms:9.1} ms");
    }
    println!("every restarted run ended with the checksum of the run without a crash ({sum})");
}

#[derive(Clone, Copy)]
enum Levels {
    L1,
    L2,
    L4,
}

impl Levels {
    /// The `FRAME_*` intervals (in calls) of the level promoted at every
    /// checkpoint (FTI's intervals are minutes).
    fn env(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Levels::L1 => &[],
            Levels::L2 => &[("FRAME_L2_INTERVAL", "1")],
            Levels::L4 => &[("FRAME_L4_INTERVAL", "1")],
        }
    }
}

/// An FTI configuration: intervals in FTI's minutes are replaced by the
/// `FRAME_*` variables `mpiexec` passes (a checkpoint every 2 calls).
fn config(dir: &Path, global: &Path, levels: Levels, path: PathBuf) -> PathBuf {
    let (l2, l4) = match levels {
        Levels::L1 => (0, 0),
        Levels::L2 => (1, 0),
        Levels::L4 => (0, 1),
    };
    let text = format!(
        "[basic]\nhead = 0\nnode_size = 2\nckpt_dir = {}\nglbl_dir = {}\nckpt_l1 = 1\nckpt_l2 = {l2}\n\
         ckpt_l3 = 0\nckpt_l4 = {l4}\ninline_l2 = 1\ninline_l4 = 1\nverbosity = 3\n[advanced]\nlocal_test = 1\n",
        dir.display(),
        global.display()
    );
    std::fs::write(&path, text).expect("write config");
    path
}

fn build_libfti() -> PathBuf {
    let status = Command::new(env!("CARGO"))
        .args(["build", "--release", "-p", "frame-fti", "--features", "mpi"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .expect("cargo build");
    assert!(status.success(), "building libfti failed");
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/release")
}

fn compile(lib: &Path, dir: &Path) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = dir.join("fti_heat");
    let status = Command::new("mpicc")
        .args(["-std=c11", "-O2"])
        .arg("-I")
        .arg(root.join("ffi/fti/include"))
        .arg(root.join("examples/c/fti_heat.c"))
        .arg("-L")
        .arg(lib)
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .args(["-lfti", "-o"])
        .arg(&out)
        .status()
        .expect("mpicc");
    assert!(status.success(), "mpicc failed");
    out
}

/// Runs the program on 8 ranks, a checkpoint every 2 steps; returns
/// stdout and stderr.
fn mpiexec(program: &Path, args: &[String], env: &[(&str, &str)]) -> String {
    let out = Command::new("mpiexec")
        .arg("-n")
        .arg(RANKS.to_string())
        .arg(program)
        .args(args)
        .env("FRAME_SNAPSHOT_INTERVAL", "2")
        .env("FTI_HEAT_BARRIER", "1")
        .envs(env.iter().copied())
        .output()
        .expect("mpiexec");
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

fn checksum(out: &str) -> String {
    out.lines()
        .find_map(|l| l.strip_prefix("final checksum: "))
        .unwrap_or_else(|| panic!("no checksum in:\n{out}"))
        .to_string()
}

/// The first checkpoint's time and the later ones' mean, in ms.
fn checkpoint_ms(out: &str) -> (f64, f64) {
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix("checkpoints: "))
        .unwrap_or_else(|| panic!("no checkpoint times in:\n{out}"));
    let ms: Vec<f64> = line
        .split(" ms")
        .filter_map(|part| part.rsplit(' ').next().and_then(|t| t.parse().ok()))
        .collect();
    assert_eq!(ms.len(), 2, "{line}");
    (ms[0], ms[1])
}
