//! What `frame verify` reports: each finding with its severity and path,
//! and the totals.

use std::path::{Path, PathBuf};

/// How bad a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// Data is wrong or lost.
    Damage,
    /// A hint is off; the data is sound.
    Warning,
    /// A state recovery handles by itself.
    Note,
}

/// One thing `verify` found.
#[derive(Clone, Debug)]
pub struct Finding {
    /// How bad it is.
    pub severity: Severity,
    /// File or directory concerned.
    pub path: PathBuf,
    /// What is wrong.
    pub message: String,
}

/// What `verify` found under a directory.
#[derive(Debug, Default)]
pub struct Report {
    /// Every finding, in the order found.
    pub findings: Vec<Finding>,
    /// Data files checked.
    pub files: usize,
    /// Checkpoint directories seen.
    pub checkpoints: usize,
    /// Per job and level: the newest checkpoint every rank can restore.
    pub restorable: Vec<(String, u8, Option<u64>)>,
}

impl Report {
    /// Number of findings of `severity`.
    pub fn count(&self, severity: Severity) -> usize {
        self.findings
            .iter()
            .filter(|f| f.severity == severity)
            .count()
    }

    pub(super) fn add(&mut self, severity: Severity, path: &Path, message: impl Into<String>) {
        self.findings.push(Finding {
            severity,
            path: path.to_path_buf(),
            message: message.into(),
        });
    }
}
