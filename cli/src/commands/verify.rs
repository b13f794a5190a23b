//! `frame verify DIR`

use anyhow::Context;
use frame::internals::level::catalog::{self, Severity};
use std::path::Path;
use std::process::ExitCode;

pub fn run(dir: &Path) -> anyhow::Result<ExitCode> {
    let tree = catalog::scan(dir).with_context(|| format!("cannot read {}", dir.display()))?;
    let report = catalog::verify(&tree);
    for f in &report.findings {
        let tag = match f.severity {
            Severity::Damage => "CORRUPT",
            Severity::Warning => "WARNING",
            Severity::Note => "note",
        };
        println!("{tag} {}: {}", f.path.display(), f.message);
    }
    for (job, level, newest) in &report.restorable {
        match newest {
            Some(id) => println!("job {job}, L{level}: newest restorable checkpoint {id}"),
            None => println!("job {job}, L{level}: no restorable checkpoint"),
        }
    }
    let (files, ckpts) = (report.files, report.checkpoints);
    let damage = report.count(Severity::Damage);
    let warnings = report.count(Severity::Warning);
    if damage > 0 {
        println!(
            "{damage} problem(s) in {files} file(s) of {ckpts} checkpoint(s) under {}",
            dir.display()
        );
        return Ok(ExitCode::from(1));
    }
    if warnings > 0 {
        println!(
            "sound, with {warnings} warning(s): {files} file(s) in {ckpts} checkpoint(s) verified under {}",
            dir.display()
        );
    } else {
        println!(
            "ok: {files} file(s) in {ckpts} checkpoint(s) verified under {}",
            dir.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}
