//! `frame sim`: simulate a failing job, or reproduce a paper's table.

use clap::ValueEnum;
use frame_cli::sim::{self, projection, scale, table3, Model, Strategy};
use std::process::ExitCode;

/// What `frame sim` can reproduce.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Paper {
    /// Table 3 (simulation rows) of "Coordinated checkpointing with
    /// logging of transmitted data and asynchronous recovery" (the name
    /// `paper-003` still works).
    #[value(name = "table3", alias = "paper-003")]
    Table3,
    /// The simulated runs (figure 6) of "Energy-efficient localised
    /// rollback after failures via data flow analysis": global, cone and
    /// logged recovery of a stencil at 100 to 1024 nodes (also
    /// `paper-002`).
    #[value(name = "dfr", alias = "paper-002")]
    Dfr,
}

/// `--async-window`: see [`sim::Window`].
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum AsyncWindow {
    /// Every failure recovered asynchronously.
    Unlimited,
    /// One per window, as frame's `logged` recovery.
    Once,
    /// One per window, each ending with a level-1 checkpoint.
    OnceThenCheckpoint,
}

impl From<AsyncWindow> for sim::Window {
    fn from(w: AsyncWindow) -> Self {
        match w {
            AsyncWindow::Unlimited => sim::Window::Unlimited,
            AsyncWindow::Once => sim::Window::Once,
            AsyncWindow::OnceThenCheckpoint => sim::Window::OnceThenCheckpoint,
        }
    }
}

/// Options of `frame sim`.
#[derive(Clone, Debug, clap::Args)]
pub struct SimArgs {
    /// Reproduce a published table instead of simulating one job.
    #[arg(long, value_enum)]
    reproduce: Option<Paper>,
    /// Project recovery times to 16..1024 nodes from measured costs: the
    /// JSON `cargo bench --bench strategies` writes, or `test-machine` for
    /// the figures measured on the 2-core test machine.
    #[arg(long, value_name = "FILE|test-machine")]
    project: Option<String>,
    /// Project the runtime's recovery from a rank's and a node's failure
    /// to 16 ranks on 1 to 1024 nodes and to 32768 processes, from the
    /// phases `cargo bench --bench scale` measured (the JSON it writes,
    /// or `test-machine`), next to paper 000's figures.
    #[arg(long, value_name = "FILE|test-machine")]
    project_scale: Option<String>,
    /// With --project-scale: one message hop's latency on the target
    /// network, microseconds.
    #[arg(long, default_value_t = 20.0)]
    latency_us: f64,
    /// Simulate the job (--planned, --step, --mtbf, --checkpoint) at 16 to
    /// 1024 nodes with recoveries costed from measured figures (as for
    /// --project): online with frame, online with the iterative baseline,
    /// redeployed with the baseline.
    #[arg(long, value_name = "FILE|test-machine")]
    retrieval: Option<String>,
    /// Planned computation, seconds.
    #[arg(long, default_value_t = 3600.0)]
    planned: f64,
    /// Simulation step, seconds.
    #[arg(long, default_value_t = 0.5)]
    step: f64,
    /// Mean time between failures of each level, seconds (lowest first).
    #[arg(long, value_delimiter = ',', default_values_t = [1800.0, 36000.0])]
    mtbf: Vec<f64>,
    /// Checkpoint cost of each level, seconds.
    #[arg(long, value_delimiter = ',', default_values_t = [1.0, 6.0])]
    checkpoint: Vec<f64>,
    /// Recovery cost of each level, seconds.
    #[arg(long, value_delimiter = ',', default_values_t = [0.5, 4.0])]
    recovery: Vec<f64>,
    /// `coordinated`, or `async:K` (K spare processes recompute the lost
    /// work of every level's failures without a rollback, as many times
    /// per window as --async-window allows).
    #[arg(long, default_value = "coordinated")]
    strategy: String,
    /// With `async:K`: how many asynchronous recoveries one logging window
    /// (between two scheduled level-1 checkpoints) allows before a failure
    /// rolls every process back.
    #[arg(long, value_enum, default_value_t = AsyncWindow::Once)]
    async_window: AsyncWindow,
    /// With `--reproduce dfr`: seeds per node count (the paper used 10).
    #[arg(long, default_value_t = 10)]
    seeds: u64,
    /// Runs per point.
    #[arg(long, default_value_t = 10_000)]
    runs: u64,
    /// Seed: the same seed gives the same figures.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// One JSON object per line instead of a table.
    #[arg(long)]
    json: bool,
    /// With --reproduce or --project: also write the plot to this SVG file
    /// (overhead against MTBF per strategy; recovery time against nodes).
    #[arg(long, value_name = "FILE")]
    svg: Option<std::path::PathBuf>,
}

/// Writes `doc` (or its error) to `path`.
fn write_svg(path: &std::path::Path, doc: Result<String, String>) -> anyhow::Result<()> {
    let doc = doc.map_err(|e| anyhow::anyhow!("plot: {e}"))?;
    std::fs::write(path, doc)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    eprintln!("plot written to {}", path.display());
    Ok(())
}

fn strategy(text: &str, levels: usize, window: AsyncWindow) -> anyhow::Result<Strategy> {
    if text == "coordinated" {
        return Ok(Strategy::Coordinated);
    }
    let k = text
        .strip_prefix("async:")
        .and_then(|k| k.parse::<f64>().ok())
        .filter(|k| *k >= 1.0)
        .ok_or_else(|| {
            anyhow::anyhow!("--strategy {text}: expected `coordinated` or `async:K` with K >= 1")
        })?;
    Ok(Strategy::Async {
        k,
        levels,
        window: window.into(),
    })
}

/// The JSON file `path` holds, read as a `T`.
fn from_json<T: serde::de::DeserializeOwned>(path: &str) -> anyhow::Result<T> {
    let text =
        std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("cannot read {path}: {e}"))?;
    serde_json::from_str(&text).map_err(|e| anyhow::anyhow!("{path}: {e}"))
}

/// The measured figures named by `source` (a JSON file or `test-machine`).
fn measured(source: &str) -> anyhow::Result<projection::Measured> {
    match source {
        "test-machine" => Ok(projection::Measured::test_machine()),
        path => from_json(path),
    }
}

/// The scale benchmark's figures named by `source` (a JSON file or
/// `test-machine`).
fn scale_measured(source: &str) -> anyhow::Result<scale::Measured> {
    match source {
        "test-machine" => Ok(scale::Measured::test_machine()),
        path => from_json(path),
    }
}

/// Most runs per point.
const MAX_RUNS: u64 = 10_000_000;
/// Most simulation steps one `frame sim` may take: runs times steps per
/// run (planned over step), over every point simulated. About a minute
/// on one core.
const MAX_STEPS: f64 = 5e9;

/// Checks the job every path simulates (`points` simulations of
/// `a.runs` runs each): finite positive times, and work within
/// [`MAX_STEPS`].
fn check_job(a: &SimArgs, points: u64) -> anyhow::Result<()> {
    if a.mtbf
        .iter()
        .chain(&a.checkpoint)
        .any(|v| !(v.is_finite() && *v > 0.0))
    {
        anyhow::bail!("--mtbf and --checkpoint: times must be finite and positive");
    }
    if a.recovery.iter().any(|v| !(v.is_finite() && *v >= 0.0)) {
        anyhow::bail!("--recovery: times must be finite and not negative");
    }
    if !(a.planned.is_finite() && a.planned > 0.0) {
        anyhow::bail!("--planned {}: must be finite and positive", a.planned);
    }
    if !(a.step.is_finite() && a.step > 0.0 && a.step <= a.planned) {
        anyhow::bail!(
            "--step {}: must be positive and at most --planned ({})",
            a.step,
            a.planned
        );
    }
    if !(1..=MAX_RUNS).contains(&a.runs) {
        anyhow::bail!("--runs {}: must be between 1 and {MAX_RUNS}", a.runs);
    }
    let steps = (a.planned / a.step).ceil() * a.runs as f64 * points as f64;
    if steps > MAX_STEPS {
        anyhow::bail!(
            "this simulation would take {steps:.3e} steps ({} runs of {:.3e} steps, {points} point(s)), more than the {MAX_STEPS:.0e} allowed: raise --step or lower --runs or --planned",
            a.runs,
            (a.planned / a.step).ceil()
        );
    }
    Ok(())
}

/// `frame sim`.
pub fn run(a: &SimArgs) -> anyhow::Result<ExitCode> {
    if let Some(source) = &a.retrieval {
        let m = measured(source)?;
        let levels = a.mtbf.len();
        if !(1..=4).contains(&levels) || a.checkpoint.len() != levels {
            anyhow::bail!("--mtbf and --checkpoint need one value per level, 1 to 4 levels");
        }
        // Three strategies at each of 16, 64, 256 and 1024 nodes.
        check_job(a, 12)?;
        let job = sim::retrieval::Job {
            planned: a.planned,
            step: a.step,
            mtbf: a.mtbf.clone(),
            checkpoint: a.checkpoint.clone(),
        };
        if a.json {
            let mut n = 16.0;
            while n <= 1024.0 {
                for c in sim::retrieval::compare(&m, n, &job, a.runs, a.seed) {
                    println!("{}", serde_json::to_string(&c)?);
                }
                n *= 4.0;
            }
        } else {
            println!(
                "a {} s job, MTBF {:?} s, checkpoints {:?} s; recoveries projected from measured costs; {} runs per point, seed {}",
                a.planned, a.mtbf, a.checkpoint, a.runs, a.seed
            );
            print!("{}", sim::retrieval::table(&m, &job, a.runs, a.seed));
        }
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(source) = &a.project_scale {
        if !(a.latency_us.is_finite() && a.latency_us > 0.0 && a.latency_us <= 1e6) {
            anyhow::bail!(
                "--latency-us {}: must be above 0 and at most 1000000",
                a.latency_us
            );
        }
        let m = scale_measured(source)?;
        let latency_ms = a.latency_us / 1000.0;
        if a.json {
            for kind in [scale::Kind::Rank, scale::Kind::Node] {
                for target in scale::TARGETS {
                    if let Some(p) = scale::project(&m, kind, target, latency_ms) {
                        println!("{}", serde_json::to_string(&p)?);
                    }
                }
            }
        } else {
            print!("{}", scale::table(&m, latency_ms));
        }
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(source) = &a.project {
        let measured = measured(source)?;
        if a.json {
            let mut n = 16.0;
            while n <= 1024.0 {
                for p in projection::project(&measured, n) {
                    println!("{}", serde_json::to_string(&p)?);
                }
                n *= 2.0;
            }
        } else {
            print!("{}", projection::table(&measured));
        }
        if let Some(path) = &a.svg {
            write_svg(path, sim::plot::projection_svg(&measured))?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(Paper::Dfr) = a.reproduce {
        if a.svg.is_some() {
            anyhow::bail!("--svg goes with --reproduce table3 or --project");
        }
        let seeds = a.seeds;
        if !(1..=100_000).contains(&seeds) {
            anyhow::bail!("--seeds {seeds}: must be between 1 and 100000");
        }
        for stencil in [sim::localised::Stencil::OneD, sim::localised::Stencil::TwoD] {
            let rows = sim::localised::reproduce(stencil, seeds);
            if a.json {
                for r in &rows {
                    println!("{}", serde_json::to_string(r)?);
                }
                continue;
            }
            println!(
                "{} stencil, one rank per node, node MTBF 100 h, 1000 iterations of 9.72 s, a checkpoint every 6, means of {seeds} seeds",
                match stencil {
                    sim::localised::Stencil::OneD => "One-dimensional (the paper's figure 6)",
                    sim::localised::Stencil::TwoD => "\nTwo-dimensional",
                },
            );
            print!("{}", sim::localised::table(&rows));
        }
        if !a.json {
            println!("(energy at 125 J/s computing, 110 J/s idle; the three recoveries meet the same failures and last as long; see `frame_cli::sim::localised`)");
        }
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(Paper::Table3) = a.reproduce {
        if !(1..=MAX_RUNS / 10).contains(&a.runs) {
            anyhow::bail!(
                "--runs {}: must be between 1 and {} with --reproduce",
                a.runs,
                MAX_RUNS / 10
            );
        }
        let rows = table3::reproduce(a.runs, a.seed);
        if a.json {
            for r in &rows {
                println!("{}", serde_json::to_string(r)?);
            }
        } else {
            println!("Table 3 (simulation) of Coordinated checkpointing with logging of transmitted data and asynchronous recovery: mean overhead of a 3600 s job, {} runs per point, seed {}", a.runs, a.seed);
            print!("{}", table3::table(&rows));
            println!("(± the 95 % confidence half-width; chosen: {}; the fourth pair is simulated at 240/1200; the readings are explained in `frame_cli::sim::table3`)", table3::Reading::CHOSEN.describe());
        }
        if let Some(path) = &a.svg {
            write_svg(path, sim::plot::table3_svg(&rows))?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    if a.svg.is_some() {
        anyhow::bail!("--svg goes with --reproduce or --project");
    }
    let levels = a.mtbf.len();
    if levels == 0 || a.checkpoint.len() != levels || a.recovery.len() != levels {
        anyhow::bail!(
            "--mtbf, --checkpoint and --recovery need one value per level ({levels} MTBF given)"
        );
    }
    check_job(a, 1)?;
    let model = Model::with_optimal_periods(
        a.planned,
        a.step,
        &a.mtbf,
        &a.checkpoint,
        &a.recovery,
        strategy(&a.strategy, levels, a.async_window)?,
    );
    let s = sim::simulate(&model, a.runs, a.seed);
    if s.unfinished > 0 {
        eprintln!(
            "frame sim: {} of {} runs did not finish within {} times the planned computation (failures come faster than recoveries); their overhead is a lower bound",
            s.unfinished, s.runs, sim::GIVE_UP
        );
    }
    if a.json {
        println!(
            "{}",
            serde_json::json!({
                "periods_s": model.periods, "runs": s.runs, "mean_s": s.mean, "sd_s": s.sd,
                "ci95_s": s.ci95, "failures": s.failures, "unfinished": s.unfinished,
            })
        );
    } else {
        let periods: Vec<String> = model.periods.iter().map(|p| format!("{p:.1}")).collect();
        println!(
            "checkpoint periods (s of computation, per level): {}",
            periods.join(", ")
        );
        println!(
            "overhead over {} runs: mean {:.1} s ± {:.1} (95 %), sd {:.1} s; failures per run: {}",
            s.runs,
            s.mean,
            s.ci95,
            s.sd,
            s.failures
                .iter()
                .map(|f| format!("{f:.2}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(ExitCode::SUCCESS)
}
