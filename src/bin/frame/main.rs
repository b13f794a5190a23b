//! `frame`: the command-line tool of the frame checkpoint/restart library.

mod inspect;
mod verify;

use clap::{Parser, Subcommand};
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
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
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
