//! # frame
//!
//! frame keeps long-running parallel programs (bulk-synchronous: stencils,
//! solvers, molecular dynamics) alive through process and node failures.
//!
//! A program protects the memory regions that make up its state, calls
//! [`Checkpointer::snapshot`] in its main loop, and after a crash gets the same
//! state back, bit for bit, from the newest checkpoint every rank can restore.
//!
//! What programs use: the [`Checkpointer`] (opened with
//! [`Checkpointer::open`], which gives it fresh or as a [`Recovery`] to
//! complete), its [`Config`], protected
//! regions ([`Region`], [`Protected`]), [`Level`], [`Error`], and the
//! modules [`comm`] (the communicator trait, the in-process, socket and MPI
//! communicators), [`config`], [`env`](mod@env) (the variables frame reads
//! or sets), [`metrics`] (every record of a metrics file), [`region`] and
//! `dedicated` (manager ranks in MPI jobs, feature `mpi`). The runtime is the crate
//! `frame-runtime`.
//!
//! Inside, one concept per module (crate-private; `internals`, hidden
//! from these docs, opens what frame's own crates use):
//! - `node`: a rank's node (id, local directory, manager), decided once.
//! - `format`: the checkpoint file format and metadata records.
//! - `level`: where checkpoint copies live and how they commit (L1 to L4).
//! - `catalog`: what `frame inspect`, `verify`, `drop` and `clean` read of
//!   a job's storage.
//! - `recovery`: the pure planner that picks the checkpoint to restore.
//! - `topology`: where the ranks are, and the layout recorded with a commit.
//! - `scheme`: the redundancy schemes of levels 2 to 4, one directory each.
//! - `manager`: the background promoter of each node (levels 2 to 4).
//! - `checkpoint`: the [`Checkpointer`] API tying them together.
//! - `auth`: the per-job secret and the handshake every connection passes.
//! - `safefs`: checked directory handles, no-follow opens, locks, and the
//!   crash points of the kill-at-every-call tests.

#![warn(missing_docs)]
#![warn(unreachable_pub)]

mod auth;
mod catalog;
pub(crate) mod checkpoint;
pub mod comm;
pub mod config;
pub mod env;
mod error;
mod format;
#[doc(hidden)]
pub mod internals;
mod level;
mod manager;
pub mod metrics;
mod node;
pub(crate) mod recovery;
pub mod region;
mod safefs;
mod scheme;
#[cfg(test)]
mod testing;
mod topology;

pub use checkpoint::cone::{ConeOffer, ConePart, ConeRecovery, ConeRole};
pub use checkpoint::tuning::opt_par;
pub use checkpoint::{Checkpointer, Opened, Recovery, Stats};
pub use config::Config;
pub use error::{Error, RankProblem, Result};
pub use level::Level;
#[cfg(feature = "mpi")]
pub use manager::dedicated;
pub use manager::Link as ManagerLink;
pub use region::{Byte, ElemType, Protected, Region, RegionId, RegionInfo};
