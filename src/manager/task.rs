//! A promotion: what a node's ranks ask their manager to do with one
//! checkpoint, and how far it got.

use crate::comm::net::Endpoint;
use crate::level::{L4Write, Level};
use crate::topology::{Rule, Topology};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Promote checkpoint `id` of one node to `levels`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Task {
    /// Job id.
    pub job_id: String,
    /// Checkpoint id (committed at level 1 on every rank).
    pub id: u64,
    /// Its stamp.
    pub stamp: u64,
    /// Which promotion of the checkpoint this is, agreed by the ranks: a
    /// checkpoint promoted again after a recovery has a higher round, so
    /// level-3 holders start its sums over rather than taking the new
    /// terms for repeats of the old ones.
    pub round: u64,
    /// Levels to promote it to, ascending, each with the rule of the
    /// scheme that protects it there.
    pub levels: Vec<(Level, Rule)>,
    /// The node whose ranks' files are promoted.
    pub node: u32,
    /// Where every rank was when the checkpoint was written.
    pub topology: Topology,
    /// Every node's manager.
    pub peers: BTreeMap<u32, Endpoint>,
    /// The global directory (level 4).
    pub global_dir: PathBuf,
    /// How level 4 stores a rank's file.
    pub l4: L4Write,
    /// Each node's level-3 blob length (its ranks' records and files).
    pub blob_lens: BTreeMap<u32, u64>,
    /// A JSON-lines file for one line per level promoted, if any.
    pub metrics: Option<PathBuf>,
    /// The run and epoch the ranks were in (under a runtime): the
    /// level-4 write is refused once the job moved past them.
    #[serde(default)]
    pub fence: Option<crate::level::Fence>,
}

impl Task {
    /// Ranks in the job.
    pub fn world(&self) -> u32 {
        self.topology.placement().len() as u32
    }
}

/// Where one (checkpoint, level) promotion is on one node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Progress {
    /// The manager never heard of it (it was skipped, or the manager was
    /// restarted since).
    Unknown,
    /// Waiting in the queue or being done.
    Pending,
    /// Durable on this node and, for partner copies, on the partner.
    Done,
    /// Failed; the reason.
    Failed(String),
}

impl Progress {
    /// The code ranks reduce with a maximum: done 0, pending 1, failed 2.
    pub fn code(&self) -> u64 {
        match self {
            Progress::Done => 0,
            Progress::Pending => 1,
            Progress::Unknown | Progress::Failed(_) => 2,
        }
    }
}

/// Time and bytes of one transformation, for metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Transform {
    /// Microseconds the manager spent.
    pub micros: u64,
    /// Bytes read from level 1.
    pub bytes_in: u64,
    /// Bytes written (or sent) by the level.
    pub bytes_out: u64,
}
