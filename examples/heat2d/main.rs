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
use frame::config::{Config, Interval, Source};
use frame::Checkpointer;
use frame_runtime::{Context, LaunchArgs, Role};
use std::process::ExitCode;
use std::time::Instant;

mod cone;
mod demo;
mod grid;
mod team;

use grid::{checksum, Block, Size};

/// 2D heat diffusion with frame checkpoints.
#[derive(Parser, Clone, Debug)]
#[cfg_attr(
    feature = "ulfm",
    command(group(clap::ArgGroup::new("ulfm_mode").args(["ulfm", "ulfm_spares"]).multiple(true)))
)]
struct Args {
    #[command(flatten)]
    size: Size,
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
    /// Every rank waits before this step until a recovery begins (a
    /// global one, or a logged one it waits for): the first value in the
    /// first epoch, the second in the second, and so on (for tests that
    /// fail a node once something has happened, however long it takes to
    /// happen). A replacement rejoining the others does not wait.
    #[arg(long, value_name = "STEP")]
    hold_at: Vec<u64>,
    /// Run as an MPI job started by `mpirun --with-ft ulfm` that repairs
    /// itself in place after a process failure, laid out as the
    /// configuration's `[ulfm]` section says (the --ulfm-* options
    /// override its keys).
    #[cfg(feature = "ulfm")]
    #[arg(long)]
    ulfm: bool,
    /// Under ULFM (implies --ulfm): this many spare processes to replace
    /// failed ranks (key ulfm.spares).
    #[cfg(feature = "ulfm")]
    #[arg(long, value_name = "N")]
    ulfm_spares: Option<u32>,
    /// Under ULFM: virtual nodes of this many consecutive processes (key
    /// topology.ranks_per_node; default: the processes that share memory).
    #[cfg(feature = "ulfm")]
    #[arg(long, value_name = "N", requires = "ulfm_mode")]
    ulfm_ranks_per_node: Option<u32>,
    /// Under ULFM: where the spares are, the last processes of the job
    /// (`last`) or the last N processes of every node (`per-node`: a dead
    /// rank is replaced on its node while it lives); key ulfm.spare_layout.
    #[cfg(feature = "ulfm")]
    #[arg(long, value_name = "LAYOUT", requires = "ulfm_mode")]
    ulfm_spare_layout: Option<frame::config::SpareLayout>,
    /// Under ULFM: the error scope of the program's communicator
    /// (operation, communicator or universe); key ulfm.error_scope.
    #[cfg(feature = "ulfm")]
    #[arg(long, value_name = "SCOPE", requires = "ulfm_mode")]
    ulfm_error_scope: Option<frame::config::ErrorScope>,
    /// Under ULFM: uniform error reporting on the program's
    /// communicator's collectives (key ulfm.uniform_errors).
    #[cfg(feature = "ulfm")]
    #[arg(long, requires = "ulfm_mode")]
    ulfm_uniform_errors: bool,
    /// Under ULFM: a failed rank that finds no spare left gets a new
    /// process (key ulfm.spawn).
    #[cfg(feature = "ulfm")]
    #[arg(long, requires = "ulfm_mode")]
    ulfm_spawn: bool,
    /// Right after this step, the ranks named by --die-rank and the ranks
    /// of the nodes named by --die-node SIGKILL themselves (a real process
    /// or node failure at a known point): the first value in the first
    /// epoch, the second in the second, and so on; 0 dies on entering,
    /// before the checkpoint is loaded (a failure during a recovery).
    #[arg(long, value_name = "STEP")]
    die_at: Vec<u64>,
    /// A rank that dies at --die-at.
    #[arg(long, value_name = "RANK", requires = "die_at")]
    die_rank: Vec<usize>,
    /// A node whose ranks die at --die-at, its level-1 storage removed
    /// (under `frame run`, with its daemon: the node's whole process group).
    #[arg(long, value_name = "NODE", requires = "die_at")]
    die_node: Vec<u32>,
    /// At --die-at, every rank first waits until the managers finished
    /// promoting the checkpoints so far: the failure comes once their
    /// partner copies exist, however slow the machine (benchmarks).
    #[arg(long, requires = "die_at")]
    die_after_promotions: bool,
    /// Print what benchmarks read: when rank 0 restored a checkpoint
    /// (`rank 0 restored (unix ns N)`, to time a recovery from the kill)
    /// and each rank's CPU time at the end (`heat2d: rank R used S s of
    /// CPU`).
    #[arg(long)]
    measure: bool,
    /// A helper of a replacement (part 1, under --spares) SIGKILLs itself
    /// after this many of its steps, 0 before the first (a team that loses
    /// a member).
    #[arg(long, value_name = "STEPS")]
    helper_dies_after: Option<u64>,
    /// Every rank appends a line to DIR/rank-R for each step it computes:
    /// the time (unix ns), its pid, epoch and step (for tests that check
    /// that one incarnation of a rank runs at a time).
    #[arg(long, value_name = "DIR")]
    step_log: Option<std::path::PathBuf>,
    #[command(flatten)]
    launch: LaunchArgs,
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
        cfg.snapshot.interval = Interval::Calls((args.size.steps / 10).max(1));
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
    /// The steps the live grids can stand at: the one `grid` holds and,
    /// after a step, the one before it in `next` (`None` before any).
    steps: Option<std::ops::RangeInclusive<u64>>,
}

/// This rank was told to wait for another's logged recovery (its idle
/// hook ran): a `--hold-at` is over.
static WAITS_FOR_RECOVERY: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// The resilient function of every rank.
fn rank_main(
    ctx: &mut Context<'_>,
    args: &Args,
    cfg: &Config,
    kept: &mut Option<Grids>,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let comm = ctx.comm();
    // Where the machine allows, a program could lower its CPU frequency
    // here; heat2d says when it waits for another rank's recovery.
    let me = comm.rank();
    frame_runtime::set_idle_hook(move |idle| {
        if idle {
            WAITS_FOR_RECOVERY.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        let what = if idle {
            "waits for"
        } else {
            "is done waiting for"
        };
        let line = format!("heat2d: rank {me} {what} another rank's recovery\n");
        say(&line);
    });
    let block = Block::new(args.size.nx, args.size.ny, comm.rank(), comm.size());
    let g = kept.get_or_insert_with(|| Grids {
        grid: frame::Protected::new(block.initial()),
        next: block.initial(),
        steps: None,
    });
    let Grids {
        grid,
        next,
        steps: live_steps,
    } = g;
    let mut ckpt = Checkpointer::init(cfg, comm)?;
    let step = ckpt.protect(0, 0u64);
    ckpt.protect_handle(1, grid);
    let params = ckpt.protect(
        2,
        [args.size.nx as u64, args.size.ny as u64, comm.size() as u64],
    );
    die_if_due(ctx, args, &mut ckpt, 0);
    // In recovery mode `cone` only the failure's cone goes back; the other
    // ranks keep their live grids (see cone.rs).
    let in_cone = cfg.recovery.mode == frame::config::RecoveryMode::Cone;
    let (mut waiting, mut coned) = (None, false);
    if in_cone && ckpt.recovering() {
        let live = cone::Live {
            grid,
            next,
            steps: live_steps.clone(),
        };
        if let Some((at, part)) = cone::recover(&mut ckpt, comm, &block, live)? {
            step.set(at);
            coned = true;
            if part.role() == frame::ConeRole::Idle {
                // Its wait ends with its first step.
                waiting = Some(part);
            } else {
                part.finish();
            }
        }
    }
    if !ckpt.recovering() && !coned {
        // Starting over (also after a failure before the first checkpoint).
        grid.write().copy_from_slice(&block.initial());
    }
    let mut recovered = None;
    if ckpt.recovering() {
        let id = ckpt.recover()?;
        let expected = [args.size.nx as u64, args.size.ny as u64, comm.size() as u64];
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
        // Every rank that goes back says so (a survivor of a logged
        // recovery never does).
        let line = format!(
            "heat2d: rank {} restored checkpoint {id} (step {}) from {from}, entered {} in epoch {}\n",
            comm.rank(),
            step.get(),
            ctx.state(),
            ctx.epoch()
        );
        say(&line);
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
            (state, None) if coned => println!(
                "rank 0 entered {state} (epoch {}, failed ranks {:?}, failed nodes {:?}); the failure's cone recovered, every rank resumes at step {}",
                ctx.epoch(),
                ctx.failed_ranks(),
                ctx.failed_nodes(),
                step.get()
            ),
            (state, None) => println!("rank 0 entered {state} (epoch {}); starting at step 0", ctx.epoch()),
        }
        if recovered.is_some() && args.measure {
            println!("rank 0 restored (unix ns {})", unix_ns());
        }
    }
    next.copy_from_slice(&grid.read());
    *live_steps = Some(step.get()..=step.get());
    // A replacement with helpers shares its steps up to its next checkpoint.
    let mut sharing = match ctx.team() {
        Some(team) => {
            let left = args.size.steps.saturating_sub(step.get());
            let steps = ckpt.calls_to_checkpoint().unwrap_or(0).min(left);
            let line = format!(
                "heat2d: rank {} shares {steps} steps with {} helper(s)\n",
                comm.rank(),
                team.parts() - 1
            );
            say(&line);
            team::Sharing::start(team.comm(), &block, &grid.read(), steps)?
        }
        None => None,
    };
    let mut step_log = match &args.step_log {
        Some(dir) => Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(dir.join(format!("rank-{}", comm.rank())))?,
        ),
        None => None,
    };
    while step.get() < args.size.steps {
        ctx.fault_point(step.get())?;
        if let Some(log) = step_log.as_mut() {
            let line = format!(
                "{} {} {} {}\n",
                unix_ns(),
                std::process::id(),
                ctx.epoch(),
                step.get()
            );
            std::io::Write::write_all(log, line.as_bytes())?;
        }
        let epoch = usize::try_from(ctx.epoch()).unwrap_or(usize::MAX);
        // A replacement rejoining the others is part of the recovery the
        // hold waits for.
        let rejoined = comm.link().recovery().rejoin;
        if args.hold_at.get(epoch.wrapping_sub(1)) == Some(&step.get()) && !rejoined {
            // Left by a global recovery's interruption, or once a logged
            // recovery makes this rank wait for the replacements.
            use std::sync::atomic::Ordering;
            while !WAITS_FOR_RECOVERY.load(Ordering::SeqCst) {
                std::thread::sleep(std::time::Duration::from_millis(5));
                ctx.fault_point(step.get())?;
            }
        }
        if let Some(shared) = sharing.as_mut() {
            if shared.step(comm, &block, &mut grid.write())? {
                sharing = None;
            }
        } else {
            let mut u = grid.write();
            block.exchange(comm, &mut u)?;
            block.step(&u, next);
            std::mem::swap(&mut *u, next);
        }
        let now = step.get() + 1;
        step.set(now);
        // `next` holds the step before, unless the team stepped.
        *live_steps = Some(if sharing.is_none() { now - 1 } else { now }..=now);
        die_if_due(ctx, args, &mut ckpt, step.get());
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
        if in_cone {
            // The reduction every step that keeps the ranks within one
            // step of each other (a cone recovery needs it).
            let mut at = [now];
            comm.all_reduce_u64(&mut at, frame::comm::ReduceOp::Max)?;
            if let Some(part) = waiting.take() {
                part.finish();
            }
        }
        ckpt.snapshot()?;
    }
    let checksum = checksum(comm, args.size.nx, args.size.ny, &block, &grid.read())?;
    let stats = ckpt.stats().clone();
    ckpt.finalize()?;
    // What this process computed (benchmarks compare recovery modes by it).
    if args.measure {
        let line = format!(
            "heat2d: rank {} used {:.3} s of CPU\n",
            comm.rank(),
            frame_runtime::process_cpu_time().as_secs_f64()
        );
        say(&line);
    }
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

/// Writes `line` to standard error in one write, so that the ranks'
/// lines never interleave.
pub(crate) fn say(line: &str) {
    let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), line.as_bytes());
}

/// The wall clock, in nanoseconds since 1970.
fn unix_ns() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// SIGKILLs this rank if `--die-at` names `step` for this epoch and
/// `--die-rank` or `--die-node` name this rank; a dying node's level-1
/// storage goes with it.
fn die_if_due(ctx: &Context<'_>, args: &Args, ckpt: &mut Checkpointer<'_>, step: u64) {
    let epoch = usize::try_from(ctx.epoch()).unwrap_or(usize::MAX);
    let comm = ctx.comm();
    let node = args.die_node.contains(&comm.node());
    if args.die_at.get(epoch.wrapping_sub(1)) != Some(&step) {
        return;
    }
    if args.die_after_promotions {
        if let Err(e) = ckpt.wait_for_promotions() {
            eprintln!("heat2d: rank {}: waiting for promotions: {e}", comm.rank());
        }
    }
    if !(node || args.die_rank.contains(&comm.rank())) {
        return;
    }
    eprintln!(
        "heat2d: rank {} dying at step {step} of epoch {epoch} (unix ns {})",
        comm.rank(),
        unix_ns()
    );
    if node {
        let _ = std::fs::remove_dir_all(ckpt.local_dir());
        if ctx.launcher_pid().is_some() {
            // Under `frame run` a node is its daemon's process group (the
            // daemon, its manager, its ranks and standbys): all of it dies.
            let _ = rustix::process::kill_current_process_group(rustix::process::Signal::KILL);
        }
    }
    let _ = rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
    loop {
        std::thread::park();
    }
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
    if size == 0 || args.size.nx < size || args.size.ny < size {
        bail!("need at least one rank and a grid of at least one row and column per rank");
    }
    eprintln!(
        "heat2d: {}x{} grid, {} steps, {size} ranks on {} node(s) + {} spare, checkpoints {} in {}/node-*/{}{}",
        args.size.nx,
        args.size.ny,
        args.size.steps,
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
    // The launcher and the ranks log to standard error (RUST_LOG).
    frame_log::init(frame_log::Style::Plain, "error");
    #[cfg(feature = "ulfm")]
    if args.ulfm || args.ulfm_spares.is_some() {
        return under_ulfm(&args, &cfg);
    }
    if frame_runtime::role() != Role::Launcher {
        // Helpers of a replacement (--spares) step a strip of its block.
        let (size, dies) = (args.size.clone(), args.helper_dies_after);
        frame_runtime::set_helper(move |t| team::help(t, &size, dies).map_err(Into::into));
        let mut kept = None;
        return frame_runtime::run(|ctx| rank_main(ctx, &args, &cfg, &mut kept));
    }
    match launch(&args, &cfg) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("heat2d: {e:#}");
            ExitCode::from(1)
        }
    }
}

/// The job as MPI processes that repair themselves (`--ulfm`).
#[cfg(feature = "ulfm")]
fn under_ulfm(args: &Args, cfg: &Config) -> ExitCode {
    let Some((universe, _)) = mpi::initialize_with_threading(mpi::Threading::Serialized) else {
        eprintln!("heat2d: MPI was already initialised");
        return ExitCode::from(2);
    };
    let mut cfg = cfg.clone();
    if let Some(n) = args.ulfm_ranks_per_node {
        // Virtual nodes: each keeps its level-1 files in a folder of its own.
        cfg.topology.ranks_per_node = n;
        cfg.mark_set_by_program("topology.ranks_per_node");
    }
    if let Some(n) = args.ulfm_spares {
        cfg.ulfm.spares = n;
        cfg.mark_set_by_program("ulfm.spares");
    }
    if let Some(layout) = args.ulfm_spare_layout {
        cfg.ulfm.spare_layout = layout;
        cfg.mark_set_by_program("ulfm.spare_layout");
    }
    if let Some(scope) = args.ulfm_error_scope {
        cfg.ulfm.error_scope = scope;
        cfg.mark_set_by_program("ulfm.error_scope");
    }
    if args.ulfm_spawn {
        cfg.ulfm.spawn = true;
        cfg.mark_set_by_program("ulfm.spawn");
    }
    if args.ulfm_uniform_errors {
        cfg.ulfm.uniform_errors = true;
        cfg.mark_set_by_program("ulfm.uniform_errors");
    }
    let options = frame_runtime::ulfm::Options::from_config(&cfg);
    let mut kept = None;
    let code = frame_runtime::ulfm::run(&universe.world(), &options, |ctx| {
        rank_main(ctx, args, &cfg, &mut kept)
    });
    drop(universe);
    code
}
