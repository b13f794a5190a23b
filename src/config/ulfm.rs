//! `[ulfm]`: how a job that repairs itself inside MPI is laid out and
//! which failures its communicator reports (read by
//! `frame_runtime::ulfm`, the `ulfm` feature; not used otherwise).

use serde::{Deserialize, Serialize};

/// `[ulfm]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct UlfmConfig {
    /// Processes held back at launch to replace failed ranks: the last
    /// `spares` of the job, or of every node (see `spare_layout`).
    pub spares: u32,
    /// Where the spares are.
    pub spare_layout: SpareLayout,
    /// Whether a failed rank that finds no spare left gets a new process
    /// (`MPI_Comm_spawn`) instead of ending the job.
    pub spawn: bool,
    /// Which failures the program's communicator reports.
    pub error_scope: ErrorScope,
    /// Whether the program's communicator's collectives end in an
    /// agreement, so that each fails at every rank or at none.
    pub uniform_errors: bool,
    /// Repairs the job makes before it ends with an error instead (a
    /// process that dies again at every start would otherwise be replaced
    /// forever); 1 to 1000000.
    pub max_failures: u32,
}

/// The most repairs `ulfm.max_failures` may allow.
pub(super) const MAX_FAILURES: u32 = 1_000_000;

impl Default for UlfmConfig {
    fn default() -> Self {
        Self {
            spares: 0,
            spare_layout: SpareLayout::default(),
            spawn: false,
            error_scope: ErrorScope::default(),
            uniform_errors: false,
            max_failures: 32,
        }
    }
}

/// Where a job's spare processes are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SpareLayout {
    /// The last processes of the job (a node of spares, say).
    #[default]
    Last,
    /// The last processes of every node: a rank that dies while its node
    /// lives is replaced on that node, where its level-1 files are.
    PerNode,
}

impl std::str::FromStr for SpareLayout {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "last" => Ok(SpareLayout::Last),
            "per-node" => Ok(SpareLayout::PerNode),
            other => Err(format!("unknown spare layout {other:?} (last or per-node)")),
        }
    }
}

/// Which failures make an operation on a communicator fail: the error
/// scopes of the paper "Implicit actions and non-blocking failure
/// recovery with MPI" (`frame::comm::mpi` implements them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ErrorScope {
    /// Only a failure of a process the operation involves (ULFM's default).
    #[default]
    Operation,
    /// A failure of any process of the communicator.
    Communicator,
    /// A failure of any process of the job.
    Universe,
}

impl std::str::FromStr for ErrorScope {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "operation" => Ok(ErrorScope::Operation),
            "communicator" => Ok(ErrorScope::Communicator),
            "universe" => Ok(ErrorScope::Universe),
            other => Err(format!(
                "unknown error scope {other:?} (operation, communicator or universe)"
            )),
        }
    }
}

impl std::fmt::Display for ErrorScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ErrorScope::Operation => "operation",
            ErrorScope::Communicator => "communicator",
            ErrorScope::Universe => "universe",
        })
    }
}
