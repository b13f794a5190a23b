//! heat2d as an MPI program: the same solver as `examples/heat2d`, started
//! by `mpirun`, with frame's checkpoints over [`MpiComm`].
//!
//! ```text
//! cargo build --features mpi --example heat2d_mpi
//! mpiexec -n 8 target/debug/examples/heat2d_mpi --ranks-per-node 2 --steps 400
//! ```
//!
//! With `--dedicated`, the first rank of every node runs the node's
//! manager and the program runs on the others.
//!
//! `--crash-at N` makes the last rank SIGKILL itself after step N (with
//! `--settle`, once the managers have finished their promotions), which
//! ends the whole MPI job; the same command run again resumes from the
//! newest checkpoint frame can still restore (from level 1, or from a
//! higher level when a node's directory is gone) and prints the same final
//! checksum as a run without the crash. The last line rank 0 prints is
//! `final checksum: 0x<16 hex digits>`, the same hash of the grid as the
//! heat2d example on frame's own communicator.

use anyhow::{bail, Context as _};
use clap::Parser;
use frame::comm::mpi::{MpiComm, Nodes};
use frame::comm::Comm;
use frame::config::{Config, Interval};
use frame::dedicated::{self, Role};
use frame::Checkpointer;
use frame::ManagerLink as Link;
use mpi::traits::*;
use std::process::ExitCode;

#[path = "../heat2d/grid.rs"]
mod grid;

use grid::{checksum, Block, Size};

/// 2D heat diffusion with frame checkpoints, under MPI.
#[derive(Parser, Clone, Debug)]
struct Args {
    #[command(flatten)]
    size: Size,
    /// Checkpoint every this many steps (default: a tenth of the steps).
    #[arg(long)]
    every: Option<u64>,
    /// The last rank SIGKILLs itself right after this step, unless the run
    /// recovered.
    #[arg(long)]
    crash_at: Option<u64>,
    /// Before that crash, wait until every node's manager has finished its
    /// promotions, so the levels that hold each checkpoint are settled.
    #[arg(long, requires = "crash_at")]
    settle: bool,
    /// Virtual nodes of this many consecutive ranks (overrides
    /// topology.ranks_per_node).
    #[arg(long)]
    ranks_per_node: Option<u32>,
    /// The first rank of every node runs the node's manager instead of the
    /// program (the program runs on the other ranks).
    #[arg(long)]
    dedicated: bool,
    /// Job id (default: the configured one).
    #[arg(long)]
    job: Option<String>,
    /// frame configuration file (default: FRAME_CONFIG, or the defaults).
    #[arg(long)]
    config: Option<std::path::PathBuf>,
}

fn config(args: &Args) -> anyhow::Result<Config> {
    let mut cfg = Config::load(args.config.as_deref())?;
    if let Some(job) = &args.job {
        cfg.job.id = job.clone();
    }
    if let Some(n) = args.ranks_per_node {
        cfg.topology.ranks_per_node = n;
    }
    cfg.snapshot.interval = Interval::Calls(args.every.unwrap_or((args.size.steps / 10).max(1)));
    cfg.validate()?;
    Ok(cfg)
}

fn run(args: &Args, cfg: &Config, comm: &MpiComm, manager: Option<Link>) -> anyhow::Result<()> {
    if args.size.nx < comm.size() || args.size.ny < comm.size() {
        bail!("need a grid of at least one row and column per rank");
    }
    let block = Block::new(args.size.nx, args.size.ny, comm.rank(), comm.size());
    let mut ckpt = Checkpointer::init_with_manager(cfg, comm, manager)?;
    let step = ckpt.protect(0, 0u64);
    let grid = ckpt.protect(1, block.initial());
    let params = ckpt.protect(
        2,
        [args.size.nx as u64, args.size.ny as u64, comm.size() as u64],
    );
    let mut recovered = false;
    if ckpt.recovering() {
        let id = ckpt.recover()?;
        let expected = [args.size.nx as u64, args.size.ny as u64, comm.size() as u64];
        if params.get() != expected {
            bail!(
                "checkpoint {id} in {} was made for another grid or rank count ({:?}, not {expected:?})",
                ckpt.local_dir().display(),
                params.get()
            );
        }
        recovered = true;
        if comm.rank() == 0 {
            let from = ckpt
                .stats()
                .recovered_from
                .map_or("?".into(), |l| l.to_string());
            println!(
                "recovered checkpoint {id} (step {}) from {from} in {:.1} ms",
                step.get(),
                ckpt.stats().recovery_time.as_secs_f64() * 1e3
            );
        }
    } else if comm.rank() == 0 {
        println!("starting at step 0 on {} ranks", comm.size());
    }
    let mut next = grid.read().clone();
    while step.get() < args.size.steps {
        {
            let mut u = grid.write();
            block.exchange(comm, &mut u)?;
            block.step(&u, &mut next);
            std::mem::swap(&mut *u, &mut next);
        }
        step.set(step.get() + 1);
        if !recovered && args.crash_at == Some(step.get()) {
            if args.settle {
                ckpt.wait_for_promotions()?;
                // Every node's leader has had its commits written before
                // any rank dies (the crash below ends every rank at once).
                comm.barrier()?;
            }
            if comm.rank() + 1 == comm.size() {
                eprintln!(
                    "heat2d_mpi: rank {} crashing at step {}",
                    comm.rank(),
                    step.get()
                );
                rustix::process::kill_process(
                    rustix::process::getpid(),
                    rustix::process::Signal::KILL,
                )?;
            }
        }
        ckpt.snapshot()?;
    }
    let sum = checksum(comm, args.size.nx, args.size.ny, &block, &grid.read())?;
    let stats = ckpt.stats().clone();
    ckpt.finalize()?;
    if let Some(sum) = sum {
        println!(
            "rank 0 wrote {} checkpoint(s), {:.2} ms each on average",
            stats.checkpoints,
            stats.checkpoint_time.as_secs_f64() * 1e3 / stats.checkpoints.max(1) as f64
        );
        println!("final checksum: {sum:#018x}");
    }
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    // frame's warnings (a level that failed, a fallback) go to standard
    // error; RUST_LOG chooses more.
    frame_log::init(frame_log::Style::Plain, "warn");
    let Some((universe, _)) = mpi::initialize_with_threading(mpi::Threading::Serialized) else {
        eprintln!("heat2d_mpi: MPI was already initialised");
        return ExitCode::FAILURE;
    };
    let world = universe.world();
    let result = config(&args).and_then(|cfg| {
        let nodes = Nodes::from_config(&cfg);
        if !args.dedicated {
            let comm = MpiComm::new(&world, nodes).context("MPI communicator")?;
            return run(&args, &cfg, &comm, None);
        }
        match dedicated::split(&world, nodes, &cfg).map_err(anyhow::Error::msg)? {
            Role::Served => Ok(()),
            Role::Program(program) => {
                let comm = MpiComm::with_node(program.comm(), program.node())?;
                run(&args, &cfg, &comm, Some(program.link().clone()))
            }
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("heat2d_mpi: rank {}: {e:#}", world.rank());
            // Ranks that did not fail may wait in a collective: end the job.
            world.abort(2)
        }
    }
}
