//! libscr: frame behind SCR's C API.
//!
//! An MPI program written for SCR 3.1 compiles against `scr.h` (in
//! `include/`) and links with `-lscr` unchanged: its parameters (the
//! environment, its parameter file, `SCR_Config`) are read as SCR reads
//! them (see `frame::config::scr`), each checkpoint dataset it writes is
//! one of frame's checkpoints of files, promoted to partner copies,
//! XOR or Reed-Solomon sets and the prefix directory by frame's managers,
//! and found again after the job is killed and run again, from the lowest
//! level that still holds it. docs/SCR_CONFORMANCE.md says, call by call
//! and key by key, where it matches SCR and where it differs.
//!
//! Modules, one job each:
//! - `status`: SCR's return codes, and the guard that turns errors and
//!   panics into them with a message on standard error;
//! - `say`: the lines libscr prints;
//! - `session`: the state between `SCR_Init` and `SCR_Finalize`;
//! - `init`: `SCR_Init`, `SCR_Finalize`, `SCR_Config`, and the choice of
//!   the checkpoint to restart from;
//! - `output`: writing datasets, and whether to checkpoint or exit;
//! - `restart`: reading a checkpoint back, naming and forgetting them,
//!   and routing files;
//! - `paths`: file names made relative to the prefix;
//! - `table`: the files of one rank's checkpoint;
//! - `index`: the job's checkpoints by name;
//! - `fortran`: the calls of `scrf.h`, for Fortran programs.
//!
//! Built only with the `mpi` feature: `cargo build -p frame-scr --features mpi`.
#![cfg(feature = "mpi")]

mod fortran;
mod index;
mod init;
mod output;
mod paths;
mod restart;
mod say;
mod session;
mod status;
mod table;

pub use status::{SCR_FAILURE, SCR_SUCCESS};
