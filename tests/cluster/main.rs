//! Jobs across virtual hosts (network and mount namespaces): ssh, Slurm, cut
//! links and partitions. Mostly waiting: `scripts/test` runs it beside the
//! rest.
//!
//! One test binary; each module below tests one concern.

#[path = "../common/mod.rs"]
mod common;

mod hosts;
mod partitions;
