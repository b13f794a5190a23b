//! The shrink and the reload of a recovery, in turn or overlapped (the
//! paper "Implicit actions and non-blocking failure recovery with MPI"
//! overlaps a non-blocking shrink with the reload of a buddy copy), under
//! `mpirun --with-ft ulfm -n P` (the `ulfm` feature).
//!
//! Every process writes a checkpoint of `--mib` MiB to its own file in
//! `--dir` (a RAM disk: frame's level 1), then the last process SIGKILLs
//! itself. The survivors see the failure at a barrier, revoke the job's
//! communicator and acknowledge the failure; then, for `--trials` trials,
//! each of three orders in turn on every survivor:
//!
//! - `shrink-then-reload`: `MPIX_Comm_shrink` of the failed communicator,
//!   then the reload (the file read back and its CRC-32 checked);
//! - `reload-then-shrink`: the same two, the other way round;
//! - `overlapped`: the shrink on a thread of its own while this thread
//!   reloads (Open MPI 5.0.x has no public `MPIX_Comm_ishrink`).
//!
//! Each trial starts at a barrier of the survivors and counts the
//! slowest survivor; the shrink alone and the reload alone are timed too.
//! Rank 0 prints `overlap: MIB ORDER MILLISECONDS` (the median of the
//! trials) for benches/ulfm.rs, and the processes end without
//! `MPI_Finalize` (Open MPI 5.0.x can hang there after a failure).

use clap::Parser;
use frame::comm::mpi::ulfm;
use mpi::collective::SystemOperation;
use mpi::raw::AsRaw;
use mpi::topology::Communicator;
use mpi::traits::*;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(Parser)]
struct Args {
    /// MiB of checkpoint per process.
    #[arg(long, default_value_t = 4)]
    mib: usize,
    /// Trials of each order.
    #[arg(long, default_value_t = 15)]
    trials: usize,
    /// Where the checkpoints go (a RAM disk).
    #[arg(long, default_value = "/dev/shm")]
    dir: PathBuf,
}

/// The orders, as printed.
const ORDERS: [&str; 5] = [
    "shrink",
    "reload",
    "shrink-then-reload",
    "reload-then-shrink",
    "overlapped",
];

fn main() {
    let args = Args::parse();
    let Some((universe, _)) = mpi::initialize_with_threading(mpi::Threading::Multiple) else {
        eprintln!("shrink_overlap: MPI was initialised already");
        std::process::exit(2);
    };
    let world = ulfm::duplicate(&universe.world());
    let (rank, size) = (world.rank(), world.size());
    // A new file of this process's own (created exclusively, private):
    // never one another user planted under a name known in advance.
    let (file, sum) = match write_checkpoint(&args.dir, args.mib << 20, rank) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("shrink_overlap: rank {rank}: {}: {e}", args.dir.display());
            std::process::exit(1);
        }
    };
    world.barrier();
    if rank == size - 1 {
        let _ = std::fs::remove_file(&file);
        let _ =
            rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
    }
    // The failure reaches every survivor at a barrier; the survivors
    // agree on it (acknowledging it) and revoke, as frame's runtime does.
    // SAFETY: a live communicator that returns errors.
    while unsafe { mpi::ffi::MPI_Barrier(world.as_raw()) } == mpi::ffi::MPI_SUCCESS as i32 {}
    let _ = ulfm::agree(&world, 1);
    ulfm::revoke(&world);
    let survivors = match ulfm::shrink(&world) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("shrink_overlap: rank {rank}: {e}");
            std::process::exit(1);
        }
    };
    let mut buffer = vec![0u8; args.mib << 20];
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); ORDERS.len()];
    for _ in 0..args.trials {
        for (order, name) in ORDERS.iter().enumerate() {
            survivors.barrier();
            let started = Instant::now();
            let ok = match *name {
                "shrink" => shrink(&world),
                "reload" => reload(&file, &mut buffer, sum),
                "shrink-then-reload" => shrink(&world) && reload(&file, &mut buffer, sum),
                "reload-then-shrink" => reload(&file, &mut buffer, sum) && shrink(&world),
                _ => std::thread::scope(|s| {
                    let handle = Handle(world.as_raw());
                    let shrunk = s.spawn(move || shrink(&handle));
                    let reloaded = reload(&file, &mut buffer, sum);
                    shrunk.join().unwrap_or(false) && reloaded
                }),
            };
            if !ok {
                eprintln!("shrink_overlap: rank {rank}: {name} failed");
                std::process::exit(1);
            }
            let mine = started.elapsed().as_secs_f64() * 1e3;
            let mut slowest = 0.0f64;
            survivors.all_reduce_into(&mine, &mut slowest, SystemOperation::max());
            times[order].push(slowest);
        }
    }
    let _ = std::fs::remove_file(&file);
    if survivors.rank() == 0 {
        for (name, mut t) in ORDERS.iter().zip(times) {
            t.sort_by(f64::total_cmp);
            println!("overlap: {} {name} {:.3}", args.mib, t[t.len() / 2]);
        }
    }
    survivors.barrier();
    let _ = std::io::stdout().flush();
    // SAFETY: ends the process at once, MPI_Finalize skipped on purpose.
    unsafe { libc::_exit(0) }
}

/// Shrinks the failed communicator (the new one freed at once).
fn shrink(failed: &impl AsRaw<Raw = mpi::ffi::MPI_Comm>) -> bool {
    ulfm::shrink(failed).is_ok()
}

/// The failed communicator's handle, for the thread that shrinks it.
struct Handle(mpi::ffi::MPI_Comm);

// SAFETY: MPI was initialised with MPI_THREAD_MULTIPLE, and the
// communicator outlives the scoped thread that uses the handle.
unsafe impl Send for Handle {}

// SAFETY: a valid handle of a live communicator.
unsafe impl AsRaw for Handle {
    type Raw = mpi::ffi::MPI_Comm;
    fn as_raw(&self) -> Self::Raw {
        self.0
    }
}

/// Writes `len` bytes that depend on `rank` to a new file in `dir`;
/// returns its path and the bytes' CRC-32.
fn write_checkpoint(dir: &Path, len: usize, rank: i32) -> std::io::Result<(PathBuf, u32)> {
    let data: Vec<u8> = (0..len)
        .map(|i| {
            (i as u32)
                .wrapping_mul(2_654_435_761)
                .wrapping_add(rank as u32) as u8
        })
        .collect();
    let mut file = tempfile::Builder::new()
        .prefix("frame-shrink-overlap-")
        .tempfile_in(dir)?;
    file.write_all(&data)?;
    let (_, path) = file.keep().map_err(|e| e.error)?;
    Ok((path, crc32fast::hash(&data)))
}

/// Reads the checkpoint at `path` back into `buffer` and checks its CRC-32.
fn reload(path: &Path, buffer: &mut [u8], sum: u32) -> bool {
    let read = std::fs::File::open(path).and_then(|mut f| f.read_exact(buffer));
    read.is_ok() && crc32fast::hash(buffer) == sum
}
