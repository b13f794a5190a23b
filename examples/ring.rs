//! The smallest resilient program: ranks pass values around a ring.
//!
//! Run it under the runtime, with a failure:
//!
//! ```sh
//! cargo build --release --example ring
//! frame run --nodes 2 --ranks-per-node 2 --spare-nodes 1 --inject rank:2@iter=50 \
//!     -- target/release/examples/ring --checkpoint-every 10
//! ```
//!
//! Every entry into the resilient function prints how the rank entered
//! (NEW, REINITED or RESTARTED). On entry rank 0 also sends rank 1 a greeting
//! naming its epoch, which rank 1 only reads at the very end: a greeting left
//! unread when a failure interrupts an epoch must never be read in the next
//! one. Rank 0 prints the final value, which does not depend on failures:
//! with `--checkpoint-every 0` a recovery starts over from iteration 0,
//! otherwise from the newest checkpoint.

use clap::Parser;
use frame::comm::ReduceOp;
use frame::config::{Config, Interval};
use frame::Checkpointer;
use frame_runtime::{Context, State};
use std::process::ExitCode;
use std::time::Duration;

/// Pass values around a ring of ranks, surviving failures.
#[derive(Parser, Debug, Clone)]
struct Args {
    /// Iterations.
    #[arg(long, default_value_t = 200)]
    iterations: u64,
    /// Checkpoint every this many iterations (0: no checkpoints).
    #[arg(long, default_value_t = 0)]
    checkpoint_every: u64,
    /// Time each iteration takes (simulated compute).
    #[arg(long, default_value = "0ms", value_parser = humantime::parse_duration)]
    pace: Duration,
    /// Job id for checkpoints.
    #[arg(long, default_value = "ring")]
    job: String,
    /// Keep checkpoints in this directory instead of the node's (to see the
    /// runtime warn about it).
    #[arg(long)]
    local_dir: Option<std::path::PathBuf>,
    /// With --spin-at: the rank that, in its first life, computes forever
    /// at that iteration without calling the runtime (a stuck rank).
    #[arg(long)]
    spin_rank: Option<usize>,
    /// The iteration at which --spin-rank gets stuck.
    #[arg(long, default_value_t = 0)]
    spin_at: u64,
    /// In the job's first epoch (or --hold-epoch), every rank waits at
    /// this iteration until a recovery begins, or --hold-file exists (for
    /// tests that fail a rank while the job is at a known point, however
    /// long getting there takes).
    #[arg(long)]
    hold_at: Option<u64>,
    /// The epoch in which --hold-at holds the ranks.
    #[arg(long, default_value_t = 1)]
    hold_epoch: u64,
    /// With --hold-at: the ranks wait there until this file exists instead
    /// (for tests that wait for something the runtime reports while the
    /// job runs).
    #[arg(long)]
    hold_file: Option<std::path::PathBuf>,
    /// In the job's first epoch, every rank waits before its first
    /// iteration until this file exists (for tests that start the job's
    /// faults only once the runtime reports a state, such as its standby
    /// processes ready).
    #[arg(long)]
    start_file: Option<std::path::PathBuf>,
}

const TOKEN: u32 = 1;
const HELLO: u32 = 2;

fn step(value: u64, from_left: u64) -> u64 {
    value.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(17) ^ from_left
}

fn resilient(ctx: &mut Context<'_>, args: &Args) -> anyhow::Result<()> {
    let comm = ctx.comm();
    let (rank, size) = (comm.rank(), comm.size());
    println!(
        "ring: rank {rank} entered {} epoch {} node {} failed_ranks {:?} failed_nodes {:?}",
        ctx.state(),
        ctx.epoch(),
        ctx.node(),
        ctx.failed_ranks(),
        ctx.failed_nodes()
    );
    if size > 1 && rank == 0 {
        comm.send(
            1,
            HELLO,
            format!("hello from epoch {}", ctx.epoch()).as_bytes(),
        )?;
    }

    // The launcher's configuration (frame run --config) comes through
    // FRAME_CONFIG; the command line overrides the job id and interval.
    let mut cfg = Config::load(None)?;
    cfg.job.id = args.job.clone();
    cfg.mark_set_by_program("job.id");
    cfg.snapshot.interval = Interval::Calls(args.checkpoint_every.max(1));
    cfg.mark_set_by_program("snapshot.interval");
    if let Some(dir) = &args.local_dir {
        cfg.storage.local_dir = dir.clone();
        cfg.mark_set_by_program("storage.local_dir");
    }
    let mut ckpt = (args.checkpoint_every > 0)
        .then(|| Checkpointer::init(&cfg, comm))
        .transpose()?;
    let iter = frame::Protected::new(0u64);
    let value = frame::Protected::new(rank as u64 + 1);
    if let Some(c) = ckpt.as_mut() {
        c.protect_handle(0, &iter);
        c.protect_handle(1, &value);
        if c.recovering() {
            let id = c.recover()?;
            println!(
                "ring: rank {rank} restored checkpoint {id} at iteration {}",
                iter.get()
            );
        }
    }
    if let Some(start) = args.start_file.as_ref().filter(|_| ctx.epoch() == 1) {
        while !start.exists() {
            ctx.fault_point(iter.get())?;
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    while iter.get() < args.iterations {
        ctx.fault_point(iter.get())?;
        if args.spin_rank == Some(rank) && args.spin_at == iter.get() && ctx.state() == State::New {
            // Stuck in a computation that never calls the runtime.
            loop {
                std::hint::spin_loop();
            }
        }
        let first = ctx.state() == State::New || args.hold_epoch > 1;
        if args.hold_at == Some(iter.get()) && first && ctx.epoch() == args.hold_epoch {
            // Left by the recovery's interruption, or once the file exists.
            while !args.hold_file.as_ref().is_some_and(|f| f.exists()) {
                ctx.fault_point(iter.get())?;
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        if !args.pace.is_zero() {
            std::thread::sleep(args.pace);
        }
        let right = (rank + 1) % size;
        let left = (rank + size - 1) % size;
        comm.send(right, TOKEN, &value.get().to_le_bytes())?;
        let got = comm.recv(left, TOKEN)?;
        let from_left = u64::from_le_bytes(got[..8].try_into()?);
        value.set(step(value.get(), from_left));
        iter.set(iter.get() + 1);
        if let Some(c) = ckpt.as_mut() {
            c.snapshot()?;
        }
    }
    if size > 1 && rank == 1 {
        let hello = comm.recv(0, HELLO)?;
        println!(
            "ring: rank 1 got \"{}\" in epoch {}",
            String::from_utf8_lossy(&hello),
            ctx.epoch()
        );
    }
    let mut total = [value.get()];
    comm.all_reduce_u64(&mut total, ReduceOp::Sum)?;
    if let Some(c) = ckpt {
        c.finalize()?;
    }
    if rank == 0 {
        println!("ring: final value {:#018x}", total[0]);
    }
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    frame_runtime::run(|ctx| resilient(ctx, &args))
}
