//! A restarted job's way back, from node-local storage (level 1) and from
//! the global directory with node-local storage wiped (level 4), against
//! reading the same bytes from a plain file in the same place, in the
//! same processes.
//!
//! A job of 8 ranks on 4 virtual nodes under `frame run` (the ranks are
//! this benchmark's own binary) protects one array per rank, takes one
//! checkpoint (with level 4, waits for its global copy) and writes the
//! same bytes to a plain file beside it (on the RAM disk, or in the
//! global directory), then ends leaving its checkpoint. For level 4 every
//! node-local file is removed and, as root, the page cache dropped, so
//! that both reads come from the global directory's file system. The job
//! is started again, and each rank, its array allocated and touched (as a
//! program's would be), times:
//!
//! - **frame**: `Checkpointer::open`, `protect`, `resume` (every chunk's
//!   CRC checked), the slowest rank's time;
//! - **plain**: `pread` of the plain file into the same array, nothing
//!   checked, the slowest rank's;
//!
//! in alternating order from run to run, every restored array compared
//! with what was saved. It also prints the time from the launch of the
//! restart to the last rank's entry into its resilient function
//! (`frame run` starting its daemons and ranks), which neither includes.
//!
//! Run: `cargo bench --bench restart` (`FRAME_BENCH_MIB=64,256` the data
//! per rank, `--runs N`, default 5; `FRAME_BENCH_GLOBAL_DIR` the global
//! directory, default `target/bench-global` on the disk). Prints medians;
//! a ratio above 1 means frame is slower than the plain read.

mod support;

use frame::comm::{Comm, ReduceOp};
use frame::{Checkpointer, Config, Protected};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use support::{bench_dir, median, runs};
use zerocopy::IntoBytes;

const NODES: &str = "4";
const PER_NODE: &str = "2";
/// The rank program's role (`write` or `restart`), in its environment.
const ROLE: &str = "FRAME_BENCH_RESTART_ROLE";
/// Data per rank in bytes, in the rank program's environment.
const BYTES: &str = "FRAME_BENCH_RESTART_BYTES";
/// `1` when the plain read goes first.
const PLAIN_FIRST: &str = "FRAME_BENCH_RESTART_PLAIN_FIRST";
/// Where the plain file goes: `local` (the node's directory) or `global`.
const PLAIN_IN: &str = "FRAME_BENCH_RESTART_PLAIN_IN";

/// Rank `rank`'s data: `n` words that differ from rank to rank.
fn data(n: usize, rank: usize) -> Vec<u64> {
    (0..n as u64)
        .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ rank as u64)
        .collect()
}

/// The plain file of `rank`: in its node's directory, or with
/// `FRAME_BENCH_RESTART_PLAIN_IN=global` in the global directory.
fn plain_file(node_dir: &Path, cfg: &Config, rank: usize) -> PathBuf {
    let global = std::env::var_os(PLAIN_IN).is_some_and(|v| v == "global");
    let dir = if global {
        &cfg.storage.global_dir
    } else {
        node_dir
    };
    dir.join(format!("plain-{rank}"))
}

/// The slowest rank's `d`, in nanoseconds.
fn slowest(comm: &dyn Comm, d: Duration) -> Result<u64, frame::Error> {
    let mut v = [d.as_nanos() as u64];
    comm.all_reduce_u64(&mut v, ReduceOp::Max)?;
    Ok(v[0])
}

/// One rank of the job (under `frame run`).
fn rank_main(role: &str, bytes: usize) -> std::process::ExitCode {
    let plain_first = std::env::var_os(PLAIN_FIRST).is_some_and(|v| v == "1");
    frame_runtime::run(|ctx| -> anyhow::Result<()> {
        let entered = frame::metrics::now_ns();
        let comm = ctx.comm();
        let (rank, node_dir) = (comm.rank(), ctx.node_dir().to_path_buf());
        let cfg = Config::load(None)?;
        let words = bytes / 8;
        if role == "write" {
            let saved = data(words, rank);
            let mut ckpt = Checkpointer::init(&cfg, comm)?;
            let _region = ckpt.protect(0, saved.clone());
            ckpt.checkpoint()?;
            let file = std::fs::File::create(plain_file(&node_dir, &cfg, rank))?;
            file.write_all_at(saved.as_bytes(), 0)?;
            file.sync_data()?;
            ckpt.wait_for_promotions()?;
            ckpt.finalize()?;
            return Ok(());
        }
        let mut last_entry = [entered];
        comm.all_reduce_u64(&mut last_entry, ReduceOp::Max)?;
        // The program's array, allocated and touched before either read.
        let array = Protected::new(vec![1u64; words]);
        let want = data(words, rank);
        let mut frame_ns = 0;
        let mut plain_ns = 0;
        let mut ckpt_level = None;
        for plain in [plain_first, !plain_first] {
            comm.barrier()?;
            let began = Instant::now();
            if plain {
                let file = std::fs::File::open(plain_file(&node_dir, &cfg, rank))?;
                let mut guard = array.write();
                for (k, block) in guard.as_mut_bytes().chunks_mut(1 << 20).enumerate() {
                    file.read_exact_at(block, (k as u64) << 20)?;
                }
                drop(guard);
                plain_ns = slowest(comm, began.elapsed())?;
            } else {
                let mut opened = Checkpointer::open(&cfg, comm)?;
                opened.protect_handle(0, &array);
                let ckpt = opened.resume()?;
                frame_ns = slowest(comm, began.elapsed())?;
                ckpt_level = ckpt.stats().recovered_from;
                drop(ckpt);
            }
            anyhow::ensure!(*array.read() == want, "rank {rank} restored other data");
            if !plain && rank == 0 {
                let from = (ckpt_level.take()).map_or("?".into(), |l: frame::Level| l.to_string());
                println!("restart from {from}");
            }
            array.write().iter_mut().for_each(|w| *w = 1);
        }
        if rank == 0 {
            println!(
                "restart frame_ns {frame_ns} plain_ns {plain_ns} last_entry_ns {}",
                last_entry[0]
            );
        }
        Ok(())
    })
}

/// What is restarted from.
#[derive(Clone, Copy, PartialEq)]
enum Source {
    /// Level 1, node-local storage.
    Local,
    /// Level 4, node-local storage wiped.
    Global,
}

/// `frame run` of this binary as the job's ranks.
fn job(
    frame: &Path,
    dir: &Path,
    global: &Path,
    from: Source,
    role: &str,
    bytes: usize,
    plain_first: bool,
) -> Command {
    let mut cmd = Command::new(frame);
    cmd.arg("run")
        .args(["--nodes", NODES, "--ranks-per-node", PER_NODE])
        .arg("--run-dir")
        .arg(dir.join("run"))
        .arg("--")
        .arg(std::env::current_exe().expect("exe"))
        .env(ROLE, role)
        .env(BYTES, bytes.to_string())
        .env(PLAIN_FIRST, if plain_first { "1" } else { "0" })
        .env("FRAME_STORAGE_LOCAL_DIR", dir.join("local"))
        .env("FRAME_JOB_ID", "restart")
        .env("FRAME_RETENTION_KEEP_ON_FINALIZE", "true")
        .env("FRAME_STORAGE_GLOBAL_DIR", global)
        .env_remove("FRAME_CONFIG");
    if from == Source::Global {
        cmd.env("FRAME_L4_INTERVAL", "1").env(PLAIN_IN, "global");
    }
    cmd
}

fn field(line: &str, name: &str) -> u64 {
    line.split_whitespace()
        .skip_while(|w| *w != name)
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {line:?}"))
}

fn main() {
    if let Ok(role) = std::env::var(ROLE) {
        let bytes = std::env::var(BYTES).ok().and_then(|b| b.parse().ok());
        let Some(bytes) = bytes else {
            eprintln!("restart: {BYTES} is not a number of bytes");
            return;
        };
        let _ = rank_main(&role, bytes);
        return;
    }
    let frame = support::frame_cli();
    let runs = runs(5);
    let sizes: Vec<usize> = std::env::var("FRAME_BENCH_MIB")
        .unwrap_or_else(|_| "64,256".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let global_base = std::env::var_os("FRAME_BENCH_GLOBAL_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/bench-global"),
        PathBuf::from,
    );
    std::fs::create_dir_all(&global_base).expect("global directory");
    println!("restart of {NODES} nodes of {PER_NODE} ranks (slowest rank; medians of {runs})");
    for from in [Source::Local, Source::Global] {
        for &mib in &sizes {
            measure(&frame, &global_base, from, mib, runs);
        }
    }
}

/// Drops the page cache (as root; `false` where it cannot).
fn drop_caches() -> bool {
    // Written pages go to the disk first, so dropping loses nothing.
    rustix::fs::sync();
    std::fs::write("/proc/sys/vm/drop_caches", "3").is_ok()
}

fn measure(frame: &Path, global_base: &Path, from: Source, mib: usize, runs: usize) {
    let bytes = mib << 20;
    let (mut frames, mut plains, mut starts) = (Vec::new(), Vec::new(), Vec::new());
    let mut cold = true;
    let mut level = String::new();
    for run in 0..runs {
        let dir = bench_dir("restart");
        let global = tempfile::tempdir_in(global_base).expect("global directory");
        let mut first = job(
            frame,
            dir.path(),
            global.path(),
            from,
            "write",
            bytes,
            false,
        );
        let (_, out) = support::timed(&mut first, "the first run");
        if from == Source::Global {
            for entry in std::fs::read_dir(dir.path().join("local")).expect("local") {
                std::fs::remove_dir_all(entry.expect("entry").path()).expect("wipe a node");
            }
            cold &= drop_caches();
        }
        let launched = frame::metrics::now_ns();
        let mut again = job(
            frame,
            dir.path(),
            global.path(),
            from,
            "restart",
            bytes,
            run % 2 == 1,
        );
        let (_, out2) = support::timed(&mut again, "the restart");
        let line = (out2.lines())
            .find(|l| l.starts_with("restart frame_ns"))
            .unwrap_or_else(|| panic!("no result line:\n{out}\n{out2}"));
        frames.push(Duration::from_nanos(field(line, "frame_ns")));
        plains.push(Duration::from_nanos(field(line, "plain_ns")));
        starts.push(Duration::from_nanos(
            field(line, "last_entry_ns").saturating_sub(launched),
        ));
        level = (out2.lines())
            .find_map(|l| l.strip_prefix("restart from "))
            .unwrap_or("?")
            .to_string();
    }
    let (f, p, s) = (median(frames), median(plains), median(starts));
    let place = match from {
        Source::Local => "node-local".to_string(),
        Source::Global if cold => "global, cold cache".to_string(),
        Source::Global => "global, page cache kept (not root)".to_string(),
    };
    println!(
        "{mib:>5} MiB/rank from {level} ({place}): frame {:8.1} ms, plain read {:8.1} ms -> {:.2}x; launch to the last rank's entry {:.1} ms",
        f.as_secs_f64() * 1e3,
        p.as_secs_f64() * 1e3,
        f.as_secs_f64() / p.as_secs_f64().max(1e-9),
        s.as_secs_f64() * 1e3
    );
}
