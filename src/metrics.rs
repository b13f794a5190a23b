//! Every record frame writes to a metrics file, one JSON line each, told
//! apart by its `event` field:
//!
//! | `event` | written by | measures |
//! |---|---|---|
//! | `checkpoint` | rank 0, per checkpoint | the checkpoint overhead (blocked time) |
//! | `promotion` | each node's manager, per level promoted | the checkpoint transformation |
//! | `recovery` | rank 0, per recovery | the application recovery (identify, fetch, load) |
//! | `runtime_start` | the runtime's root, once | the start: launch to the first release of the world barrier |
//! | `runtime_recovery` | the runtime's root, per failure | the runtime recovery (detection to barrier) |
//! | `rejoin` | a logged recovery's replacement | restoring alone, and recomputing until the next checkpoint |
//! | `idle` | the runtime's root, per rank that waited | a rank's wait during a logged recovery (wall and CPU time) |
//! | `help` | the runtime's root, per helper of a replacement | a helper's share of the recomputation (wall and CPU time) |
//! | `replay` | the runtime's root, per survivor that sent a replacement its log | messages and bytes sent again, and the log it held |
//!
//! The writers build these records and `frame report` reads them back with
//! the same types. Lines written before the `runtime_recovery` event had
//! a name carry no `event`; they are read as runtime recoveries.

use serde::{Deserialize, Serialize};
use std::path::Path;

/// One line of a metrics file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Record {
    /// A checkpoint's overhead.
    Checkpoint(CheckpointRecord),
    /// A node's promotion to one level.
    Promotion(PromotionRecord),
    /// The program's recovery.
    Recovery(RecoveryRecord),
    /// The runtime's start.
    RuntimeStart(RuntimeStartRecord),
    /// The runtime's recovery from one failure.
    RuntimeRecovery(RuntimeRecoveryRecord),
    /// A replacement that restored alone (a logged recovery).
    Rejoin(RejoinRecord),
    /// A rank that waited during a logged recovery.
    Idle(IdleRecord),
    /// A helper that recomputed with a replacement.
    Help(HelpRecord),
    /// A survivor that sent a replacement what it had lost.
    Replay(ReplayRecord),
    /// One rank's part in a cone recovery, or why there was none.
    Cone(ConeRecord),
}

/// One rank's part in a cone recovery (written when it ends it), or, from
/// rank 0 with `fallback` set and role `global`, why the recovery had to
/// be global.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConeRecord {
    /// Job id.
    pub job: String,
    /// The runtime's epoch.
    pub epoch: u64,
    /// The rank.
    pub rank: u32,
    /// `restored` (a failed rank's replacement), `recompute`, `supply`,
    /// `idle`, or `global`.
    pub role: String,
    /// Iterations it recomputed.
    pub steps: u32,
    /// The checkpoint restored.
    pub checkpoint: u64,
    /// The iteration the checkpoint holds.
    pub from: u64,
    /// The iteration every rank resumed from.
    pub target: u64,
    /// The failed ranks.
    pub failed: Vec<u32>,
    /// Why the recovery was global instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
    /// From the agreement until the rank ended its part, milliseconds.
    pub wall_ms: f64,
    /// CPU time of its process meanwhile, milliseconds.
    pub cpu_ms: f64,
}

/// What one survivor sent a logged recovery's replacement from its log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReplayRecord {
    /// The failure recovered (as in the runtime's record).
    pub failure: usize,
    /// The survivor.
    pub rank: u32,
    /// The replacement's rank.
    pub to: u32,
    /// Messages sent again.
    pub messages: u64,
    /// Their payload, bytes.
    pub bytes: u64,
    /// What the survivor's log held then, bytes.
    pub log_bytes: u64,
}

/// CPU time this process used so far (user and system, all its threads);
/// zero where the clock cannot be read. The idle, help and rejoin records
/// measure with it; programs may too.
pub fn process_cpu_time() -> std::time::Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    std::time::Duration::new(
        u64::try_from(t.tv_sec).unwrap_or(0),
        u32::try_from(t.tv_nsec).unwrap_or(0),
    )
}

/// [`process_cpu_time`] in nanoseconds.
pub fn process_cpu_ns() -> u64 {
    u64::try_from(process_cpu_time().as_nanos()).unwrap_or(u64::MAX)
}

/// Nanoseconds since the Unix epoch by this host's clock, the time base
/// of the records' timelines (zero if the clock is before 1970).
pub fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// What one helper of a logged recovery's replacement used (see
/// `recovery.spares`): from when it became a helper until it finished
/// its part.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HelpRecord {
    /// The failure recovered (as in the runtime's record).
    pub failure: usize,
    /// The failed rank whose replacement it helped.
    pub rank: u32,
    /// Its part (1 and up; the replacement is part 0).
    pub part: u32,
    /// Processes in the team, the replacement included.
    pub parts: u32,
    /// Wall time, milliseconds.
    pub wall_ms: f64,
    /// CPU time of its process, milliseconds.
    pub cpu_ms: f64,
}

/// How long one rank waited while another's logged recovery ran (from
/// the failure to the next checkpoint's commit), and the CPU time its
/// process used meanwhile: near zero when it waited blocked.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IdleRecord {
    /// The failure recovered (as in the runtime's record).
    pub failure: usize,
    /// The rank that waited.
    pub rank: u32,
    /// Wall time, milliseconds.
    pub wall_ms: f64,
    /// CPU time of its process meanwhile, milliseconds.
    pub cpu_ms: f64,
}

/// What the replacement of a logged recovery measured (it restored its
/// own checkpoint while the other ranks went on): written once the next
/// checkpoint committed, the lost work recomputed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RejoinRecord {
    /// Job id.
    pub job: String,
    /// The runtime's epoch (the same as before the failure).
    pub epoch: u64,
    /// The rank it replaced.
    pub rank: u32,
    /// The checkpoint it restored.
    pub checkpoint: u64,
    /// Loading the checkpoint and going through its commit again (the
    /// survivors' logs feeding it), milliseconds.
    pub restore_ms: f64,
    /// From then until the next checkpoint committed: the lost interval
    /// recomputed (and what followed it up to that checkpoint).
    pub recompute_ms: f64,
    /// The checkpoint whose commit ended the recomputation.
    pub caught_up_at: u64,
    /// CPU time of the replacement's process over `recompute_ms`,
    /// milliseconds (its helpers' are in their `help` records).
    #[serde(default)]
    pub recompute_cpu_ms: f64,
}

/// The metrics of one checkpoint (written by rank 0, after one
/// all-reduce).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CheckpointRecord {
    /// Job id.
    pub job: String,
    /// Checkpoint id.
    pub checkpoint: u64,
    /// Time the slowest rank spent in the checkpoint, microseconds.
    pub blocked_us_max: u64,
    /// Mean over the ranks.
    pub blocked_us_mean: f64,
    /// Region bytes over all ranks.
    pub raw_bytes: u64,
    /// Bytes stored at level 1 over all ranks.
    pub stored_bytes: u64,
    /// Levels the checkpoint was sent on to.
    pub promoted: Vec<u8>,
}

/// The metrics of one promotion of one node to one level.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromotionRecord {
    /// Job id.
    pub job: String,
    /// Checkpoint id.
    pub checkpoint: u64,
    /// Level number.
    pub level: u8,
    /// Node.
    pub node: u32,
    /// Whether the node's part succeeded.
    pub ok: bool,
    /// Microseconds the manager spent.
    pub micros: u64,
    /// Bytes read from level 1.
    pub bytes_in: u64,
    /// Bytes written or sent.
    pub bytes_out: u64,
    /// Why it failed.
    pub error: Option<String>,
}

/// The metrics of one recovery of the program (written by rank 0 with the
/// slowest rank's times).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecoveryRecord {
    /// Job id.
    pub job: String,
    /// The runtime's epoch the program recovered in (0 without the runtime).
    pub epoch: u64,
    /// Nodes the runtime reported failed.
    pub failed_nodes: Vec<u32>,
    /// Ranks the runtime reported failed.
    pub failed_ranks: Vec<u32>,
    /// `frame` (failure-aware) or `iterative`.
    pub strategy: String,
    /// The level the checkpoint came from.
    pub level: u8,
    /// Checkpoint restored.
    pub checkpoint: u64,
    /// Collective rounds spent identifying the level and checkpoint.
    pub rounds: u32,
    /// Slowest rank's time identifying, milliseconds.
    pub identify_ms: f64,
    /// Fetching or rebuilding from the level (a level-4 file read into
    /// the regions as it is fetched counts here).
    pub fetch_ms: f64,
    /// Loading into the regions (what is left of the restore after a
    /// fetch that loaded).
    pub load_ms: f64,
    /// Slowest rank's identify + fetch + load.
    pub application_recovery_ms: f64,
    /// Under a runtime, when the last rank was released into the epoch
    /// (nanoseconds since the Unix epoch; 0: not known).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub released_ns: u64,
    /// The slowest rank's time from its release to the search for the
    /// checkpoint: its way back through the program, its communicator's
    /// first exchanges, the checkpointer's opening (milliseconds).
    #[serde(default)]
    pub reentry_ms: f64,
    /// When the last rank finished loading (nanoseconds since the Unix
    /// epoch, by the ranks' clocks; 0 in records of older versions).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub resumed_ns: u64,
    /// The CPU time the ranks' processes spent on the recovery, summed:
    /// each from when it learned of the recovery to the end of its load
    /// (milliseconds; 0: not known).
    #[serde(default)]
    pub ranks_cpu_ms: f64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The runtime's start: from the launch until every rank was first
/// released into the job.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RuntimeStartRecord {
    /// Ranks of the job.
    pub ranks: u32,
    /// Nodes that run them (spares not counted).
    pub nodes: u32,
    /// When the root launched the job (nanoseconds since the Unix epoch).
    pub launched_ns: u64,
    /// When it first released the world barrier.
    pub released_ns: u64,
    /// `released_ns - launched_ns`, milliseconds.
    pub startup_ms: f64,
    /// Messages the root read from the daemons until then.
    pub root_messages: u64,
}

/// The timeline of the runtime's recovery from one failure, in
/// nanoseconds since the Unix epoch.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RuntimeRecoveryRecord {
    /// 1 for the job's first failure, and so on.
    pub failure: usize,
    /// How the job recovered: `online`, `logged` (only the failed rank's
    /// replacement went back, in the same epoch) or `redeploy`.
    pub mode: String,
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
    /// Why a job in `logged` mode restarted globally instead (this
    /// failure could not be a logged recovery, or a logged one could not
    /// go on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
    /// For a node declared dead because it fell silent: how long nothing
    /// had come from it (milliseconds), the detection's latency from its
    /// last sign of life.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub silent_ms: Option<f64>,
    /// The silence that node was allowed at that time (milliseconds): the
    /// heartbeat timeout, or more when its heartbeats had been arriving
    /// slowly (a loaded machine).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold_ms: Option<f64>,
    /// When the root heard the first of the ranks the release waits for
    /// say it was ready in the new epoch (0: not known); survivors that
    /// roll back keep their endpoints and do not tell the root.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub first_ready_ns: u64,
    /// When it heard the last rank the release waited for (the release
    /// follows at once): the last of the ranks that start again, or of
    /// any rank at the job's start; survivors that roll back slower say
    /// they are ready after the release.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub last_ready_ns: u64,
    /// The root's CPU time from the detection of the oldest failure still
    /// open to the release (milliseconds).
    #[serde(default)]
    pub root_cpu_ms: f64,
    /// Messages the root read from the daemons over that time.
    #[serde(default)]
    pub root_messages: u64,
}

impl RuntimeRecoveryRecord {
    /// Closes the record at the barrier release `at_ns`.
    pub fn close(&mut self, at_ns: u64) {
        self.barrier_ns = at_ns;
        self.runtime_recovery_ms = at_ns.saturating_sub(self.detected_ns) as f64 / 1e6;
    }
}

impl Record {
    /// Reads one line: a record, or `None` for a line of another kind or
    /// an unreadable one. A line without `event` but with
    /// `runtime_recovery_ms` is a runtime recovery (as older runtimes
    /// wrote them).
    pub fn parse(line: &str) -> Option<Self> {
        if let Ok(r) = serde_json::from_str(line) {
            return Some(r);
        }
        #[derive(Deserialize)]
        struct Untagged {
            event: Option<serde::de::IgnoredAny>,
        }
        match serde_json::from_str::<Untagged>(line) {
            Ok(Untagged { event: None }) => {
                serde_json::from_str(line).ok().map(Record::RuntimeRecovery)
            }
            _ => None,
        }
    }

    /// The record as one line, newline included.
    pub fn to_line(&self) -> Vec<u8> {
        let mut line = serde_json::to_vec(self).unwrap_or_default();
        line.push(b'\n');
        line
    }

    /// Appends the record to the metrics file at `path` (see
    /// [`crate::safefs::append_json_line`]); a failure is worth a warning,
    /// never the job.
    pub(crate) fn append(&self, path: &Path) {
        if let Err(e) = crate::safefs::append_json_line(path, self) {
            tracing::warn!(file = %path.display(), error = %e, "cannot write metrics");
        }
    }
}

#[cfg(test)]
mod tests;
