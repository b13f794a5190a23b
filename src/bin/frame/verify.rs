//! `frame verify DIR`

use anyhow::Context;
use frame::level::catalog;
use std::path::Path;
use std::process::ExitCode;

pub fn run(dir: &Path) -> anyhow::Result<ExitCode> {
    let levels = catalog::scan(dir).with_context(|| format!("cannot read {}", dir.display()))?;
    let (problems, checked) = catalog::verify(&levels);
    let checkpoints: usize = levels.iter().map(|l| l.checkpoints.len()).sum();
    for p in &problems {
        println!("CORRUPT {}: {}", p.path.display(), p.message);
    }
    if problems.is_empty() {
        println!(
            "ok: {checked} file(s) in {checkpoints} checkpoint(s) verified under {}",
            dir.display()
        );
        Ok(ExitCode::SUCCESS)
    } else {
        println!(
            "{} problem(s) in {checked} file(s) of {checkpoints} checkpoint(s) under {}",
            problems.len(),
            dir.display()
        );
        Ok(ExitCode::from(1))
    }
}
