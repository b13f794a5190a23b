//! The programs from outside Rust the tests start, and the check that
//! says how to install them.

use std::process::{Command, Stdio};

/// Every program from outside Rust the tests start (looked up on the
/// PATH, or the path given). `scripts/test` installs the packages that
/// hold them; `tests/house/setup.rs` checks that its list covers every one.
pub const TOOLS: &[&str] = &[
    "cc",
    "make",
    "pkg-config",
    "mpicc",
    "mpiexec",
    "gfortran",
    "cmake",
    "strace",
    "/usr/bin/time",
    "ip",
    "bridge",
    "unshare",
    "setpriv",
    "/usr/sbin/sshd",
    "ssh",
    "ssh-keygen",
];

/// Fails the test when `tool` (one of [`TOOLS`]) is missing, saying how to
/// install what the tests need.
pub fn need_tool(tool: &str) {
    assert!(TOOLS.contains(&tool), "{tool} is not in common::TOOLS");
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        found,
        "{tool} is missing: `scripts/test --setup` installs what the tests need (`scripts/test --list` names the packages)"
    );
}
