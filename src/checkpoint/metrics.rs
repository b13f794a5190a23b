//! The metrics lines the ranks write (rank 0, after one all-reduce): one
//! per checkpoint (the checkpoint-overhead metric) and one per recovery
//! (the application-recovery metric: identifying the level, fetching or
//! rebuilding, loading). The managers write the transformation lines and
//! the runtime's root the runtime-recovery lines, into the same file.

use super::Checkpointer;
use crate::error::Result;
use crate::format::Metadata;
use crate::level::Level;
use std::time::Duration;

/// The metrics line of one checkpoint (written by rank 0).
#[derive(serde::Serialize)]
struct CheckpointRecord<'a> {
    event: &'static str,
    job: &'a str,
    checkpoint: u64,
    /// Time the slowest rank spent in the checkpoint, microseconds.
    blocked_us_max: u64,
    /// Mean over the ranks.
    blocked_us_mean: f64,
    /// Region bytes over all ranks.
    raw_bytes: u64,
    /// Bytes stored at level 1 over all ranks.
    stored_bytes: u64,
    /// Levels the checkpoint was sent on to.
    promoted: Vec<u8>,
}

impl Checkpointer<'_> {
    /// With a metrics file configured: one line per checkpoint from rank 0,
    /// with the blocked time of the slowest rank and the mean (one
    /// all-reduce). Collective.
    pub(super) fn record_metrics(
        &mut self,
        id: u64,
        took: Duration,
        meta: &Metadata,
        promoted: &[Level],
    ) -> Result<()> {
        let Some(path) = self.cfg.metrics_file().map(|p| p.to_path_buf()) else {
            return Ok(());
        };
        let us = took.as_micros() as u64;
        let mut max = [us];
        self.comm
            .all_reduce_u64(&mut max, crate::comm::ReduceOp::Max)?;
        let mut sums = [us, meta.raw_bytes, meta.stored_bytes];
        self.comm
            .all_reduce_u64(&mut sums, crate::comm::ReduceOp::Sum)?;
        if self.comm.rank() == 0 {
            let line = CheckpointRecord {
                event: "checkpoint",
                job: &self.cfg.job.id,
                checkpoint: id,
                blocked_us_max: max[0],
                blocked_us_mean: sums[0] as f64 / self.comm.size() as f64,
                raw_bytes: sums[1],
                stored_bytes: sums[2],
                promoted: promoted.iter().map(|l| l.number()).collect(),
            };
            if let Err(e) = crate::safefs::append_json_line(&path, &line) {
                tracing::warn!(file = %path.display(), error = %e, "cannot write metrics");
            }
        }
        Ok(())
    }
}

/// The metrics line of one recovery (written by rank 0, read by
/// `frame report`).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RecoveryRecord {
    /// Always `"recovery"`.
    pub event: String,
    /// Job id.
    pub job: String,
    /// The runtime's epoch the program recovered in (0 without the runtime).
    pub epoch: u64,
    /// Nodes the runtime reported failed.
    pub failed_nodes: Vec<u32>,
    /// Ranks the runtime reported failed.
    pub failed_ranks: Vec<u32>,
    /// `frame` or `iterative`.
    pub strategy: String,
    /// The level the checkpoint came from.
    pub level: u8,
    /// Checkpoint restored.
    pub checkpoint: u64,
    /// Collective rounds spent identifying the level and checkpoint.
    pub rounds: u32,
    /// Slowest rank's time identifying, milliseconds.
    pub identify_ms: f64,
    /// Fetching or rebuilding from the level.
    pub fetch_ms: f64,
    /// Loading into the regions.
    pub load_ms: f64,
    /// Slowest rank's identify + fetch + load.
    pub application_recovery_ms: f64,
}

impl Checkpointer<'_> {
    /// With a metrics file configured: one line per recovery from rank 0
    /// with the slowest rank's times (one all-reduce). Collective.
    pub(super) fn record_recovery(&mut self, id: u64, level: Level, load: Duration) -> Result<()> {
        let Some(path) = self.cfg.metrics_file().map(|p| p.to_path_buf()) else {
            return Ok(());
        };
        let us = |d: Duration| d.as_micros() as u64;
        let (identify, fetch) = (self.stats.identify_time, self.stats.fetch_time);
        let mut max = [
            us(identify),
            us(fetch),
            us(load),
            us(identify + fetch + load),
        ];
        self.comm
            .all_reduce_u64(&mut max, crate::comm::ReduceOp::Max)?;
        if self.comm.rank() == 0 {
            let failures = self.comm.failures();
            let ms = |v: u64| v as f64 / 1000.0;
            let line = RecoveryRecord {
                event: "recovery".into(),
                job: self.cfg.job.id.clone(),
                epoch: failures.epoch,
                failed_nodes: failures.nodes,
                failed_ranks: failures.ranks,
                strategy: match self.cfg.recovery.strategy {
                    crate::config::Strategy::Frame => "frame",
                    crate::config::Strategy::Iterative => "iterative",
                }
                .into(),
                level: level.number(),
                checkpoint: id,
                rounds: self.stats.recovery_rounds,
                identify_ms: ms(max[0]),
                fetch_ms: ms(max[1]),
                load_ms: ms(max[2]),
                application_recovery_ms: ms(max[3]),
            };
            if let Err(e) = crate::safefs::append_json_line(&path, &line) {
                tracing::warn!(file = %path.display(), error = %e, "cannot write metrics");
            }
        }
        Ok(())
    }
}
