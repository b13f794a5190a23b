//! libfti: frame behind FTI's C API.
//!
//! An MPI program written for FTI 1.6 compiles against `fti.h` (in
//! `include/`) and links with `-lfti` unchanged: its configuration file is
//! read as FTI's INI (see `frame::config::fti`), its protected variables are
//! checkpointed by frame, promoted to partner copies, Reed-Solomon groups and
//! the global directory by frame's managers, and found again after the job
//! is killed and run again, from the lowest level that still holds them.
//!
//! Modules, one job each:
//! - `status`: FTI's return codes and the guard that turns errors and
//!   panics into them, with a message on standard error;
//! - `say`: the lines libfti prints (`[ frame-FTI  Warning ] : ...`), and
//!   the verbosity that silences them;
//! - `args`: checks of the ids, levels and names programs pass;
//! - `types`: the type handles and `FTI_InitType`;
//! - `composite`: composite types and their fields;
//! - `subsets`: global data sets and the variables' subsets of them;
//! - `datasets`: the calls that define and query them;
//! - `single_file`: a checkpoint's global data sets in one file, and the
//!   restart from it on another number of ranks;
//! - `hdf5_layout`: what programs describe for FTI's HDF5 output (groups,
//!   names, shapes), kept and checked;
//! - `session`: the per-process state between `FTI_Init` and `FTI_Finalize`;
//! - `init`: `FTI_Init` and `FTI_Finalize`, nodes and dedicated ranks
//!   (`frame::dedicated`);
//! - `calls`: protecting, checkpointing and recovering;
//! - `icp`: checkpoints written variable by variable;
//! - `names`: variable ids by name;
//! - `stage`: the stage directory and the requests not yet read;
//! - `staging`: files moved to the global file system;
//! - `restart`: FTI's restart keys, read and written back into the
//!   configuration file;
//! - `get_config`: `FTI_GetConfig`, the session's settings and state.
//!
//! Built only with the `mpi` feature: `cargo build -p frame-fti --features mpi`.
#![cfg(feature = "mpi")]

mod args;
mod calls;
mod composite;
mod datasets;
mod failure;
mod get_config;
mod hdf5_layout;
mod icp;
mod init;
mod names;
mod restart;
mod say;
mod session;
mod single_file;
mod stage;
mod staging;
mod status;
mod subsets;
mod types;

pub use status::{FTI_DONE, FTI_NREC, FTI_NSCS, FTI_SCES};
