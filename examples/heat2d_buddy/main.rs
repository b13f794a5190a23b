//! heat2d recovered by hand through ULFM, with no checkpoint library: the
//! baseline `benches/ulfm.rs` measures frame's ULFM mode against. Under
//! `mpirun --with-ft ulfm -n P` (the `ulfm` feature).
//!
//! The last `--spares` processes wait; the others step heat2d's solver
//! (the same block decomposition, halo exchange, Jacobi step and checksum
//! as `examples/heat2d`, so a run ends with the same checksum). Every
//! `--every` steps each working rank copies its grid in memory and swaps
//! a copy with its buddies: it sends its own to the next rank and keeps
//! the previous rank's (nothing is written to a file, nothing is checked).
//! A failure is seen by a neighbour at its next halo exchange; it revokes
//! the communicator, every process agrees that a process died, the
//! survivors shrink, the lowest spare takes the dead rank's place, and
//! the working ranks roll back: each survivor from its own copy, the
//! replacement from the copies its buddies hold.
//!
//! Like most recoveries written by hand, it handles one failure at a
//! time: a failure during the repair or the restore, or two buddies lost
//! together, end the run with an error, and no rank may run more than
//! one checkpoint ahead of the slowest (`--every` at least the process
//! grid's width).
//!
//! `--die-at S --die-rank R` has rank R SIGKILL itself after step S of
//! the first run. Rank 0 prints `done in T s`, `rank 0 restored (unix ns
//! N)` once every working rank rolled back, and `final checksum: 0x...`,
//! as heat2d does; the processes end without `MPI_Finalize` (Open MPI
//! 5.0.x can hang there after a failure).

use clap::Parser;
use frame::comm::mpi::{ulfm, MpiComm};
use mpi::ffi;
use mpi::raw::{AsRaw, FromRaw};
use mpi::topology::{Communicator, SimpleCommunicator};
use std::io::Write;
use std::time::{Duration, Instant};

#[path = "../heat2d/grid.rs"]
#[allow(dead_code)]
mod grid;

use grid::{checksum, Block, Size};

#[derive(Parser)]
struct Args {
    #[command(flatten)]
    size: Size,
    /// Steps between checkpoints.
    #[arg(long, default_value_t = 4)]
    every: u64,
    /// Processes kept aside to replace failed ranks.
    #[arg(long, default_value_t = 2)]
    spares: usize,
    /// The step after which `--die-rank` dies (first run only).
    #[arg(long)]
    die_at: Option<u64>,
    /// The rank that dies.
    #[arg(long, default_value_t = 0)]
    die_rank: usize,
}

/// A working rank's checkpoint: the step (0 while it is being made), its
/// own grid, and its previous rank's (its buddy's).
#[derive(Default)]
struct Saved {
    step: u64,
    own: Vec<f64>,
    buddy: Vec<f64>,
}

/// A working rank's two newest checkpoints: a checkpoint being made goes
/// over the older, so that a failure in the middle of one leaves the one
/// before whole on every rank.
type Slots = [Saved; 2];

/// The slot holding the checkpoint of `step`.
fn slot(slots: &Slots, step: u64) -> Result<&Saved, String> {
    slots
        .iter()
        .find(|s| s.step == step && step > 0)
        .ok_or_else(|| format!("no checkpoint of step {step} to roll back to"))
}

/// Tags of the restore's messages.
const TAG_OWN: i32 = 11;
const TAG_BUDDY: i32 = 12;

fn main() {
    let args = Args::parse();
    let Some((universe, _)) = mpi::initialize_with_threading(mpi::Threading::Serialized) else {
        eprintln!("heat2d_buddy: MPI was initialised already");
        std::process::exit(2);
    };
    let mut comm = ulfm::duplicate(&universe.world());
    let procs = comm.size() as usize;
    if args.spares >= procs {
        eprintln!(
            "heat2d_buddy: --spares {} leaves none of the {procs} processes to work",
            args.spares
        );
        std::process::exit(2);
    }
    let n = procs - args.spares;
    // Each process's place: its rank among the working ranks, or none.
    // `holder[r]` is the process (by rank in the first communicator) that
    // works as rank r; `first` is this process's rank there.
    let first = comm.rank() as usize;
    let mut holder: Vec<usize> = (0..n).collect();
    let mut saved = Slots::default();
    let mut replaced: Vec<usize> = Vec::new();
    let mut epoch = 1u64;
    let crowded = std::thread::available_parallelism().map_or(1, |c| c.get()) < procs;
    let nap = Duration::from_millis(if crowded { 20 } else { 5 });
    loop {
        let me = holder.iter().position(|p| *p == first);
        let ok = match split(&comm, me) {
            Ok(Some(work)) => {
                let rank = me.unwrap_or(0);
                match work_epoch(&args, &work, rank, epoch, &replaced, &mut saved) {
                    Ok(()) => true,
                    Err(e) => {
                        ulfm::revoke(&work);
                        ulfm::revoke(&comm);
                        if !e.is_empty() {
                            eprintln!("heat2d_buddy: rank {rank}: {e}");
                        }
                        false
                    }
                }
            }
            Ok(None) => true,
            Err(_) => false,
        };
        let agreed = match me {
            Some(_) => ulfm::agree(&comm, u32::from(ok)),
            None => ulfm::agree_idle(&comm, u32::from(ok), nap),
        };
        let agreed = match agreed {
            Ok(a) => a,
            Err(e) => {
                eprintln!("heat2d_buddy: process {first}: the end of epoch {epoch}: {e}");
                finish(1);
            }
        };
        if agreed.flag == 1 {
            finish(0);
        }
        if !agreed.failed {
            finish(1);
        }
        ulfm::revoke(&comm);
        let (next, alive) = match survivors(&comm, first) {
            Ok(x) => x,
            Err(e) => {
                eprintln!("heat2d_buddy: process {first}: shrink: {e}");
                finish(1);
            }
        };
        // The lowest spares left take the dead ranks' places.
        let mut spares: Vec<usize> = (n..procs)
            .filter(|p| alive.contains(p) && !holder.contains(p))
            .collect();
        spares.sort_unstable();
        replaced.clear();
        for (r, h) in holder.iter_mut().enumerate() {
            if !alive.contains(h) {
                if spares.is_empty() {
                    eprintln!("heat2d_buddy: no spare left for rank {r}");
                    finish(1);
                }
                *h = spares.remove(0);
                replaced.push(r);
            }
        }
        comm = next;
        epoch += 1;
    }
}

/// One epoch of a working rank: rolls back first after a failure
/// (`replaced` names the ranks whose processes are new), then steps to
/// the end. An error is the reason the rank stopped ("" for a failure
/// elsewhere).
fn work_epoch(
    args: &Args,
    work: &SimpleCommunicator,
    rank: usize,
    epoch: u64,
    replaced: &[usize],
    saved: &mut Slots,
) -> Result<(), String> {
    let started = Instant::now();
    let size = work.size() as usize;
    let (nx, ny) = (args.size.nx, args.size.ny);
    let block = Block::new(nx, ny, rank, size);
    let comm = MpiComm::with_node(work, rank as u32).map_err(|e| e.to_string())?;
    // A rank that sees a failure revokes the communicators, so that every
    // other working rank's pending call fails too.
    let stepped = (|| -> Result<(), String> {
        let mut u = block.initial();
        let mut step = 0u64;
        if epoch > 1 {
            step = restore(args, work, rank, replaced, saved)?;
            u.copy_from_slice(&slot(saved, step)?.own);
            if rank == 0 {
                println!(
                    "rank 0 restored step {step} from memory (unix ns {})",
                    unix_ns()
                );
            }
        }
        let mut next = u.clone();
        while step < args.size.steps {
            block.exchange(&comm, &mut u).map_err(|_| String::new())?;
            block.step(&u, &mut next);
            std::mem::swap(&mut u, &mut next);
            step += 1;
            if epoch == 1 && args.die_at == Some(step) && rank == args.die_rank {
                eprintln!(
                    "heat2d_buddy: rank {rank} dying at step {step} (unix ns {})",
                    unix_ns()
                );
                let _ = std::io::stderr().flush();
                let _ = rustix::process::kill_process(
                    rustix::process::getpid(),
                    rustix::process::Signal::KILL,
                );
            }
            if step % args.every.max(1) == 0 {
                checkpoint(args, work, rank, step, &u, saved)?;
            }
        }
        let sum = checksum(&comm, nx, ny, &block, &u).map_err(|_| String::new())?;
        if let Some(sum) = sum {
            println!(
                "done in {:.2} s since the last entry",
                started.elapsed().as_secs_f64()
            );
            println!("final checksum: {sum:#018x}");
        }
        Ok(())
    })();
    if stepped.is_err() {
        comm.revoke();
    }
    stepped
}

/// The length of rank `r`'s grid (halo included) among `size` ranks.
fn grid_len(args: &Args, r: usize, size: usize) -> usize {
    let b = Block::new(args.size.nx, args.size.ny, r, size);
    (b.rows() + 2) * b.width()
}

/// Copies `u` as this rank's checkpoint of `step` and swaps copies with
/// the buddies: the next rank gets this one's, this one keeps the
/// previous rank's.
fn checkpoint(
    args: &Args,
    work: &SimpleCommunicator,
    rank: usize,
    step: u64,
    u: &[f64],
    saved: &mut Slots,
) -> Result<(), String> {
    let size = work.size() as usize;
    let (to, from) = ((rank + 1) % size, (rank + size - 1) % size);
    let older = usize::from(saved[1].step < saved[0].step);
    let s = &mut saved[older];
    s.step = 0;
    s.own.resize(u.len(), 0.0);
    s.own.copy_from_slice(u);
    s.buddy.resize(grid_len(args, from, size), 0.0);
    sendrecv(work, &s.own, to, &mut s.buddy, from)?;
    s.step = step;
    Ok(())
}

/// Agrees on the checkpoint every working rank holds (the newest a
/// survivor completed, or the one before), gives the ranks in `replaced`
/// (new processes) theirs: the next rank sends the copy it keeps of
/// theirs, the previous rank its own (theirs to keep as buddy); returns
/// its step once every rank has it.
fn restore(
    args: &Args,
    work: &SimpleCommunicator,
    rank: usize,
    replaced: &[usize],
    saved: &mut Slots,
) -> Result<u64, String> {
    let size = work.size() as usize;
    let newest = if replaced.contains(&rank) {
        u64::MAX
    } else {
        saved.iter().map(|s| s.step).max().unwrap_or(0)
    };
    let mut step = 0u64;
    // SAFETY: a constant rsmpi reads from the MPI library once.
    reduce(work, newest, &mut step, unsafe { ffi::RSMPI_MIN })?;
    if replaced.contains(&rank) {
        let (next, previous) = ((rank + 1) % size, (rank + size - 1) % size);
        if replaced.contains(&next) {
            return Err(format!("rank {rank}'s only copy was lost with rank {next}"));
        }
        let mut own = vec![0.0; grid_len(args, rank, size)];
        let mut buddy = vec![0.0; grid_len(args, previous, size)];
        recv(work, &mut own, next, TAG_BUDDY)?;
        recv(work, &mut buddy, previous, TAG_OWN)?;
        saved[0] = Saved { step, own, buddy };
        saved[1] = Saved::default();
    } else {
        // A checkpoint newer than the one agreed on was cut off on some
        // rank: it is never rolled back to, and the next checkpoint
        // goes over it, not over the one agreed on.
        for s in saved.iter_mut().filter(|s| s.step > step) {
            s.step = 0;
        }
        let s = slot(saved, step)?;
        // This rank keeps the copy of its previous rank's grid, and its
        // own is its next rank's buddy copy.
        for &r in replaced {
            if (r + 1) % size == rank {
                send(work, &s.buddy, r, TAG_BUDDY)?;
            }
            if (rank + 1) % size == r {
                send(work, &s.own, r, TAG_OWN)?;
            }
        }
    }
    // Every working rank has rolled back once every one is here.
    let mut all = 0u64;
    // SAFETY: as above.
    reduce(work, step, &mut all, unsafe { ffi::RSMPI_MAX })?;
    Ok(step)
}

/// The result of an MPI call as this program's error ("" : a failure
/// elsewhere, which the repair handles).
fn checked(rc: i32) -> Result<(), String> {
    if rc == ffi::MPI_SUCCESS as i32 {
        Ok(())
    } else {
        Err(String::new())
    }
}

fn count(v: &[f64]) -> i32 {
    i32::try_from(v.len()).unwrap_or(i32::MAX)
}

/// Waits for `requests`, testing them in turn with MPI's progress and
/// giving the processor up between tests, until all complete, one fails,
/// or `work` is revoked (a blocking call in a rendezvous is not woken by
/// a revocation in Open MPI 5.0: the process would spin there forever).
fn wait_all(work: &SimpleCommunicator, requests: &mut [ffi::MPI_Request]) -> Result<(), String> {
    loop {
        let mut done = 0;
        // SAFETY: live requests this process started; MPI writes the flag.
        let rc = unsafe {
            ffi::MPI_Testall(
                requests.len() as i32,
                requests.as_mut_ptr(),
                &mut done,
                ffi::RSMPI_STATUSES_IGNORE,
            )
        };
        checked(rc)?;
        if done != 0 {
            return Ok(());
        }
        if ulfm::revoked(work) {
            return Err(String::new());
        }
        std::thread::yield_now();
    }
}

/// Starts sending `v` to `to` (`v` must outlive the request).
fn start_send(
    work: &SimpleCommunicator,
    v: &[f64],
    to: usize,
    tag: i32,
) -> Result<ffi::MPI_Request, String> {
    let mut request = std::mem::MaybeUninit::uninit();
    // SAFETY: the caller keeps `v` until the request completes.
    checked(unsafe {
        ffi::MPI_Isend(
            v.as_ptr().cast(),
            count(v),
            ffi::RSMPI_DOUBLE,
            to as i32,
            tag,
            work.as_raw(),
            request.as_mut_ptr(),
        )
    })?;
    // SAFETY: written by the successful call.
    Ok(unsafe { request.assume_init() })
}

/// Starts receiving into `v` from `from` (`v` must outlive the request).
fn start_recv(
    work: &SimpleCommunicator,
    v: &mut [f64],
    from: usize,
    tag: i32,
) -> Result<ffi::MPI_Request, String> {
    let mut request = std::mem::MaybeUninit::uninit();
    // SAFETY: the caller keeps `v` until the request completes.
    checked(unsafe {
        ffi::MPI_Irecv(
            v.as_mut_ptr().cast(),
            count(v),
            ffi::RSMPI_DOUBLE,
            from as i32,
            tag,
            work.as_raw(),
            request.as_mut_ptr(),
        )
    })?;
    // SAFETY: written by the successful call.
    Ok(unsafe { request.assume_init() })
}

fn send(work: &SimpleCommunicator, v: &[f64], to: usize, tag: i32) -> Result<(), String> {
    let request = start_send(work, v, to, tag)?;
    wait_all(work, &mut [request])
}

fn recv(work: &SimpleCommunicator, v: &mut [f64], from: usize, tag: i32) -> Result<(), String> {
    let request = start_recv(work, v, from, tag)?;
    wait_all(work, &mut [request])
}

fn sendrecv(
    work: &SimpleCommunicator,
    out: &[f64],
    to: usize,
    into: &mut [f64],
    from: usize,
) -> Result<(), String> {
    let received = start_recv(work, into, from, TAG_OWN)?;
    let sent = start_send(work, out, to, TAG_OWN)?;
    wait_all(work, &mut [received, sent])
}

fn reduce(
    work: &SimpleCommunicator,
    mine: u64,
    all: &mut u64,
    op: ffi::MPI_Op,
) -> Result<(), String> {
    // SAFETY: one u64 each way; both outlive the blocking call.
    checked(unsafe {
        ffi::MPI_Allreduce(
            (&raw const mine).cast(),
            (all as *mut u64).cast(),
            1,
            ffi::RSMPI_UINT64_T,
            op,
            work.as_raw(),
        )
    })
}

/// The working ranks of `comm`, ordered by rank (`None` for a spare).
/// Collective over `comm`.
fn split(comm: &SimpleCommunicator, rank: Option<usize>) -> Result<Option<SimpleCommunicator>, ()> {
    let (color, key) = match rank {
        Some(r) => (0, r as i32),
        // SAFETY: a constant rsmpi reads from the MPI library once.
        None => (unsafe { ffi::RSMPI_UNDEFINED }, 0),
    };
    let mut new = std::mem::MaybeUninit::<ffi::MPI_Comm>::uninit();
    // SAFETY: MPI writes the new communicator (MPI_COMM_NULL for a spare).
    let rc = unsafe { ffi::MPI_Comm_split(comm.as_raw(), color, key, new.as_mut_ptr()) };
    if rc != ffi::MPI_SUCCESS as i32 {
        return Err(());
    }
    // SAFETY: written by a successful split, owned by this process now.
    Ok(rank.map(|_| unsafe { SimpleCommunicator::from_raw(new.assume_init()) }))
}

/// Shrinks `comm` to its live processes and learns which they are (by
/// their rank in the first communicator), again if another dies meanwhile.
fn survivors(
    comm: &SimpleCommunicator,
    first: usize,
) -> Result<(SimpleCommunicator, Vec<usize>), String> {
    let mut current = ulfm::shrink(comm).map_err(|e| e.to_string())?;
    loop {
        let mine = first as u64;
        let mut all = vec![0u64; current.size() as usize];
        // SAFETY: one u64 sent, one per process received; both outlive
        // the blocking call.
        let rc = unsafe {
            ffi::MPI_Allgather(
                (&raw const mine).cast(),
                1,
                ffi::RSMPI_UINT64_T,
                all.as_mut_ptr().cast(),
                1,
                ffi::RSMPI_UINT64_T,
                current.as_raw(),
            )
        };
        if rc == ffi::MPI_SUCCESS as i32 {
            return Ok((current, all.into_iter().map(|p| p as usize).collect()));
        }
        ulfm::revoke(&current);
        current = ulfm::shrink(&current).map_err(|e| e.to_string())?;
    }
}

/// Ends the process with `code`, its output flushed, without
/// `MPI_Finalize`.
fn finish(code: i32) -> ! {
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // SAFETY: ends the process at once, MPI_Finalize skipped on purpose.
    unsafe { libc::_exit(code) }
}

/// The wall clock, in nanoseconds since 1970.
fn unix_ns() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}
