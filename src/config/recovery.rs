//! `[recovery]`: how a job recovers. The strategy finds the checkpoint to
//! restore; the mode says who goes back to it (every rank, or only the
//! failed ranks' replacements, fed by the survivors' message logs); the
//! log limit bounds what each rank keeps for that.

use bytesize::ByteSize;
use serde::{Deserialize, Serialize};

/// How recovery finds the checkpoint to restore when level 1 alone
/// cannot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Strategy {
    /// Failure-aware: from the failed nodes, the layouts and the commits,
    /// every rank computes the lowest level that restores the newest
    /// checkpoint, after a single exchange; the files are checked while
    /// loading, and damage moves every rank to the next level together.
    /// Written `"frame"` (the name of the paper's method) or
    /// `"failure-aware"`.
    #[default]
    #[serde(rename = "frame", alias = "failure-aware")]
    FailureAware,
    /// The baseline: level after level, every rank checks its files for
    /// that level and all ranks agree, until one level works.
    Iterative,
}

impl Strategy {
    /// The strategy as the configuration and the metrics file name it.
    pub fn name(self) -> &'static str {
        match self {
            Self::FailureAware => "frame",
            Self::Iterative => "iterative",
        }
    }
}

/// Who goes back to the checkpoint after a failure.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RecoveryMode {
    /// Every rank rolls back to the checkpoint (global restart).
    #[default]
    Global,
    /// Only a failed rank's replacement goes back to its checkpoint and
    /// recomputes, fed the messages it lost from the survivors' logs; the
    /// survivors wait without rolling back. What this cannot handle falls
    /// back to `global`, saying why (see docs/LOCALISED.md).
    Logged,
    /// Every rank re-enters, but only the failed ranks' replacements
    /// restore their live data: the program recovers in the failure's
    /// dependency cone ([`crate::Checkpointer::recover_cone`]), the
    /// survivors in it recomputing from temporary copies while the others
    /// wait with their live data. What this cannot handle falls back to
    /// `global`, saying why (see docs/LOCALISED.md).
    Cone,
}

impl RecoveryMode {
    /// The mode as the configuration and the metrics file name it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Global => "global",
            Self::Logged => "logged",
            Self::Cone => "cone",
        }
    }
}

/// The smallest and largest `recovery.log_limit`.
pub(super) const LOG_LIMITS: (u64, u64) = (4 << 10, 1 << 40);

/// The most processes `recovery.spares` may give one failed rank.
pub(super) const MAX_SPARES: u32 = 64;

/// Whether `name` can be a cpufreq governor's name (what the kernel's
/// `scaling_available_governors` lists: lowercase letters, digits and
/// underscores, at most 32 bytes). Empty: none.
pub(super) fn governor_name_ok(name: &str) -> bool {
    name.len() <= 32
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// `[recovery]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RecoveryConfig {
    /// The strategy.
    pub strategy: Strategy,
    /// Who rolls back.
    pub mode: RecoveryMode,
    /// In `logged` mode, the most bytes of messages each rank keeps for
    /// one checkpoint interval (4 KiB to 1 TiB); past it, a failure in that
    /// interval falls back to a global restart.
    pub log_limit: ByteSize,
    /// In `logged` mode, the processes that recompute a failed rank's lost
    /// interval together (1 to 64): its replacement and `spares - 1`
    /// helpers on its node, among which the program splits the work (see
    /// docs/LOCALISED.md). 1: the replacement alone.
    pub spares: u32,
    /// In `logged` mode, the cpufreq governor a node whose ranks all wait
    /// for another's recovery sets on its CPUs meanwhile (`powersave`,
    /// say), where the node is a host of its own and the machine lets it;
    /// empty: frequencies are left alone (see docs/LOCALISED.md).
    pub idle_governor: String,
    /// The checkpoint a job restarts from (an older one included); 0: the
    /// newest that every rank can restore. Newer checkpoints stay on disk
    /// and new ones are numbered past them. Under `frame run` it holds
    /// until the job commits a newer checkpoint; a program restarted
    /// without the runtime restores it as long as the key is set.
    pub restart_from: u64,
}

impl Default for RecoveryConfig {
    fn default() -> Self {
        Self {
            strategy: Strategy::default(),
            mode: RecoveryMode::default(),
            log_limit: ByteSize::mib(256),
            spares: 1,
            idle_governor: String::new(),
            restart_from: 0,
        }
    }
}
