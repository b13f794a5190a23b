//! 2D heat diffusion (Jacobi iteration) with checkpoints, block-decomposed
//! over ranks that exchange halos through frame's `Comm`.
//!
//! Started on its own, heat2d launches itself under frame's embedded runtime
//! (one daemon per virtual node, the ranks as separate processes); under
//! `frame run` it is just the ranks. With no arguments it runs the demo of
//! `demo.rs`: six nodes plus two spares with the four levels of
//! `config/levels.toml`, a fault-free reference, then a failure recovered
//! from each level in turn, the recovery metrics, and the checksums.
//!
//! `--crash-at N` kills the whole job with SIGKILL after step N; running the
//! same command again resumes from the newest checkpoint and prints the same
//! final checksum as a run without the crash. With arguments, the last line
//! of standard output is `final checksum: 0x<16 hex digits>`, a hash of the
//! whole grid. Halos travel with the typed helpers of `frame::comm::CommExt`.

use anyhow::{bail, Context as _};
use clap::Parser;
use frame::comm::{Comm, CommExt};
use frame::config::{Config, Interval, Source};
use frame::runtime::{self, Context, LaunchArgs, Role};
use frame::Checkpointer;
use std::process::ExitCode;
use std::time::Instant;
use zerocopy::IntoBytes;

mod demo;

/// 2D heat diffusion with frame checkpoints.
#[derive(Parser, Clone, Debug)]
struct Args {
    /// Grid rows.
    #[arg(long, default_value_t = 512)]
    nx: usize,
    /// Grid columns.
    #[arg(long, default_value_t = 512)]
    ny: usize,
    /// Jacobi steps.
    #[arg(long, default_value_t = 2000)]
    steps: u64,
    /// Checkpoint every this many steps (overrides snapshot.interval).
    #[arg(long)]
    every: Option<u64>,
    /// Kill the whole job with SIGKILL right after this step. Only a run that
    /// did not recover crashes, so the same command run again resumes.
    #[arg(long)]
    crash_at: Option<u64>,
    /// Job id (default: the configured one, or "heat2d").
    #[arg(long)]
    job: Option<String>,
    /// Also write the final checksum into this file (rank 0).
    #[arg(long, value_name = "FILE")]
    checksum_file: Option<std::path::PathBuf>,
    #[command(flatten)]
    launch: LaunchArgs,
}

/// Message tags of the halo exchange, named by the direction of travel.
const TO_NORTH: u32 = 1;
const TO_SOUTH: u32 = 2;
const TO_WEST: u32 = 3;
const TO_EAST: u32 = 4;

/// Fixed temperatures on the four edges of the plate.
const TOP: f64 = 100.0;
const BOTTOM: f64 = 0.0;
const LEFT: f64 = 75.0;
const RIGHT: f64 = 50.0;

/// A rank's block of the grid and its neighbours.
#[derive(Clone, Copy, Debug)]
struct Block {
    /// First global row and column of the block's interior.
    row0: usize,
    col0: usize,
    /// Interior size.
    rows: usize,
    cols: usize,
    north: Option<usize>,
    south: Option<usize>,
    west: Option<usize>,
    east: Option<usize>,
}

/// Splits `n` into `parts` nearly equal ranges; returns (start, len) of `i`.
fn split(n: usize, parts: usize, i: usize) -> (usize, usize) {
    let base = n / parts;
    let extra = n % parts;
    (i * base + i.min(extra), base + usize::from(i < extra))
}

impl Block {
    fn new(args: &Args, rank: usize, size: usize) -> Self {
        // The most square process grid: pr rows of pc columns.
        let pr = (1..=size)
            .filter(|p| size % p == 0 && p * p <= size)
            .max()
            .unwrap_or(1);
        let pc = size / pr;
        let (r, c) = (rank / pc, rank % pc);
        let (row0, rows) = split(args.nx, pr, r);
        let (col0, cols) = split(args.ny, pc, c);
        Block {
            row0,
            col0,
            rows,
            cols,
            north: (r > 0).then(|| rank - pc),
            south: (r + 1 < pr).then(|| rank + pc),
            west: (c > 0).then(|| rank - 1),
            east: (c + 1 < pc).then(|| rank + 1),
        }
    }

    fn width(&self) -> usize {
        self.cols + 2
    }

    fn len(&self) -> usize {
        (self.rows + 2) * self.width()
    }

    /// A grid with the plate's fixed edge temperatures in the halo cells that
    /// lie on the plate's boundary, zero elsewhere.
    fn initial(&self) -> Vec<f64> {
        let w = self.width();
        let mut u = vec![0.0; self.len()];
        for j in 0..w {
            if self.north.is_none() {
                u[j] = TOP;
            }
            if self.south.is_none() {
                u[(self.rows + 1) * w + j] = BOTTOM;
            }
        }
        for i in 1..=self.rows {
            if self.west.is_none() {
                u[i * w] = LEFT;
            }
            if self.east.is_none() {
                u[i * w + self.cols + 1] = RIGHT;
            }
        }
        u
    }

    fn column(&self, u: &[f64], j: usize) -> Vec<f64> {
        (1..=self.rows).map(|i| u[i * self.width() + j]).collect()
    }

    /// Exchanges halo rows and columns with the neighbours. Rows travel
    /// straight from and into the grid; columns go through a buffer.
    fn exchange(&self, comm: &dyn Comm, u: &mut [f64]) -> anyhow::Result<()> {
        let (w, cols) = (self.width(), self.cols);
        let first = w + 1..w + 1 + cols;
        let last = self.rows * w + 1..self.rows * w + 1 + cols;
        if let Some(n) = self.north {
            comm.send_slice(n, TO_NORTH, &u[first])?;
        }
        if let Some(s) = self.south {
            comm.send_slice(s, TO_SOUTH, &u[last])?;
        }
        if let Some(west) = self.west {
            comm.send_slice(west, TO_WEST, &self.column(u, 1))?;
        }
        if let Some(east) = self.east {
            comm.send_slice(east, TO_EAST, &self.column(u, cols))?;
        }
        if let Some(n) = self.north {
            comm.recv_into(n, TO_SOUTH, &mut u[1..1 + cols])?;
        }
        if let Some(s) = self.south {
            let halo = (self.rows + 1) * w + 1;
            comm.recv_into(s, TO_NORTH, &mut u[halo..halo + cols])?;
        }
        let mut column = vec![0.0f64; self.rows];
        if let Some(west) = self.west {
            comm.recv_into(west, TO_EAST, &mut column)?;
            for (i, v) in column.iter().enumerate() {
                u[(i + 1) * w] = *v;
            }
        }
        if let Some(east) = self.east {
            comm.recv_into(east, TO_WEST, &mut column)?;
            for (i, v) in column.iter().enumerate() {
                u[(i + 1) * w + cols + 1] = *v;
            }
        }
        Ok(())
    }

    /// One Jacobi step from `u` into `next` (interior cells only).
    fn step(&self, u: &[f64], next: &mut [f64]) {
        let w = self.width();
        for i in 1..=self.rows {
            for j in 1..=self.cols {
                let k = i * w + j;
                next[k] = 0.25 * (((u[k - w] + u[k + w]) + u[k - 1]) + u[k + 1]);
            }
        }
    }

    fn interior(&self, u: &[f64]) -> Vec<f64> {
        let w = self.width();
        (1..=self.rows)
            .flat_map(|i| u[i * w + 1..i * w + 1 + self.cols].iter().copied())
            .collect()
    }
}

/// Decodes `n` f64 values sent by rank `src`.
fn f64s(bytes: &[u8], src: usize, n: usize) -> anyhow::Result<Vec<f64>> {
    let mut out = vec![0.0f64; n];
    if bytes.len() != out.as_bytes().len() {
        bail!("rank {src} sent {} bytes, expected {}", bytes.len(), n * 8);
    }
    out.as_mut_bytes().copy_from_slice(bytes);
    Ok(out)
}

/// Assembles the global grid on rank 0 and hashes it (row-major f64 bits).
fn checksum(comm: &dyn Comm, args: &Args, block: &Block, u: &[f64]) -> anyhow::Result<Option<u64>> {
    let mine = block.interior(u);
    let Some(parts) = comm.gather(mine.as_bytes(), 0)? else {
        return Ok(None);
    };
    let mut global = vec![0.0f64; args.nx * args.ny];
    for (rank, bytes) in parts.iter().enumerate() {
        let b = Block::new(args, rank, comm.size());
        let values = f64s(bytes, rank, b.rows * b.cols)?;
        for i in 0..b.rows {
            let dst = (b.row0 + i) * args.ny + b.col0;
            global[dst..dst + b.cols].copy_from_slice(&values[i * b.cols..(i + 1) * b.cols]);
        }
    }
    Ok(Some(xxhash_rust::xxh3::xxh3_64(global.as_bytes())))
}

fn config(args: &Args) -> anyhow::Result<Config> {
    let mut cfg = Config::load(args.launch.config.as_deref())?;
    if let Some(job) = &args.job {
        cfg.job.id = job.clone();
        cfg.mark_set_by_program("job.id");
    } else if cfg.source_of("job.id") == Source::Default {
        cfg.job.id = "heat2d".into();
        cfg.mark_set_by_program("job.id");
    }
    if let Some(every) = args.every {
        cfg.snapshot.interval = Interval::Calls(every);
        cfg.mark_set_by_program("snapshot.interval");
    } else if cfg.source_of("snapshot.interval") == Source::Default {
        cfg.snapshot.interval = Interval::Calls((args.steps / 10).max(1));
        cfg.mark_set_by_program("snapshot.interval");
    }
    cfg.validate()?;
    Ok(cfg)
}

/// The grids of a rank, kept across re-entries of the resilient function so
/// a rollback neither frees nor reallocates them.
struct Grids {
    grid: frame::Protected<Vec<f64>>,
    next: Vec<f64>,
}

/// The resilient function of every rank.
fn rank_main(
    ctx: &mut Context<'_>,
    args: &Args,
    cfg: &Config,
    kept: &mut Option<Grids>,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let comm = ctx.comm();
    let block = Block::new(args, comm.rank(), comm.size());
    let g = kept.get_or_insert_with(|| Grids {
        grid: frame::Protected::new(block.initial()),
        next: block.initial(),
    });
    let Grids { grid, next, .. } = g;
    let mut ckpt = Checkpointer::init(cfg, comm)?;
    let step = ckpt.protect(0, 0u64);
    ckpt.protect_handle(1, grid);
    let params = ckpt.protect(2, [args.nx as u64, args.ny as u64, comm.size() as u64]);
    if !ckpt.recovering() {
        // Starting over (also after a failure before the first checkpoint).
        grid.write().copy_from_slice(&block.initial());
    }
    let mut recovered = None;
    if ckpt.recovering() {
        let id = ckpt.recover()?;
        let expected = [args.nx as u64, args.ny as u64, comm.size() as u64];
        let got = params.get();
        if got != expected {
            bail!(
                "checkpoint {id} in {} was made for a {}x{} grid on {} ranks, not {}x{} on {}; use another --job or remove it",
                ckpt.local_dir().display(),
                got[0], got[1], got[2], expected[0], expected[1], expected[2]
            );
        }
        let from = ckpt
            .stats()
            .recovered_from
            .map_or("?".to_string(), |l| l.to_string());
        recovered = Some((id, step.get(), from));
    }
    if comm.rank() == 0 {
        match (ctx.state(), recovered.clone()) {
            (state, Some((id, at, from))) => println!(
                "rank 0 entered {state} (epoch {}, failed ranks {:?}, failed nodes {:?}); recovered checkpoint {id} (step {at}) from {from} and resumed",
                ctx.epoch(),
                ctx.failed_ranks(),
                ctx.failed_nodes()
            ),
            (state, None) => println!("rank 0 entered {state} (epoch {}); starting at step 0", ctx.epoch()),
        }
    }
    next.copy_from_slice(&grid.read());
    while step.get() < args.steps {
        ctx.fault_point(step.get())?;
        {
            let mut u = grid.write();
            block.exchange(comm, &mut u)?;
            block.step(&u, next);
            std::mem::swap(&mut *u, next);
        }
        step.set(step.get() + 1);
        if recovered.is_none()
            && args.crash_at == Some(step.get())
            && comm.rank() + 1 == comm.size()
        {
            eprintln!(
                "heat2d: rank {} crashing the whole job at step {}",
                comm.rank(),
                step.get()
            );
            if let Some(pid) = ctx
                .launcher_pid()
                .and_then(|p| rustix::process::Pid::from_raw(p as i32))
            {
                rustix::process::kill_process(pid, rustix::process::Signal::KILL)?;
            }
            rustix::process::kill_process(
                rustix::process::getpid(),
                rustix::process::Signal::KILL,
            )?;
        }
        ckpt.snapshot()?;
    }
    let checksum = checksum(comm, args, &block, &grid.read())?;
    let stats = ckpt.stats().clone();
    ckpt.finalize()?;
    if let Some(sum) = checksum {
        let mean_ms = if stats.checkpoints > 0 {
            stats.checkpoint_time.as_secs_f64() * 1e3 / stats.checkpoints as f64
        } else {
            0.0
        };
        println!(
            "done in {:.2} s since the last entry; rank 0 wrote {} checkpoint(s), {:.2} ms each on average",
            started.elapsed().as_secs_f64(),
            stats.checkpoints,
            mean_ms
        );
        println!("final checksum: {sum:#018x}");
        if let Some(file) = &args.checksum_file {
            std::fs::write(file, format!("{sum:#018x}"))?;
        }
    }
    Ok(())
}

/// Launches this program as a job under the embedded runtime. With no
/// arguments: the demo (see `demo.rs`).
fn launch(args: &Args, cfg: &Config) -> anyhow::Result<()> {
    let rank_args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if !rank_args.is_empty() {
        return launch_once(args, cfg, args.launch.clone(), rank_args);
    }
    demo::run(args, &args.launch, LEVELS_TOML)
}

/// The shipped four-level configuration the demo runs with.
const LEVELS_TOML: &str = include_str!("../../config/levels.toml");

fn launch_once(
    args: &Args,
    cfg: &Config,
    launch_args: LaunchArgs,
    rank_args: Vec<std::ffi::OsString>,
) -> anyhow::Result<()> {
    let exe = std::env::current_exe()?;
    let launch = launch_args.launch(exe, rank_args)?;
    let size = launch.nodes * launch.ranks_per_node;
    if size == 0 || args.nx < size || args.ny < size {
        bail!("need at least one rank and a grid of at least one row and column per rank");
    }
    eprintln!(
        "heat2d: {}x{} grid, {} steps, {size} ranks on {} node(s) + {} spare, checkpoints {} in {}/node-*/{}{}",
        args.nx,
        args.ny,
        args.steps,
        launch.nodes,
        launch.spare_nodes,
        cfg.snapshot.interval,
        launch.local_dir.display(),
        cfg.job.id,
        if launch.injections.is_empty() {
            String::new()
        } else {
            let specs: Vec<String> = launch.injections.iter().map(|i| i.to_string()).collect();
            format!(", injecting {}", specs.join(" "))
        }
    );
    // The launcher reports each recovery on standard error as it happens.
    launch.run()?;
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    let cfg = match config(&args).context("configuration") {
        Ok(c) => c,
        Err(e) => {
            eprintln!("heat2d: {e:#}");
            return ExitCode::from(2);
        }
    };
    if runtime::role() != Role::Launcher {
        let mut kept = None;
        return runtime::run(|ctx| rank_main(ctx, &args, &cfg, &mut kept));
    }
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    match launch(&args, &cfg) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("heat2d: {e:#}");
            ExitCode::from(1)
        }
    }
}
