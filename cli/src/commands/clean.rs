//! `frame clean DIR [--job ID] [--yes]`

use anyhow::{bail, Context};
use frame::internals::level::catalog;
use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;

pub fn run(dir: &Path, job: Option<&str>, yes: bool) -> anyhow::Result<ExitCode> {
    let levels = catalog::scan(dir)
        .with_context(|| format!("cannot read {}", dir.display()))?
        .levels;
    let chosen = catalog::of_job(&levels, job);
    if chosen.is_empty() {
        match job {
            Some(j) => println!("no checkpoints of job `{j}` under {}", dir.display()),
            None => println!("no checkpoints under {}", dir.display()),
        }
        return Ok(ExitCode::SUCCESS);
    }
    let jobs: std::collections::BTreeSet<&str> =
        chosen.iter().filter_map(|l| l.job.as_deref()).collect();
    if job.is_none() && jobs.len() > 1 {
        let list: Vec<&str> = jobs.into_iter().collect();
        bail!(
            "{} holds checkpoints of several jobs ({}); name one with --job",
            dir.display(),
            list.join(", ")
        );
    }
    for level in &chosen {
        let ids: Vec<String> = level.checkpoints.iter().map(|c| c.id.to_string()).collect();
        println!(
            "{}: checkpoint(s) {}",
            level.path.display(),
            if ids.is_empty() {
                "none".into()
            } else {
                ids.join(", ")
            }
        );
    }
    if !confirm("Remove these checkpoints for good?", yes)? {
        println!("nothing removed");
        return Ok(ExitCode::SUCCESS);
    }
    let removed = catalog::clean(&chosen)?;
    let total: usize = removed.iter().map(|r| r.checkpoints.len()).sum();
    for r in &removed {
        for kept in &r.kept {
            println!("kept {} (not made by frame)", kept.display());
        }
    }
    println!(
        "removed {total} checkpoint(s) in {} directory(ies)",
        removed.len()
    );
    Ok(ExitCode::SUCCESS)
}

/// Whether the user agrees to `question` (asked on a terminal; `yes`
/// answers it; without a terminal, an error asking for `--yes`).
pub fn confirm(question: &str, yes: bool) -> anyhow::Result<bool> {
    if yes {
        return Ok(true);
    }
    if !std::io::stdin().is_terminal() {
        bail!("refusing to remove checkpoints without confirmation: pass --yes");
    }
    print!("{question} [y/N] ");
    std::io::stdout().flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes"))
}
