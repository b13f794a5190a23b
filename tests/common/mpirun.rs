//! Running MPI jobs from tests: `mpiexec` in a process group of its own,
//! with a hard deadline, and a check that no process of the job survives.

use super::{assert_no_survivors, Output};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::Duration;
use wait_timeout::ChildExt;

/// Deadline for one MPI job.
pub const JOB_DEADLINE: Duration = Duration::from_secs(180);

/// The outcome of one `mpiexec`.
pub struct MpiJob {
    pub status: ExitStatus,
    /// Standard output and standard error, one after the other.
    pub out: String,
}

/// Runs `mpiexec -n RANKS PROGRAM ARGS` with `marker` (a path unique to the
/// test) in every process's environment. The whole process group is killed
/// at the deadline, and the test fails if any process of the job outlives
/// the launcher.
pub fn mpiexec(
    marker: &Path,
    ranks: usize,
    program: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> MpiJob {
    mpiexec_within(JOB_DEADLINE, marker, ranks, program, args, env)
}

/// [`mpiexec`] with another deadline (for jobs that move a lot of data).
pub fn mpiexec_within(
    deadline: Duration,
    marker: &Path,
    ranks: usize,
    program: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> MpiJob {
    let mut cmd = Command::new("mpiexec");
    cmd.arg("-n").arg(ranks.to_string());
    launch(cmd, deadline, marker, program, args, env)
}

/// Runs `mpirun --with-ft ulfm -n PROCS PROGRAM ARGS` (Open MPI 5 with
/// User-Level Failure Mitigation, the `mpirun` first on the `PATH`), as
/// [`mpiexec`] runs MPICH's.
#[allow(dead_code)]
pub fn mpirun_ulfm(
    marker: &Path,
    procs: usize,
    program: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> MpiJob {
    mpirun_ulfm_within(JOB_DEADLINE, marker, procs, program, args, env)
}

/// [`mpirun_ulfm`] with the job's working directory `dir` (its marker
/// too).
pub fn mpirun_ulfm_in(
    dir: &Path,
    procs: usize,
    program: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> MpiJob {
    ulfm_job(JOB_DEADLINE, dir, Some(dir), procs, program, args, env)
}

/// [`mpirun_ulfm`] with another deadline.
pub fn mpirun_ulfm_within(
    deadline: Duration,
    marker: &Path,
    procs: usize,
    program: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> MpiJob {
    ulfm_job(deadline, marker, None, procs, program, args, env)
}

/// `mpirun --with-ft ulfm` of `program` on `procs` processes, in `cwd`
/// when given.
fn ulfm_job(
    deadline: Duration,
    marker: &Path,
    cwd: Option<&Path>,
    procs: usize,
    program: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> MpiJob {
    let mut cmd = Command::new("mpirun");
    if let Some(dir) = cwd {
        cmd.current_dir(dir);
    }
    cmd.args(["--with-ft", "ulfm", "--oversubscribe", "-n"])
        .arg(procs.to_string());
    if rustix::process::geteuid().is_root() {
        cmd.arg("--allow-run-as-root");
    }
    // Open MPI's session directory (its rendezvous files are named by
    // mpirun's process id) in a folder of the job's own: a stale one left
    // in /tmp by a killed mpirun whose id came round again made the next
    // mpirun fail ("The PMIx server's listener thread failed to start").
    let session = tempfile::Builder::new()
        .prefix("frame-mpirun-")
        .tempdir()
        .expect("a session directory for mpirun");
    cmd.env("TMPDIR", session.path());
    launch(cmd, deadline, marker, program, args, env)
}

/// Runs the launcher `cmd` on `program` (see [`mpiexec`]).
fn launch(
    mut cmd: Command,
    deadline: Duration,
    marker: &Path,
    program: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> MpiJob {
    cmd.arg(program).args(args).envs(env.iter().copied());
    in_group(cmd, deadline, marker)
}

/// Runs `cmd` (a launcher, or a script that starts MPI jobs) in a process
/// group of its own with `marker` in its environment, SIGKILLs the group
/// if it outlives `deadline` (failing the test), and checks that no
/// process of it is left.
pub fn in_group(mut cmd: Command, deadline: Duration, marker: &Path) -> MpiJob {
    cmd.env("FRAME_TEST_MARKER", marker)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = cmd
        .spawn()
        .expect("start the MPI launcher (is MPI installed?)");
    let group = child.id() as i32;
    let output = Output::collect(&mut child);
    let waited = super::Patience::of(child.id(), deadline)
        .wait(|slice| child.wait_timeout(slice).expect("wait for mpiexec"));
    let status = match waited {
        Ok(s) => s,
        Err(why) => {
            // The group's leader is not reaped yet, so its id is still ours.
            if let Some(pid) = rustix::process::Pid::from_raw(group) {
                let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
            }
            let _ = child.wait();
            let (out, err) = output.join_within(Duration::from_secs(10));
            panic!("the MPI job did not finish: {why}:\n{out}{err}");
        }
    };
    assert_no_survivors(marker, Duration::from_secs(30));
    MpiJob {
        status,
        out: {
            let (out, err) = output.join();
            out + &err
        },
    }
}

/// The installation prefix of the `mpirun` first on the `PATH` (Open MPI
/// 5 with ULFM for the ULFM tests: see .ci/run).
pub fn mpi_prefix() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mpirun = std::env::split_paths(&path)
        .map(|d| d.join("mpirun"))
        .find(|p| p.is_file())
        .expect("mpirun on the PATH (Open MPI 5 with ULFM: see .ci/run)");
    let real = std::fs::canonicalize(&mpirun).unwrap_or(mpirun);
    real.parent()
        .and_then(Path::parent)
        .expect("mpirun's installation")
        .to_path_buf()
}

/// Path of an example built with the `mpi` feature, up to date.
pub fn mpi_example(name: &str) -> PathBuf {
    super::example_with(name, &["mpi"])
}

/// Builds the interface library of cargo package `package` (with its
/// `mpi` feature, in this test's profile) once per name, and returns the
/// directory holding `file` (its shared library).
pub fn mpi_library(package: &'static str, file: &'static str) -> PathBuf {
    mpi_library_with(package, file, "mpi")
}

/// [`mpi_library`] with the cargo features `features` (`ulfm`: against
/// Open MPI 5, for programs under `frame_run_ulfm`), once per package and
/// features.
pub fn mpi_library_with(
    package: &'static str,
    file: &'static str,
    features: &'static str,
) -> PathBuf {
    type Built = Vec<((&'static str, &'static str), PathBuf)>;
    static BUILT: std::sync::Mutex<Built> = std::sync::Mutex::new(Vec::new());
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, dir)) = built.iter().find(|(p, _)| *p == (package, features)) {
        return dir.clone();
    }
    let profile_dir = super::profile_dir();
    let mut cmd = Command::new(env!("CARGO"));
    cmd.args(["build", "-p", package, "--features", features])
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    if profile_dir.ends_with("release") {
        cmd.arg("--release");
    }
    let (status, _, err) = super::run(&mut cmd, super::CHILD_DEADLINE);
    assert!(status.success(), "building {package} failed:\n{err}");
    assert!(profile_dir.join(file).exists(), "{package} built no {file}");
    built.push(((package, features), profile_dir.clone()));
    profile_dir
}

/// [`mpi_library_with`], its `file` copied once per package and features
/// as `name` into a directory of its own, which it returns: a later build
/// with other features replaces the built file, never the copy.
pub fn mpi_library_copy(
    package: &'static str,
    file: &'static str,
    features: &'static str,
    name: &str,
) -> PathBuf {
    type Copied = Vec<((&'static str, &'static str), PathBuf)>;
    static COPIED: std::sync::Mutex<Copied> = std::sync::Mutex::new(Vec::new());
    let mut copied = COPIED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, dir)) = copied.iter().find(|(k, _)| *k == (package, features)) {
        return dir.clone();
    }
    let built = mpi_library_with(package, file, features);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("lib-{package}-{features}"));
    std::fs::create_dir_all(&dir).expect("library directory");
    let part = dir.join(format!("{name}.part"));
    std::fs::copy(built.join(file), &part).expect("copy the library");
    std::fs::rename(&part, dir.join(name)).expect("name the library");
    copied.push(((package, features), dir.clone()));
    dir
}

/// Compiles the C program `source` (relative to the repository) with
/// `mpicc` against the header directories `include` (relative too) and
/// `-l<lib>` in `lib_dir`, into `name` in cargo's directory for test
/// files below `dir` (built once per test binary).
pub fn mpicc(
    source: &str,
    name: &str,
    dir: &str,
    include: &[&str],
    lib_dir: &Path,
    lib: &str,
) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(dir);
    std::fs::create_dir_all(&dir).expect("programs directory");
    let out = dir.join(name);
    let mut cmd = Command::new("mpicc");
    cmd.args(super::C_FLAGS);
    for dir in include {
        cmd.arg("-I").arg(root.join(dir));
    }
    cmd.arg(root.join(source))
        .arg("-L")
        .arg(lib_dir)
        .arg(format!("-Wl,-rpath,{}", lib_dir.display()))
        .arg(format!("-l{lib}"))
        .arg("-o")
        .arg(&out);
    let (status, stdout, err) = super::run(&mut cmd, super::CHILD_DEADLINE);
    assert!(status.success(), "mpicc {source} failed:\n{stdout}{err}");
    out
}
