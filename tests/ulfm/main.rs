//! Jobs that repair themselves inside MPI (feature `ulfm`, Open MPI 5 with
//! ULFM): error scopes, spares, shrinking, and the applications' runner.
//!
//! One test binary; each module below tests one concern.

#[path = "../common/mod.rs"]
mod common;

mod apps;
mod online;
mod ulfm;
