//! One JSON line per recovery: the runtime-recovery metric.

use super::RecoveryMode;
use serde::{Deserialize, Serialize};
use std::io::Write;

/// Timeline of one recovery, in nanoseconds since the Unix epoch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecoveryRecord {
    /// 1 for the job's first failure, and so on.
    pub failure: usize,
    /// How the job recovered.
    pub mode: RecoveryMode,
    /// `"rank"` or `"node"`.
    pub kind: String,
    /// Epoch the job recovered into.
    pub epoch: u64,
    /// Ranks that failed.
    pub failed_ranks: Vec<u32>,
    /// Nodes that failed.
    pub failed_nodes: Vec<u32>,
    /// When the failure was detected (by a daemon, or by the root for nodes).
    pub detected_ns: u64,
    /// When the root began sending REINIT (or the relaunch, in redeploy mode).
    pub reinit_sent_ns: u64,
    /// When the last replacement rank was started.
    pub replacements_started_ns: u64,
    /// When the world barrier of the new epoch was released.
    pub barrier_ns: u64,
    /// `barrier_ns - detected_ns`, in milliseconds: total runtime recovery.
    pub runtime_recovery_ms: f64,
}

impl RecoveryRecord {
    /// Closes the record at the barrier release `at_ns`.
    pub(crate) fn close(&mut self, at_ns: u64) {
        self.barrier_ns = at_ns;
        self.runtime_recovery_ms = at_ns.saturating_sub(self.detected_ns) as f64 / 1e6;
    }

    /// Appends the record to `out` as one JSON line.
    pub(crate) fn write(&self, out: &mut impl Write) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(self).map_err(std::io::Error::other)?;
        line.push(b'\n');
        out.write_all(&line)?;
        out.flush()
    }
}
