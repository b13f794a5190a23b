//! `frame`: the command-line tool of the frame checkpoint/restart library.

#![forbid(unsafe_code)]

mod commands;

use commands::{clean, drop, inspect, list, run, sim, verify};

use clap::{Parser, Subcommand};
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

/// Checkpoint/restart for long-running parallel programs.
#[derive(Parser)]
#[command(name = "frame", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run PROGRAM as a fault-tolerant job: one daemon per (virtual) node,
    /// ranks respawned and survivors rolled back after failures.
    Run {
        #[command(flatten)]
        launch: frame_runtime::LaunchArgs,
        /// The program and its arguments.
        #[arg(last = true, required = true, value_name = "PROGRAM")]
        command: Vec<OsString>,
    },
    /// List the checkpoints under a directory: ids, levels, ranks, regions,
    /// sizes and compression ratio.
    Inspect {
        /// A storage directory, a job's directory or a checkpoint directory.
        dir: PathBuf,
        /// Print every rank's file and record.
        #[arg(long)]
        ranks: bool,
        /// Print the catalog as JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// List every checkpoint once, over all levels: id, creation time,
    /// size, and the levels that hold it with their state (committed,
    /// partial, damaged), from the records and markers alone.
    Ls {
        /// Storage directories (storage.local_dir, storage.global_dir) or
        /// a job's directories.
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// Only this job's checkpoints.
        #[arg(long)]
        job: Option<String>,
        /// Print the list as JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Remove one checkpoint from every level under the directories (after
    /// confirmation): only files frame made; a running job is never
    /// touched.
    Drop {
        /// The checkpoint id (see `frame ls`).
        id: u64,
        /// Storage directories (storage.local_dir, storage.global_dir) or
        /// a job's directories.
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// The job (needed when several have a checkpoint ID).
        #[arg(long)]
        job: Option<String>,
        /// Do not ask for confirmation.
        #[arg(long)]
        yes: bool,
    },
    /// Check every checkpoint under a directory: headers, every chunk CRC,
    /// records against their files and places, each checkpoint's
    /// completeness over all ranks, and the LATEST pointers. Exits 0 when
    /// the data is sound (warnings name stale hints), 1 when something is
    /// damaged (each problem names the file, and the chunk or field).
    Verify {
        /// A storage directory, a job's directory or a checkpoint directory.
        dir: PathBuf,
    },
    /// Remove a job's checkpoints for good (after confirmation), for
    /// example to start a job over after "not recoverable". Only files frame
    /// made are removed; a running job is never touched.
    Clean {
        /// A storage directory (such as storage.local_dir) or a job's directory.
        dir: PathBuf,
        /// The job whose checkpoints to remove (needed when DIR holds several).
        #[arg(long)]
        job: Option<String>,
        /// Do not ask for confirmation.
        #[arg(long)]
        yes: bool,
    },
    /// Turn metrics files (`metrics.file` of the ranks and managers, and
    /// `frame run --metrics`) into the five recovery metrics per failure:
    /// a table, and with --svg a plot of recovery time per failure level,
    /// per strategy and recovery mode.
    Report {
        /// Metrics files (JSON lines).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Write the plot to this SVG file.
        #[arg(long, value_name = "FILE")]
        svg: Option<PathBuf>,
    },
    /// Simulate a job that fails (failure rates, checkpoint and recovery
    /// costs per level) under a recovery strategy, or reproduce a paper's
    /// table (`--reproduce table3`).
    Sim(sim::SimArgs),
    /// Convert an FTI configuration file (INI) to frame's TOML, printed on
    /// standard output; warnings about keys frame ignores go to standard
    /// error.
    FtiConfig {
        /// The FTI configuration file.
        file: PathBuf,
    },
}

/// `frame fti-config`.
fn fti_config(file: &std::path::Path) -> anyhow::Result<ExitCode> {
    let fti = frame::config::fti::FtiFile::read(file)?;
    for w in &fti.warnings {
        eprintln!("frame: warning: {w}");
    }
    print!("{}", fti.to_toml());
    Ok(ExitCode::SUCCESS)
}

/// `frame report`.
fn report(files: &[PathBuf], svg: Option<&std::path::Path>) -> anyhow::Result<ExitCode> {
    let report = frame_cli::report::Report::read(files)?;
    print!("{}", report.table());
    if let Some(path) = svg {
        let doc = frame_cli::report::svg(&report)?;
        std::fs::write(path, doc)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
        println!("plot written to {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

fn main() -> ExitCode {
    // `frame run` starts this executable again as each node's daemon.
    if let Some(code) = frame_runtime::serve_if_daemon() {
        return code;
    }
    frame_log::init(frame_log::Style::Plain, "error");
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run { launch, command } => run::run(&launch, &command),
        Command::Inspect { dir, ranks, json } => inspect::run(&dir, ranks, json),
        Command::Ls { dirs, job, json } => list::run(&dirs, job.as_deref(), json),
        Command::Drop { id, dirs, job, yes } => drop::run(id, &dirs, job.as_deref(), yes),
        Command::Verify { dir } => verify::run(&dir),
        Command::Clean { dir, job, yes } => clean::run(&dir, job.as_deref(), yes),
        Command::Report { files, svg } => report(&files, svg.as_deref()),
        Command::Sim(args) => sim::run(&args),
        Command::FtiConfig { file } => fti_config(&file),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("frame: {e:#}");
            ExitCode::from(2)
        }
    }
}
