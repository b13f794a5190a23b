//! What the ranks measure for the metrics file (rank 0 writes, after one
//! all-reduce): each checkpoint's overhead and each recovery's times
//! (identifying the level, fetching or rebuilding, loading). The records
//! themselves are [`crate::metrics`]'s.

use super::Checkpointer;
use crate::error::Result;
use crate::format::Metadata;
use crate::level::Level;
use crate::metrics::{CheckpointRecord, Record, RecoveryRecord};
use std::time::Duration;

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
            Record::Checkpoint(CheckpointRecord {
                job: self.cfg.job.id.clone(),
                checkpoint: id,
                blocked_us_max: max[0],
                blocked_us_mean: sums[0] as f64 / self.comm.size() as f64,
                raw_bytes: sums[1],
                stored_bytes: sums[2],
                promoted: promoted.iter().map(|l| l.number()).collect(),
            })
            .append(&path);
        }
        Ok(())
    }
}

impl Checkpointer<'_> {
    /// With a metrics file configured: one line per recovery from rank 0
    /// with the slowest rank's times and the ranks' CPU time summed (two
    /// all-reduces). Collective.
    pub(super) fn record_recovery(&mut self, id: u64, level: Level, load: Duration) -> Result<()> {
        let Some(path) = self.cfg.metrics_file().map(|p| p.to_path_buf()) else {
            return Ok(());
        };
        let us = |d: Duration| d.as_micros() as u64;
        let (identify, fetch) = (self.stats.identify_time, self.stats.fetch_time);
        let reentry = self.comm.link().recovery().reentry;
        let mut max = [
            us(identify),
            us(fetch),
            us(load),
            us(identify + fetch + load),
            us(self.stats.reentry_time),
            reentry.map_or(0, |r| r.released_ns),
            crate::metrics::now_ns(),
        ];
        self.comm
            .all_reduce_u64(&mut max, crate::comm::ReduceOp::Max)?;
        // The ranks' CPU from when each learned of the recovery.
        let cpu = reentry.map_or(0, |r| {
            crate::metrics::process_cpu_ns().saturating_sub(r.cpu_at_began_ns) / 1000
        });
        let mut sum = [cpu];
        self.comm
            .all_reduce_u64(&mut sum, crate::comm::ReduceOp::Sum)?;
        if self.comm.rank() == 0 {
            let failures = self.comm.link().recovery();
            let ms = |v: u64| v as f64 / 1000.0;
            Record::Recovery(RecoveryRecord {
                job: self.cfg.job.id.clone(),
                epoch: failures.epoch,
                failed_nodes: failures.failed.nodes.into_iter().collect(),
                failed_ranks: failures.failed.ranks.into_iter().collect(),
                strategy: self.cfg.recovery.strategy.name().into(),
                level: level.number(),
                checkpoint: id,
                rounds: self.stats.recovery_rounds,
                identify_ms: ms(max[0]),
                fetch_ms: ms(max[1]),
                load_ms: ms(max[2]),
                application_recovery_ms: ms(max[3]),
                released_ns: max[5],
                reentry_ms: ms(max[4]),
                resumed_ns: max[6],
                ranks_cpu_ms: ms(sum[0]),
            })
            .append(&path);
        }
        Ok(())
    }
}
