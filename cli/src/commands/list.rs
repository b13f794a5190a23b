//! `frame ls DIR...`: every checkpoint once, with the levels that hold it.

use anyhow::Context;
use bytesize::ByteSize;
use frame::internals::level::catalog::{self, LevelDir, Listed};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, UNIX_EPOCH};

/// Every level directory under `dirs` (each once).
pub fn scan_all(dirs: &[PathBuf]) -> anyhow::Result<Vec<LevelDir>> {
    let mut levels = Vec::new();
    for dir in dirs {
        let tree = catalog::scan(dir).with_context(|| format!("cannot read {}", dir.display()))?;
        levels.extend(tree.levels);
    }
    levels.sort_by(|a, b| a.path.cmp(&b.path));
    levels.dedup_by(|a, b| a.path == b.path);
    Ok(levels)
}

pub fn run(dirs: &[PathBuf], job: Option<&str>, json: bool) -> anyhow::Result<ExitCode> {
    let levels = scan_all(dirs)?;
    let listed: Vec<Listed> = catalog::list(&levels)
        .into_iter()
        .filter(|l| job.is_none_or(|j| l.job == j))
        .collect();
    if json {
        println!("{}", serde_json::to_string_pretty(&listed)?);
        return Ok(ExitCode::SUCCESS);
    }
    if listed.is_empty() {
        println!("no checkpoints found");
        return Ok(ExitCode::SUCCESS);
    }
    let mut jobs: BTreeMap<&str, Vec<&Listed>> = BTreeMap::new();
    for l in &listed {
        jobs.entry(&l.job).or_default().push(l);
    }
    for (i, (job, rows)) in jobs.iter().enumerate() {
        if i > 0 {
            println!();
        }
        println!("job {job}");
        println!(
            "  {:>8}  {:<20}  {:>10}  levels",
            "id", "created (UTC)", "size"
        );
        for l in rows {
            let when = humantime::format_rfc3339_seconds(
                UNIX_EPOCH + Duration::from_millis(l.created_unix_ms),
            );
            let levels: Vec<String> = l
                .levels
                .iter()
                .map(|(level, state)| format!("L{level} {state}"))
                .collect();
            println!(
                "  {:>8}  {:<20}  {:>10}  {}",
                l.id,
                when.to_string(),
                ByteSize(l.bytes).to_string(),
                levels.join(", ")
            );
        }
        // The rules the levels recorded, each once (a level whose
        // configuration changed between checkpoints shows each).
        let mut rules: Vec<(u8, String)> = (rows.iter())
            .flat_map(|l| l.rules.iter().map(|(level, r)| (*level, r.to_string())))
            .collect();
        rules.sort();
        rules.dedup();
        if !rules.is_empty() {
            let text: Vec<String> = (rules.iter())
                .map(|(level, rule)| format!("L{level} {rule}"))
                .collect();
            println!("  redundancy as recorded: {}", text.join("; "));
        }
        match rows.iter().filter(|l| l.committed()).map(|l| l.id).max() {
            Some(newest) => println!(
                "  a restart restores checkpoint {newest} if every rank can; `frame run --restart-from ID` \
                 (recovery.restart_from) names another"
            ),
            None => println!("  no checkpoint is whole at any level"),
        }
    }
    Ok(ExitCode::SUCCESS)
}
