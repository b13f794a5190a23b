//! `frame`: the command-line tool of the frame checkpoint/restart library.

mod inspect;
mod run;
mod verify;

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
        launch: frame::runtime::LaunchArgs,
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
    /// Check every checkpoint under a directory: headers, every chunk CRC,
    /// and metadata records against their files. Exits 0 when all is sound,
    /// 1 when something is damaged (each problem names the file and chunk).
    Verify {
        /// A storage directory, a job's directory or a checkpoint directory.
        dir: PathBuf,
    },
}

fn main() -> ExitCode {
    // `frame run` starts this executable again as each node's daemon.
    if let Some(code) = frame::runtime::serve_if_daemon() {
        return code;
    }
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run { launch, command } => run::run(&launch, &command),
        Command::Inspect { dir, ranks, json } => inspect::run(&dir, ranks, json),
        Command::Verify { dir } => verify::run(&dir),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("frame: {e:#}");
            ExitCode::from(2)
        }
    }
}
