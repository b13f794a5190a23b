//! frame inside MPI programs (feature `mpi`): the MPI transport, the
//! FTI-compatible libfti from C and Fortran, the SCR- and VeloC-compatible
//! libscr and libveloc, Python under mpirun, CMake builds against the
//! installed libraries.
//!
//! One test binary; each module below tests one concern.

#[path = "../common/mod.rs"]
mod common;

mod cmake;
mod fti;
mod fti_fortran;
mod fti_semantics;
mod mpi;
mod python_mpi;
mod scr;
mod veloc;
