//! What users touch: the C interface and C programs' files, Python, the
//! command-line tool, and bad or absurd input to any of them.
//!
//! One test binary; each module below tests one concern.

#[path = "../common/mod.rs"]
mod common;

mod bad_input;
mod bounded_input;
mod c_interface;
mod cli;
mod files_c;
mod python;
