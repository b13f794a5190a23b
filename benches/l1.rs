//! L1 checkpoint and load speed, each measured side by side with its plain
//! counterpart in the same run:
//!
//! - a checkpoint into **fresh** files (a job's first checkpoint, or the
//!   first after a restart) against a plain `write` of the same buffer into
//!   a new file on the same file system (then `fdatasync`, as a checkpoint
//!   does);
//!   the same checkpoint is also set against the least any checked write
//!   does: the plain write, then a CRC-32 of the same bytes (one more
//!   pass over them; where the plain write outruns a pass that reads the
//!   data from memory, no checked write can keep up with it);
//! - a checkpoint into **reused** files (the steady state) against the same
//!   plain write;
//! - a **load** (CRC included) against a `memcpy` of the same buffer, for a
//!   survivor (a rank rolling back in place, whose files are still mapped
//!   since it wrote them) and for a new process (a replacement rank, or a
//!   restarted job, which must map the file first); a plain `pread` of
//!   the same bytes from a file, nothing checked, is printed beside them;
//!
//! for one rank and for eight ranks at once (threads, each with its own
//! buffer and files), and with zstd for one rank.
//!
//! Run: `cargo bench --bench l1` (sizes in MiB per rank with
//! `FRAME_BENCH_SIZES=16,256`, rank counts with `FRAME_BENCH_RANKS=1,8`).
//! The table is measured on `/dev/shm`, then again (as root; skipped with
//! `FRAME_BENCH_HUGE=0`) on a private tmpfs mounted with
//! `huge=within_size`, where a new process maps a file with 2 MiB pages.
//! Prints medians; a ratio above 1 means frame is faster.

use frame::comm::{Comm, LocalComm};
use frame::config::{Compression, Config, Interval};
use frame::{Checkpointer, Protected};
use std::hint::black_box;
use std::io::Write;
use std::path::Path;
use std::sync::Barrier;
use std::time::{Duration, Instant};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn gbps(bytes: usize, d: Duration) -> f64 {
    bytes as f64 / d.as_secs_f64() / 1e9
}

/// A smooth field, like a simulation's state: compressible, but not trivially.
fn field(n: usize, seed: usize) -> Vec<f64> {
    (0..n)
        .map(|i| {
            let x = (i + seed) as f64 / n as f64;
            (x * 40.0).sin() * 100.0 + (x * 7.0).cos() * 3.0
        })
        .collect()
}

fn reps_for(bytes: usize) -> usize {
    match bytes >> 20 {
        0..=16 => 15,
        17..=128 => 9,
        _ => 7,
    }
}

fn config(dir: &Path, job: &str, compression: Compression) -> Config {
    let mut cfg = Config::default();
    cfg.storage.local_dir = dir.to_path_buf();
    cfg.job.id = job.into();
    cfg.snapshot.interval = Interval::Calls(1);
    cfg.snapshot.compression = compression;
    cfg.snapshot.compression_level = 1;
    cfg.retention.keep_last = 1;
    cfg.retention.keep_on_finalize = true;
    cfg
}

/// Runs `f` on `ranks` threads released together; returns the slowest
/// thread's time.
fn together<F: Fn(usize) -> Duration + Sync>(ranks: usize, f: F) -> Duration {
    let barrier = Barrier::new(ranks);
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..ranks)
            .map(|r| {
                let (f, b) = (&f, &barrier);
                s.spawn(move || {
                    b.wait();
                    f(r)
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().expect("thread"))
            .max()
            .unwrap_or_default()
    })
}

/// Plain `write` of each rank's buffer into a new file, then `fdatasync`;
/// with `check`, then a CRC-32 of the buffer too (the least a write whose
/// bytes are checked later costs).
fn plain_write(base: &Path, bufs: &[Vec<f64>], reps: usize, check: bool) -> Duration {
    let ranks = bufs.len();
    median(
        (0..reps)
            .map(|rep| {
                let dir = base.join(format!("plain-{rep}"));
                std::fs::create_dir_all(&dir).expect("dir");
                let t = together(ranks, |r| {
                    let bytes = zerocopy::IntoBytes::as_bytes(&bufs[r][..]);
                    let t = Instant::now();
                    let mut f = std::fs::File::create(dir.join(format!("r{r}"))).expect("create");
                    f.write_all(bytes).expect("write");
                    f.sync_data().expect("sync");
                    if check {
                        black_box(crc32fast::hash(bytes));
                    }
                    t.elapsed()
                });
                std::fs::remove_dir_all(&dir).expect("clean");
                t
            })
            .collect(),
    )
}

/// Plain `pread` of each rank's file (written once before) into a buffer
/// already touched, 8 MiB at a time, all ranks at once: the kernel's own
/// way for a new process to get the bytes of a file, nothing checked.
fn plain_read(base: &Path, bufs: &[Vec<f64>], reps: usize) -> Duration {
    use std::os::unix::fs::FileExt;
    let dir = base.join("plain-read");
    std::fs::create_dir_all(&dir).expect("dir");
    let files: Vec<std::fs::File> = bufs
        .iter()
        .enumerate()
        .map(|(r, b)| {
            let path = dir.join(format!("r{r}"));
            std::fs::write(&path, zerocopy::IntoBytes::as_bytes(&b[..])).expect("write");
            std::fs::File::open(&path).expect("open")
        })
        .collect();
    let mut dsts: Vec<Vec<u8>> = bufs.iter().map(|b| vec![1u8; b.len() * 8]).collect();
    let dsts: Vec<std::sync::Mutex<&mut Vec<u8>>> =
        dsts.iter_mut().map(std::sync::Mutex::new).collect();
    let t = median(
        (0..reps)
            .map(|_| {
                together(bufs.len(), |r| {
                    let mut d = dsts[r].lock().expect("dst");
                    let t = Instant::now();
                    for (i, piece) in d.chunks_mut(8 << 20).enumerate() {
                        files[r]
                            .read_exact_at(piece, (i << 23) as u64)
                            .expect("read");
                    }
                    black_box(&mut **d);
                    t.elapsed()
                })
            })
            .collect(),
    );
    std::fs::remove_dir_all(&dir).expect("clean");
    t
}

/// `memcpy` of each rank's buffer, all ranks at once.
fn memcpy(bufs: &[Vec<f64>], reps: usize) -> Duration {
    let mut dsts: Vec<Vec<f64>> = bufs.iter().map(|b| vec![0.0; b.len()]).collect();
    let dsts: Vec<std::sync::Mutex<&mut Vec<f64>>> =
        dsts.iter_mut().map(std::sync::Mutex::new).collect();
    median(
        (0..reps)
            .map(|_| {
                together(bufs.len(), |r| {
                    let mut d = dsts[r].lock().expect("dst");
                    let t = Instant::now();
                    black_box(&mut **d).copy_from_slice(black_box(&bufs[r]));
                    t.elapsed()
                })
            })
            .collect(),
    )
}

struct Measured {
    fresh: Duration,
    reused: Duration,
    load: Duration,
    load_new: Duration,
    ratio: f64,
}

/// Times checkpoints into fresh files, into reused files, and loads.
fn measure(
    base: &Path,
    bufs: &[Protected<Vec<f64>>],
    compression: Compression,
    reps: usize,
) -> Measured {
    let ranks = bufs.len();
    let slowest = |times: Vec<Duration>| times.into_iter().max().unwrap_or_default();
    // Fresh: a new job directory every time, so every file is new.
    let fresh = median(
        (0..reps)
            .map(|rep| {
                let dir = base.join(format!("fresh-{rep}"));
                let cfg = config(&dir, "fresh", compression);
                frame::internals::level::l1::release_kept_files();
                let times = LocalComm::run(ranks, ranks, |comm| {
                    let mut ckpt = Checkpointer::init(&cfg, &comm).expect("init");
                    ckpt.protect_handle(0, &bufs[comm.rank()]);
                    comm.barrier().expect("barrier");
                    let t = Instant::now();
                    ckpt.checkpoint().expect("checkpoint");
                    t.elapsed()
                });
                std::fs::remove_dir_all(&dir).expect("clean");
                slowest(times.into_iter().map(|t| t.expect("rank")).collect())
            })
            .collect(),
    );
    // Reused: one store, warmed up, checkpointing again and again.
    let dir = base.join("reused");
    let cfg = config(&dir, "reused", compression);
    let out = LocalComm::run(ranks, ranks, |comm| {
        let mut ckpt = Checkpointer::init(&cfg, &comm).expect("init");
        ckpt.protect_handle(0, &bufs[comm.rank()]);
        for _ in 0..3 {
            ckpt.checkpoint().expect("warm-up");
        }
        let mut times = Vec::with_capacity(reps);
        for _ in 0..reps {
            comm.barrier().expect("barrier");
            let t = Instant::now();
            ckpt.checkpoint().expect("checkpoint");
            times.push(t.elapsed());
        }
        let s = ckpt.stats().clone();
        (times, s.raw_bytes as f64 / s.stored_bytes.max(1) as f64)
    });
    let out: Vec<_> = out.into_iter().map(|o| o.expect("rank")).collect();
    let ratio = out[0].1;
    let reused = median(
        (0..reps)
            .map(|i| slowest(out.iter().map(|o| o.0[i]).collect()))
            .collect(),
    );
    // Loads: the checkpoint just written, restored again and again, by a
    // survivor (its files still mapped) and as by a new process.
    let load = load_times(&cfg, bufs, reps, false);
    let load_new = load_times(&cfg, bufs, reps, true);
    std::fs::remove_dir_all(&dir).expect("clean");
    Measured {
        fresh,
        reused,
        load,
        load_new,
        ratio,
    }
}

/// Median time for every rank to restore its buffer; `new_process` drops
/// what this process kept mapped first.
fn load_times(
    cfg: &Config,
    bufs: &[Protected<Vec<f64>>],
    reps: usize,
    new_process: bool,
) -> Duration {
    let ranks = bufs.len();
    let slowest = |times: Vec<Duration>| times.into_iter().max().unwrap_or_default();
    let loads = LocalComm::run(ranks, ranks, |comm| {
        let mut times = Vec::with_capacity(reps);
        for _ in 0..reps {
            if new_process {
                comm.barrier().expect("barrier");
                frame::internals::level::l1::release_kept_files();
                comm.barrier().expect("barrier");
            }
            let mut ckpt = Checkpointer::init(cfg, &comm).expect("init");
            ckpt.protect_handle(0, &bufs[comm.rank()]);
            comm.barrier().expect("barrier");
            let t = Instant::now();
            ckpt.recover().expect("recover");
            times.push(t.elapsed());
        }
        times
    });
    let loads: Vec<_> = loads.into_iter().map(|o| o.expect("rank")).collect();
    median(
        (0..reps)
            .map(|i| slowest(loads.iter().map(|o| o[i]).collect()))
            .collect(),
    )
}

fn list(var: &str, default: &[usize]) -> Vec<usize> {
    std::env::var(var)
        .ok()
        .map(|s| s.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| default.to_vec())
}

fn main() {
    let sizes = list("FRAME_BENCH_SIZES", &[16, 256]);
    let rank_counts = list("FRAME_BENCH_RANKS", &[1, 8]);
    let base = if Path::new("/dev/shm").is_dir() {
        "/dev/shm"
    } else {
        "/tmp"
    };
    table(Path::new(base), &sizes, &rank_counts);
    if std::env::var("FRAME_BENCH_HUGE").as_deref() == Ok("0") {
        return;
    }
    match HugeTmpfs::mount() {
        Ok(huge) => {
            println!(
                "\nThe same on a tmpfs mounted with huge=within_size (2 MiB pages for large files):"
            );
            table(&huge.dir, &sizes, &rank_counts);
        }
        Err(e) => println!("\n(no huge-page tmpfs measured: {e})"),
    }
}

/// A private tmpfs that backs large files with 2 MiB pages, unmounted on
/// drop. Mounting needs root.
struct HugeTmpfs {
    dir: std::path::PathBuf,
}

impl HugeTmpfs {
    fn mount() -> Result<Self, String> {
        let dir = std::env::temp_dir().join(format!("frame-bench-huge-{}", std::process::id()));
        std::fs::create_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mounted = nix::mount::mount(
            Some("tmpfs"),
            &dir,
            Some("tmpfs"),
            nix::mount::MsFlags::MS_NOSUID | nix::mount::MsFlags::MS_NODEV,
            Some("huge=within_size,mode=0700"),
        );
        if let Err(e) = mounted {
            let _ = std::fs::remove_dir(&dir);
            return Err(format!("mounting tmpfs on {}: {e}", dir.display()));
        }
        Ok(Self { dir })
    }
}

impl Drop for HugeTmpfs {
    fn drop(&mut self) {
        // Detached: a mapping still being torn down in the background
        // would make a plain unmount fail and leave the mount behind.
        let _ = nix::mount::umount2(&self.dir, nix::mount::MntFlags::MNT_DETACH);
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Measures every size and rank count with files under `base`.
fn table(base: &Path, sizes: &[usize], rank_counts: &[usize]) {
    println!(
        "L1 on {}: medians; time per checkpoint or load of every rank's buffer",
        base.display()
    );
    println!(
        "{:>9} {:>5} | {:>10} {:>17} {:>17} {:>17} {:>17} | {:>10} {:>17} {:>17} {:>17} | {:>17} {:>17} {:>6}",
        "MiB/rank",
        "ranks",
        "write new",
        "write + crc",
        "ckpt fresh",
        "fresh / w+crc",
        "ckpt reused",
        "memcpy",
        "pread",
        "load survivor",
        "load new proc",
        "zstd fresh",
        "zstd load",
        "zstd x"
    );
    for &mib in sizes {
        for &ranks in rank_counts {
            let bytes = mib << 20;
            let reps = reps_for(bytes * ranks);
            let raw: Vec<Vec<f64>> = (0..ranks).map(|r| field(bytes / 8, r * 7)).collect();
            let dir = tempfile::Builder::new()
                .prefix("frame-bench-")
                .tempdir_in(base)
                .expect("temp dir");
            let write = plain_write(dir.path(), &raw, reps, false);
            let checked = plain_write(dir.path(), &raw, reps, true);
            let copy = memcpy(&raw, reps);
            let read = plain_read(dir.path(), &raw, reps);
            let bufs: Vec<Protected<Vec<f64>>> = raw.into_iter().map(Protected::new).collect();
            let m = measure(dir.path(), &bufs, Compression::None, reps);
            let z =
                (ranks == 1).then(|| measure(dir.path(), &bufs, Compression::Zstd, reps.min(5)));
            let total = bytes * ranks;
            let cell = |d: Duration, base: Duration| {
                format!(
                    "{:5.2} GB/s {:4.2}x",
                    gbps(total, d),
                    base.as_secs_f64() / d.as_secs_f64()
                )
            };
            let zcells = match &z {
                Some(z) => format!(
                    "{:>17} {:>17} {:>6.2}",
                    cell(z.fresh, write),
                    cell(z.load, copy),
                    z.ratio
                ),
                None => format!("{:>17} {:>17} {:>6}", "-", "-", "-"),
            };
            println!(
                "{:>9} {:>5} | {:>5.2} GB/s {:>17} {:>17} {:>17} {:>17} | {:>5.2} GB/s {:>17} {:>17} {:>17} | {}",
                mib,
                ranks,
                gbps(total, write),
                cell(checked, write),
                cell(m.fresh, write),
                format!("{:.2}x", checked.as_secs_f64() / m.fresh.as_secs_f64()),
                cell(m.reused, write),
                gbps(total, copy),
                cell(read, copy),
                cell(m.load, copy),
                cell(m.load_new, copy),
                zcells
            );
        }
    }
}
