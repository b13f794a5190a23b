//! The Python package for the tests: built into the virtual environment
//! `target/python` by `ffi/python/install` (the command the docs give
//! users), once per test process, in the test's profile.

use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

/// Making the environment the first time installs maturin and numpy from
/// PyPI and builds frame in the test's profile.
const SETUP_DEADLINE: Duration = Duration::from_secs(1200);

/// The repository's top directory.
pub fn top() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The Python interpreter of the environment that holds the current build
/// of the package `frame` and numpy.
pub fn python() -> PathBuf {
    static BUILT: Mutex<bool> = Mutex::new(false);
    installed(&BUILT, "python", &[])
}

/// The same with the package built with MPI, and mpi4py
/// (`target/python-mpi`).
pub fn python_mpi() -> PathBuf {
    static BUILT: Mutex<bool> = Mutex::new(false);
    installed(&BUILT, "python-mpi", &["--mpi"])
}

fn installed(once: &Mutex<bool>, name: &str, flags: &[&str]) -> PathBuf {
    let mut built = once.lock().unwrap_or_else(|e| e.into_inner());
    let venv = super::profile_dir()
        .parent()
        .expect("target/<profile>")
        .join(name);
    if !*built {
        let mut cmd = Command::new(top().join("ffi/python/install"));
        if super::profile_dir().ends_with("release") {
            cmd.arg("--release");
        }
        cmd.args(flags).arg(&venv);
        let (status, out, err) = super::run(&mut cmd, SETUP_DEADLINE);
        assert!(status.success(), "ffi/python/install failed:\n{out}\n{err}");
        *built = true;
    }
    venv.join("bin/python")
}

/// The numpy heat program (`examples/python/heat.py`) and the plate both
/// Python tests run it on: 96 x 64 cells, 200 steps.
pub fn heat_program() -> Vec<String> {
    let example = top().join("examples/python/heat.py");
    let mut args = vec![example.display().to_string()];
    args.extend(["--nx", "96", "--ny", "64", "--steps", "200"].map(String::from));
    args
}
