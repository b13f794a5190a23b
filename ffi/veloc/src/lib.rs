//! libveloc: frame behind VeloC's C API.
//!
//! An MPI program written for VeloC 1.8 compiles against `veloc.h` (in
//! `include/`) and links with `-lveloc-client` unchanged: its
//! configuration file is read as VeloC reads it (see
//! `frame::config::veloc`), each checkpoint (a name and a version) is one
//! of frame's checkpoints, promoted to XOR sets and the persistent
//! directory by frame's managers, and found again after the job is killed
//! and run again.
//!
//! Modules, one job each:
//! - `status`: VeloC's return codes and the guard of every C call;
//! - `session`: the state between `VELOC_Init` and `VELOC_Finalize`;
//! - `init`: starting and ending, and the program's regions;
//! - `checkpoint`: writing checkpoints;
//! - `restart`: reading them back, routing files, forgetting names;
//! - `index`: which of frame's checkpoints holds which version.
//!
//! Built only with the `mpi` feature: `cargo build -p frame-veloc --features mpi`.
#![cfg(feature = "mpi")]

mod checkpoint;
mod index;
mod init;
mod restart;
mod session;
mod status;

pub use status::{VELOC_FAILURE, VELOC_SUCCESS};
