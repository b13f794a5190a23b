//! The library's top-level error type.

use crate::comm::{CommError, Rank};
use crate::config::ConfigError;
use crate::level::StorageError;
use crate::region::RegionId;
use std::fmt;

/// A problem one rank reported during a collective step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RankProblem {
    /// The rank.
    pub rank: Rank,
    /// What went wrong there.
    pub reason: String,
}

impl fmt::Display for RankProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rank {}: {}", self.rank, self.reason)
    }
}

/// Formats a list of problems, one per line after a summary.
fn list(problems: &[RankProblem]) -> String {
    let ranks: Vec<String> = problems.iter().map(|p| p.rank.to_string()).collect();
    let mut s = format!("rank(s) {}", ranks.join(", "));
    for p in problems {
        s.push_str(&format!("\n  {p}"));
    }
    s
}

/// Converts the output of [`agree_on_problems`](crate::comm::agree_on_problems).
pub(crate) fn problems(list: Vec<(Rank, String)>) -> Vec<RankProblem> {
    list.into_iter()
        .map(|(rank, reason)| RankProblem { rank, reason })
        .collect()
}

/// Errors returned by frame's checkpointing API.
///
/// Errors of collective calls are the same on every rank: each lists the
/// ranks where something went wrong and why.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Communication failed (a peer died, or the runtime started a recovery).
    #[error(transparent)]
    Comm(#[from] CommError),
    /// A storage operation of this rank failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// Some ranks could not set up their checkpoint storage.
    #[error("checkpoint storage unavailable on {}", list(.problems))]
    Init {
        /// Where and why.
        problems: Vec<RankProblem>,
    },
    /// No checkpoint can be restored by every rank, and the job had
    /// saved some (or some are damaged): starting over would lose them.
    /// Nothing was deleted.
    #[error("not recoverable: {}\n{note}.\nNothing was deleted. To start from the beginning, remove the job's checkpoints with `frame clean` in the directories named above, or use another job id.", list(.problems))]
    NotRecoverable {
        /// The ranks that cannot restore, and why.
        problems: Vec<RankProblem>,
        /// The levels tried and what would have survived the loss.
        note: String,
    },
    /// The protected regions do not match the checkpoint being restored.
    #[error("protected regions do not match checkpoint {id} on {}", list(.problems))]
    RegionMismatch {
        /// The checkpoint being restored.
        id: u64,
        /// Where and why.
        problems: Vec<RankProblem>,
    },
    /// A checkpoint could not be written everywhere; the previous one stays.
    #[error("checkpoint {id} failed (the previous checkpoint is kept) on {}", list(.problems))]
    SnapshotFailed {
        /// The checkpoint that was abandoned.
        id: u64,
        /// Where and why.
        problems: Vec<RankProblem>,
    },
    /// A local region operation failed (for example, the id is not protected).
    #[error("region {id}: {reason}")]
    Region {
        /// Region id.
        id: RegionId,
        /// What is wrong.
        reason: String,
    },
    /// A file of a file checkpoint cannot be used as asked (a bad name, a
    /// name asked outside a checkpoint, a file the restored checkpoint
    /// does not hold, a file that cannot be read or written).
    #[error("file {name:?}: {reason}")]
    File {
        /// The name the program gave.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// The job's checkpoints could not all be removed at the end of the run.
    #[error("finalize could not remove the job's checkpoints on {}", list(.problems))]
    Finalize {
        /// Where and why.
        problems: Vec<RankProblem>,
    },
    /// A checkpoint level cannot be used as asked.
    #[error("level {level}: {reason}")]
    Level {
        /// The level.
        level: crate::level::Level,
        /// Why.
        reason: String,
    },
    /// This rank's file of a checkpoint could not be read back while it
    /// restored alone (no other checkpoint is tried: that takes every rank,
    /// see `recover`).
    #[error("checkpoint {id} could not be loaded here: {reason}")]
    Unreadable {
        /// The checkpoint.
        id: u64,
        /// What went wrong.
        reason: String,
    },
    /// `recover` was called but there is nothing to recover.
    #[error("there is no checkpoint to recover (this run started fresh)")]
    NothingToRecover,
}

impl Error {
    /// Whether this is the outcome of a collective step that every rank
    /// taking part got alike (the ranks agreed on it before returning):
    /// a program or library that prints errors can let one rank speak
    /// for all.
    pub fn is_collective(&self) -> bool {
        matches!(
            self,
            Error::Init { .. }
                | Error::NotRecoverable { .. }
                | Error::RegionMismatch { .. }
                | Error::SnapshotFailed { .. }
                | Error::Finalize { .. }
                | Error::NothingToRecover
        )
    }
}

/// Result alias for frame's API.
pub type Result<T, E = Error> = std::result::Result<T, E>;
