//! # frame
//!
//! frame keeps long-running parallel programs (bulk-synchronous: stencils,
//! solvers, molecular dynamics) alive through process and node failures.
//!
//! A program protects the memory regions that make up its state, calls
//! [`Checkpointer::snapshot`] in its main loop, and after a crash gets the same
//! state back, bit for bit, from the newest checkpoint every rank can restore.
//!
//! Modules, one concept each:
//! - [`env`](mod@env): every environment variable frame reads or sets.
//! - [`node`]: a rank's node (id, local directory, manager), decided once.
//! - [`config`]: TOML configuration with environment overrides.
//! - [`region`]: protected memory regions.
//! - [`format`](mod@format): the checkpoint file format and metadata records.
//! - [`level`]: where checkpoint copies live and how they commit (L1 to L4).
//! - `recovery` (crate-private): the pure planner that picks the checkpoint to restore.
//! - [`topology`]: partners and erasure groups, from where the ranks are.
//! - [`manager`]: the background promoter of each node (levels 2 to 4).
//! - [`metrics`]: every record of the metrics file.
//! - [`comm`]: the communication trait, typed helpers, the in-process
//!   communicator and the socket communicator of rank processes.
//! - `checkpoint` (crate-private): the [`Checkpointer`] API tying them together.
//! - [`auth`]: the per-job secret and the handshake every connection passes.
//! - [`safefs`]: checked directory handles, no-follow opens, locks, and the
//!   crash points of the kill-at-every-call tests.

#![warn(missing_docs)]

pub mod auth;
pub(crate) mod checkpoint;
pub mod comm;
pub mod config;
pub mod env;
mod error;
pub mod format;
pub mod level;
pub mod manager;
pub mod metrics;
pub mod node;
pub(crate) mod recovery;
pub mod region;
pub mod safefs;
#[cfg(test)]
mod testing;
pub mod topology;

pub use checkpoint::tuning::opt_par;
pub use checkpoint::{Checkpointer, Stats};
pub use config::Config;
pub use error::{Error, RankProblem, Result};
pub use region::{Byte, ElemType, Protected, Region, RegionId, RegionInfo};
