//! libframe: frame's C interface.
//!
//! The calls follow the shape C users of checkpoint libraries know: init,
//! protect, snapshot or checkpoint, recover, status, finalize; plus
//! `frame_run`, which re-enters the program's resilient function after
//! every failure, and the few communicator calls a stencil needs.
//!
//! Every call returns an `int` status (or a documented value) and never
//! lets a Rust panic cross into C; `frame_last_error` gives the message of
//! the last failed call on the calling thread. State is per thread: the
//! thread that called `frame_init` owns the checkpointer, and a context
//! handle is only valid on its thread while its resilient function runs.
//!
//! Modules: `status` (codes, last error, the panic guard), `state` (the
//! per-thread checkpointer and context), `ckpt` (checkpointing calls),
//! `files` (checkpoints of files the program writes),
//! `run` (`frame_run`), `comm` (communicator calls), `mpi` (a program's own
//! MPI calls under `frame_run_ulfm`).

#![allow(clippy::missing_safety_doc)]

mod ckpt;
mod comm;
mod files;
mod mpi;
mod run;
mod state;
mod status;

pub use ckpt::*;
pub use comm::*;
pub use files::*;
pub use mpi::*;
pub use run::*;
pub use status::*;
