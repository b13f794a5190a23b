//! FTI programs in tests: libfti built, C programs compiled against `fti.h`
//! with `mpicc`, and FTI configuration files.

use super::{profile_dir, run, CHILD_DEADLINE, C_FLAGS};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Builds libfti once and returns its directory.
pub fn libfti() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let profile_dir = profile_dir();
            let mut cmd = Command::new(env!("CARGO"));
            cmd.args(["build", "-p", "frame-fti", "--features", "mpi"])
                .current_dir(ROOT);
            if profile_dir.ends_with("release") {
                cmd.arg("--release");
            }
            let (status, _, err) = run(&mut cmd, CHILD_DEADLINE);
            assert!(status.success(), "building libfti failed:\n{err}");
            assert!(profile_dir.join("libfti.so").exists());
            profile_dir
        })
        .clone()
}

/// Compiles `source` (relative to the repository) with `mpicc` against
/// `fti.h` and libfti into `name` (in cargo's directory for test files,
/// not a temporary one: the programs are built once per test binary).
pub fn compile(source: &str, name: &str) -> PathBuf {
    let lib = libfti();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fti-programs");
    std::fs::create_dir_all(&dir).expect("programs directory");
    let out = dir.join(name);
    let mut cmd = Command::new("mpicc");
    cmd.args(C_FLAGS)
        .arg("-I")
        .arg(Path::new(ROOT).join("ffi/fti/include"))
        .arg(Path::new(ROOT).join(source))
        .arg("-L")
        .arg(&lib)
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .args(["-lfti", "-o"])
        .arg(&out);
    let (status, stdout, err) = run(&mut cmd, CHILD_DEADLINE);
    assert!(status.success(), "mpicc {source} failed:\n{stdout}{err}");
    out
}

/// Writes an FTI configuration into `dir` (every level on, each
/// synchronous, groups of 4), with storage there.
pub fn config(dir: &Path, head: u32, node_size: u32, local_test: u32) -> PathBuf {
    let path = dir.join("config.fti");
    let text = format!(
        "[Basic]\nHead = {head}\nNode_size = {node_size}\nCkpt_dir = {}\nGlbl_dir = {}\n\
         Meta_dir = {}\nCkpt_L1 = 1\nCkpt_L2 = 1\nCkpt_L3 = 1\nCkpt_L4 = 1\nInline_L2 = 1\n\
         Inline_L3 = 1\nInline_L4 = 1\nKeep_last_ckpt = 0\nGroup_size = 4\nVerbosity = 2\n\
         [Restart]\nFailure = 0\n[Advanced]\nLocal_test = {local_test}\n",
        dir.join("local").display(),
        dir.join("global").display(),
        dir.join("meta").display(),
    );
    std::fs::write(&path, text).expect("write config");
    path
}
