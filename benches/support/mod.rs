//! What the process-level benchmarks share.

use std::path::PathBuf;
use std::process::Command;

/// Builds the heat2d example in release mode and returns its path.
pub fn heat2d() -> PathBuf {
    let status = Command::new(env!("CARGO"))
        .args(["build", "--release", "--example", "heat2d"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .expect("cargo build");
    assert!(status.success(), "building heat2d failed");
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/release/examples/heat2d")
}
