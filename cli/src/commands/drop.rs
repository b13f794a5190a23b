//! `frame drop ID DIR... [--job JOB] [--yes]`: one checkpoint off every level.

use super::list::scan_all;
use anyhow::bail;
use frame::internals::level::catalog;
use std::path::PathBuf;
use std::process::ExitCode;

pub fn run(id: u64, dirs: &[PathBuf], job: Option<&str>, yes: bool) -> anyhow::Result<ExitCode> {
    let levels = scan_all(dirs)?;
    let chosen: Vec<_> = catalog::of_job(&levels, job)
        .into_iter()
        .filter(|l| l.checkpoints.iter().any(|c| c.id == id))
        .collect();
    if chosen.is_empty() {
        let whose = job.map(|j| format!(" of job `{j}`")).unwrap_or_default();
        bail!("no checkpoint {id}{whose} under {}", list(dirs));
    }
    let jobs: std::collections::BTreeSet<&str> =
        chosen.iter().filter_map(|l| l.job.as_deref()).collect();
    if jobs.len() > 1 {
        let names: Vec<&str> = jobs.into_iter().collect();
        bail!(
            "checkpoint {id} exists for several jobs ({}); name one with --job",
            names.join(", ")
        );
    }
    for level in &chosen {
        println!("{}: checkpoint {id}", level.path.display());
    }
    if !super::clean::confirm(
        &format!("Remove checkpoint {id} from these directories for good?"),
        yes,
    )? {
        println!("nothing removed");
        return Ok(ExitCode::SUCCESS);
    }
    let removed = catalog::drop_checkpoint(&chosen, id)?;
    for r in &removed {
        for kept in &r.kept {
            println!("kept {} (not made by frame)", kept.display());
        }
    }
    println!(
        "removed checkpoint {id} from {} directory(ies)",
        removed.len()
    );
    Ok(ExitCode::SUCCESS)
}

fn list(dirs: &[PathBuf]) -> String {
    let names: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    names.join(", ")
}
