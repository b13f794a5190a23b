//! Jobs that recover under `frame run`: every level and scheme, localised
//! recovery across nodes, the fault matrix, a flooded listener, the heat2d
//! demo and the 1024-rank run (`scale`, ignored unless asked for).
//!
//! One test binary; each module below tests one concern.

#[path = "../common/mod.rs"]
mod common;

mod fault_matrix;
mod heat2d;
mod levels_runtime;
mod listener_flood;
mod localised_nodes;
mod scale;
