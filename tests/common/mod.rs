//! Helpers shared by the integration tests: temporary storage, rank threads
//! and child processes, all with hard deadlines.
#![allow(dead_code)]

pub mod fti;
pub mod heat2d;
pub mod hosts_job;
pub mod kill_sweep;
pub mod mpirun;
pub mod patience;
pub mod python;
pub mod scr;
pub mod storage;
pub mod tools;
pub mod veloc;
pub mod vhost;

#[allow(unused_imports)]
pub use tools::{need_tool, TOOLS};

pub use patience::Patience;

use frame::comm::LocalComm;
use frame::config::{Config, Interval};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};
use wait_timeout::ChildExt;

/// The warnings C test programs are compiled with: any is an error.
pub const C_FLAGS: [&str; 6] = [
    "-std=c11",
    "-O2",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-pedantic",
];

/// Patience with one group of rank threads (see [`Patience`]: the
/// deadlines of tests are never wall-clock ones).
pub const RANKS_DEADLINE: Duration = Duration::from_secs(120);
/// Patience with one child process (see [`Patience`]).
pub const CHILD_DEADLINE: Duration = Duration::from_secs(300);

static SERIAL: Mutex<()> = Mutex::new(());

/// Serialises tests that start processes or move a lot of data, so they do
/// not oversubscribe the machine's cores.
pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A temporary directory on tmpfs when the machine has one (removed on drop).
pub fn scratch() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(d) = tempfile::Builder::new()
            .prefix("frame-test-")
            .tempdir_in(shm)
        {
            return d;
        }
    }
    tempfile::Builder::new()
        .prefix("frame-test-")
        .tempdir()
        .expect("temp dir")
}

/// A configuration writing into `dir` for job `job`, checkpointing at every
/// `snapshot()` call.
pub fn config(dir: &Path, job: &str) -> Config {
    let mut cfg = Config::default();
    cfg.storage.local_dir = dir.to_path_buf();
    cfg.job.id = job.into();
    cfg.snapshot.interval = Interval::Calls(1);
    cfg.snapshot.chunk_size = bytesize::ByteSize::kib(64);
    cfg
}

/// Shows frame's warnings (or what `RUST_LOG` asks for) in a failing
/// test's output: a recovery that falls back says why.
pub fn show_warnings() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_test_writer()
        .try_init();
}

/// Runs `f` on `size` rank threads (`per_node` ranks per virtual node) and
/// returns their results in rank order. Fails the test if any rank panics or
/// the ranks run out of the [`Patience`] of [`RANKS_DEADLINE`].
pub fn ranks<T, F>(size: usize, per_node: usize, f: F) -> Vec<T>
where
    T: Send + 'static,
    F: Fn(LocalComm) -> T + Send + Sync + 'static,
{
    show_warnings();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(LocalComm::run(size, per_node, f));
    });
    let results = Patience::new(RANKS_DEADLINE)
        .wait(|slice| rx.recv_timeout(slice).ok())
        .unwrap_or_else(|why| panic!("the ranks did not finish: {why}"));
    results
        .into_iter()
        .enumerate()
        .map(|(rank, r)| match r {
            Ok(v) => v,
            Err(p) => {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                panic!("rank {rank} panicked: {msg}")
            }
        })
        .collect()
}

/// A child process that is killed and reaped when dropped.
pub struct ChildGuard {
    pub child: Child,
}

impl ChildGuard {
    pub fn spawn(cmd: &mut Command) -> Self {
        Self {
            child: cmd.spawn().expect("spawn child"),
        }
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Waits for the child to exit, failing the test when the
    /// [`Patience`] of `deadline` runs out.
    pub fn wait(&mut self, deadline: Duration) -> ExitStatus {
        let child = &mut self.child;
        let waited = Patience::of(child.id(), deadline)
            .wait(|slice| child.wait_timeout(slice).expect("wait"));
        match waited {
            Ok(status) => status,
            Err(why) => {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("child {} did not exit: {why}", self.child.id());
            }
        }
    }

    /// Forwards the child's stdout, line by line, to the returned channel.
    pub fn stdout_lines(&mut self) -> mpsc::Receiver<String> {
        let out = self.child.stdout.take().expect("stdout piped");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        rx
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits on `lines` for one containing `needle`, failing when the
/// [`Patience`] of `deadline` runs out (or the lines end).
pub fn wait_for_line(lines: &mpsc::Receiver<String>, needle: &str, deadline: Duration) -> String {
    let found = Patience::new(deadline).wait(|slice| match lines.recv_timeout(slice) {
        Ok(line) if line.contains(needle) => Some(Ok(line)),
        Ok(_) | Err(mpsc::RecvTimeoutError::Timeout) => None,
        Err(mpsc::RecvTimeoutError::Disconnected) => Some(Err("the output ended".to_string())),
    });
    match found {
        Ok(Ok(line)) => line,
        Ok(Err(why)) | Err(why) => panic!("no line containing {needle:?}: {why}"),
    }
}

/// Runs a command to completion with a deadline and returns (status, stdout, stderr).
pub fn run(cmd: &mut Command, deadline: Duration) -> (ExitStatus, String, String) {
    try_run(cmd, deadline).expect("spawn child")
}

/// Like [`run`], but returns the error if the command cannot be started.
pub fn try_run(
    cmd: &mut Command,
    deadline: Duration,
) -> std::io::Result<(ExitStatus, String, String)> {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut guard = ChildGuard {
        child: cmd.spawn()?,
    };
    let output = Output::collect(&mut guard.child);
    let status = guard.wait(deadline);
    let (out, err) = output.join();
    Ok((status, out, err))
}

/// A child's standard output and error, read to their ends by threads.
pub struct Output {
    out: std::thread::JoinHandle<String>,
    err: std::thread::JoinHandle<String>,
}

impl Output {
    /// Starts reading the piped stdout and stderr of `child`.
    pub fn collect(child: &mut Child) -> Self {
        fn reader(mut r: impl std::io::Read + Send + 'static) -> std::thread::JoinHandle<String> {
            std::thread::spawn(move || {
                let mut s = String::new();
                let _ = r.read_to_string(&mut s);
                s
            })
        }
        Self {
            out: reader(child.stdout.take().expect("stdout piped")),
            err: reader(child.stderr.take().expect("stderr piped")),
        }
    }

    /// Waits for both to end: (stdout, stderr).
    pub fn join(self) -> (String, String) {
        (
            self.out.join().unwrap_or_default(),
            self.err.join().unwrap_or_default(),
        )
    }

    /// [`Output::join`], or what is known to be missing if the streams do
    /// not end within `limit` (a process outside the killed group holds
    /// them).
    #[allow(dead_code)]
    pub fn join_within(self, limit: std::time::Duration) -> (String, String) {
        let deadline = std::time::Instant::now() + limit;
        while !(self.out.is_finished() && self.err.is_finished())
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        if !(self.out.is_finished() && self.err.is_finished()) {
            return (
                String::new(),
                format!("(the output did not end within {limit:?})"),
            );
        }
        self.join()
    }
}

/// The `frame` command-line tool (package `frame-cli`), built (or found
/// up to date) by cargo once per test process, with the crash points of
/// the kill-at-every-call tests.
pub fn frame_bin() -> PathBuf {
    built(
        "frame",
        &["--package", "frame-cli", "--bin", "frame"],
        &["fault-injection"],
    );
    profile_dir().join("frame")
}

/// The build directory of this test's profile (`target/<profile>`).
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable");
    exe.parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps/<test>")
        .to_path_buf()
}

/// Path of a compiled example, built (or found up to date) by cargo once
/// per test process: `cargo test --test NAME` does not build examples, and
/// an example left from an older build would test old code.
pub fn example(name: &str) -> PathBuf {
    example_with(name, &[])
}

/// [`example`] built with the crate's `features`.
pub fn example_with(name: &str, features: &[&str]) -> PathBuf {
    built(name, &["--example", name], features);
    profile_dir().join("examples").join(name)
}

/// Runs `cargo build` with `target` (and `features`) in this test's
/// profile, once per test process and `key`.
fn built(key: &str, target: &[&str], features: &[&str]) {
    static BUILT: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if built.iter().any(|b| b == key) {
        return;
    }
    let mut cmd = Command::new(env!("CARGO"));
    cmd.arg("build").args(target);
    if !features.is_empty() {
        cmd.arg("--features").arg(features.join(","));
    }
    if profile_dir().ends_with("release") {
        cmd.arg("--release");
    }
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"));
    let (status, _, err) = run(&mut cmd, CHILD_DEADLINE);
    assert!(status.success(), "building {key} failed:\n{err}");
    built.push(key.to_string());
}

/// A command running this test binary's ignored test `path` as a child
/// process, with `FRAME_TEST_CHILD` set so the test knows it is the child.
/// `path` is the test's module path (`concat!(module_path!(), "::name")`);
/// the binary's own name at its front is dropped.
pub fn self_as_child(path: &str) -> Command {
    let name = path.split_once("::").map_or(path, |(_, test)| test);
    let mut cmd = Command::new(std::env::current_exe().expect("test executable"));
    cmd.args([
        "--exact",
        name,
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env("FRAME_TEST_CHILD", "1");
    cmd
}

/// Whether this process is a child started by [`self_as_child`].
pub fn is_child() -> bool {
    std::env::var_os("FRAME_TEST_CHILD").is_some()
}

/// Recursively lists every file under `dir` (for leftovers checks).
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                stack.push(e.path());
            } else {
                out.push(e.path());
            }
        }
    }
    out.sort();
    out
}

/// Every file under `dir` but spare files, with a hash of its contents (to
/// show that nothing was removed or changed).
pub fn file_hashes(dir: &Path) -> Vec<(PathBuf, u64)> {
    files_under(dir)
        .into_iter()
        .filter(|p| !p.to_string_lossy().contains("/spare/"))
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap_or_default();
            (p, xxhash_rust::xxh3::xxh3_64(&bytes))
        })
        .collect()
}

/// Pids of live processes whose environment mentions `marker` (the job's
/// run directory appears in the environment of its daemons and ranks).
pub fn processes_mentioning(marker: &Path) -> Vec<i32> {
    let needle = marker.as_os_str().as_encoded_bytes().to_vec();
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if pid == std::process::id() as i32 {
            continue;
        }
        if let Ok(env) = std::fs::read(e.path().join("environ")) {
            if env.windows(needle.len()).any(|w| w == needle.as_slice()) {
                found.push(pid);
            }
        }
    }
    found
}

/// Waits (with a deadline) for every process of a finished job to be gone,
/// and fails the test if one survives. Waits on process exit events (pidfd).
pub fn assert_no_survivors(marker: &Path, deadline: Duration) {
    let until = Instant::now() + deadline;
    for pid in processes_mentioning(marker) {
        let Some(p) = rustix::process::Pid::from_raw(pid) else {
            continue;
        };
        let Ok(fd) = rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()) else {
            continue; // already gone
        };
        let mut fds = [rustix::event::PollFd::new(
            &fd,
            rustix::event::PollFlags::IN,
        )];
        let left = until.saturating_duration_since(Instant::now());
        let ts = rustix::event::Timespec {
            tv_sec: left.as_secs() as i64,
            tv_nsec: left.subsec_nanos() as i64,
        };
        let _ = rustix::event::poll(&mut fds, Some(&ts));
    }
    let left: Vec<i32> = processes_mentioning(marker);
    assert!(left.is_empty(), "processes outlived the job: {left:?}");
}

/// The outcome of one `frame run`.
pub struct Job {
    pub status: ExitStatus,
    /// Standard output and standard error, one after the other.
    pub out: String,
    /// The recovery metrics, one JSON object per line of the metrics file.
    pub metrics: Vec<serde_json::Value>,
}

impl Job {
    /// The levels the library's recoveries used, in order (from the
    /// `recovery` records of the metrics file).
    pub fn recovery_levels(&self) -> Vec<u64> {
        self.metrics
            .iter()
            .filter(|m| m["event"] == "recovery")
            .map(|m| m["level"].as_u64().unwrap_or(0))
            .collect()
    }
}

/// Runs `frame run ARGS -- PROGRAM PROGRAM_ARGS` with its run, node-local and
/// metrics paths inside `scratch`, a hard deadline, and afterwards checks
/// that no process of the job survived and its socket directory is gone.
pub fn frame_run(scratch: &Path, args: &[&str], program: &Path, program_args: &[&str]) -> Job {
    frame_run_with(scratch, args, program, program_args, &[])
}

/// Like [`frame_run`], with environment changes (`None` removes a variable).
pub fn frame_run_with(
    scratch: &Path,
    args: &[&str],
    program: &Path,
    program_args: &[&str],
    env: &[(&str, Option<&str>)],
) -> Job {
    let mut cmd = frame_run_command(scratch, args, program, program_args, env);
    let (status, out, err) = run_with_deadline(&mut cmd);
    finished_run(scratch, status, out + &err)
}

/// The `frame run` command of [`frame_run_with`], to be watched while it
/// runs ([`Watched`]); [`finished_run`] checks what it left.
pub fn frame_run_command(
    scratch: &Path,
    args: &[&str],
    program: &Path,
    program_args: &[&str],
    env: &[(&str, Option<&str>)],
) -> Command {
    let run = scratch.join("run");
    let local = scratch.join("local");
    let metrics = scratch.join("metrics.jsonl");
    let _ = std::fs::remove_file(&metrics);
    let mut cmd = Command::new(frame_bin());
    cmd.arg("run")
        .arg("--run-dir")
        .arg(&run)
        .arg("--metrics")
        .arg(&metrics)
        .args(args)
        .arg("--")
        .arg(program)
        .args(program_args)
        .env("FRAME_STORAGE_LOCAL_DIR", &local);
    for (k, v) in env {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    cmd
}

/// A `frame run` of [`frame_run_command`] in `scratch` ended with `status`
/// and output `out`: checks that none of its processes survive and its run
/// directory is gone, and reads its metrics.
pub fn finished_run(scratch: &Path, status: ExitStatus, out: String) -> Job {
    let run = scratch.join("run");
    let metrics = scratch.join("metrics.jsonl");
    assert_no_survivors(&run, Duration::from_secs(30));
    let left: Vec<_> = std::fs::read_dir(&run)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    // A launcher killed by SIGKILL cannot remove its run directory (the
    // next launch does).
    use std::os::unix::process::ExitStatusExt;
    assert!(
        left.is_empty() || status.signal() == Some(9),
        "the job left {left:?} in its run directory"
    );
    let metrics = std::fs::read_to_string(&metrics)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("metrics line is JSON"))
        .collect();
    Job {
        status,
        out,
        metrics,
    }
}

fn run_with_deadline(cmd: &mut Command) -> (ExitStatus, String, String) {
    run(cmd, Duration::from_secs(240))
}

/// Copies the tree at `from` to `to` (created), keeping file modes; links
/// are copied as links.
pub fn copy_tree(from: &Path, to: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::symlink_metadata(from).expect("source of copy");
    std::fs::create_dir_all(to).expect("create copy");
    std::fs::set_permissions(
        to,
        std::fs::Permissions::from_mode(meta.permissions().mode()),
    )
    .expect("mode of copy");
    for entry in std::fs::read_dir(from).expect("list source").flatten() {
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let t = entry.file_type().expect("file type");
        if t.is_dir() {
            copy_tree(&src, &dst);
        } else if t.is_symlink() {
            let target = std::fs::read_link(&src).expect("read link");
            std::os::unix::fs::symlink(target, &dst).expect("copy link");
        } else {
            std::fs::copy(&src, &dst).expect("copy file");
        }
    }
}

/// Runs the `ring` example under `frame run ARGS` (see [`frame_run`]).
pub fn ring(scratch: &Path, args: &[&str], program_args: &[&str]) -> Job {
    frame_run(scratch, args, &example("ring"), program_args)
}

/// The value `ring` prints at the end of its output.
pub fn final_value(out: &str) -> String {
    out.lines()
        .find_map(|l| l.strip_prefix("ring: final value "))
        .unwrap_or_else(|| panic!("no final value in:\n{out}"))
        .to_string()
}

/// The value of a fault-free run of `ring` with `program_args` on 2x2 ranks.
pub fn reference(program_args: &[&str]) -> String {
    let dir = scratch();
    let job = ring(
        dir.path(),
        &["--nodes", "2", "--ranks-per-node", "2"],
        program_args,
    );
    assert!(job.status.success(), "{}", job.out);
    final_value(&job.out)
}

/// The `final checksum: 0x...` a program printed last.
pub fn final_checksum(out: &str) -> String {
    out.lines()
        .rev()
        .find_map(|l| l.strip_prefix("final checksum: "))
        .unwrap_or_else(|| panic!("no checksum in:\n{out}"))
        .to_string()
}

/// Node `node`'s local directory under `base`, by the library's rule.
pub fn node_dir(base: &Path, node: u32) -> PathBuf {
    frame::internals::node::dir_of(base, node)
}

/// The directory holding libframe.so and libframe.a, built first.
pub fn libframe() -> PathBuf {
    let profile_dir = profile_dir();
    build_libframe(&[]);
    assert!(profile_dir.join("libframe.so").exists() && profile_dir.join("libframe.a").exists());
    profile_dir
}

/// Builds libframe with `features` in the test's profile.
fn build_libframe(features: &[&str]) {
    let mut cmd = Command::new(env!("CARGO"));
    cmd.args(["build", "-p", "frame-ffi"])
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    if !features.is_empty() {
        cmd.args(["--features", &features.join(",")]);
    }
    if profile_dir().ends_with("release") {
        cmd.arg("--release");
    }
    let (status, _, err) = run(&mut cmd, CHILD_DEADLINE);
    assert!(status.success(), "building libframe failed:\n{err}");
}

/// A directory of its own holding libframe.so built with `features` (a
/// copy: cargo's own is replaced by the next build with other features).
pub fn libframe_with(features: &[&str]) -> PathBuf {
    build_libframe(features);
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("libframe-{}", features.join("-")));
    std::fs::create_dir_all(&dir).expect("libframe's directory");
    std::fs::copy(profile_dir().join("libframe.so"), dir.join("libframe.so"))
        .expect("copy libframe.so");
    dir
}

/// Runs `make -C ffi install` into `prefix` in this test's profile, with
/// the further make arguments `args` (as users install libframe and
/// libfti); fails the test when it fails.
pub fn make_install(prefix: &Path, args: &[&str]) {
    let profile = if profile_dir().ends_with("release") {
        "release"
    } else {
        "debug"
    };
    let (status, out, err) = run(
        Command::new("make")
            .arg("-C")
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("ffi"))
            .arg("install")
            .arg(format!("PREFIX={}", prefix.display()))
            .arg(format!("PROFILE={profile}"))
            .args(args),
        CHILD_DEADLINE,
    );
    assert!(status.success(), "make -C ffi install failed:\n{out}{err}");
}

/// Compiles `source` (relative to the repository) into `out` against
/// libframe (shared).
pub fn compile_c(source: &str, out: &Path) {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    compile_c_against(&cc, source, out, &libframe());
}

/// Compiles `source` (relative to the repository) into `out` with the
/// compiler `cc` against the libframe.so in `lib`.
pub fn compile_c_against(cc: &str, source: &str, out: &Path, lib: &Path) {
    let mut cmd = Command::new(cc);
    cmd.args(C_FLAGS)
        .arg("-D_POSIX_C_SOURCE=200809L")
        .arg("-I")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("ffi/include"))
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join(source))
        .arg("-L")
        .arg(lib)
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .args(["-lframe", "-lpthread", "-o"])
        .arg(out);
    let (status, stdout, err) = run(&mut cmd, CHILD_DEADLINE);
    assert!(
        status.success(),
        "compiling {source} failed:\n{stdout}{err}"
    );
}

/// A job whose standard output and error are read line by line while it
/// runs (to act on an event it reports), and kept for the assertions.
pub struct Watched {
    guard: ChildGuard,
    lines: mpsc::Receiver<String>,
    seen: std::sync::Arc<Mutex<String>>,
    readers: Vec<std::thread::JoinHandle<()>>,
}

impl Watched {
    /// Starts `cmd` with both outputs piped.
    pub fn spawn(cmd: &mut Command) -> Self {
        let mut guard = ChildGuard::spawn(cmd.stdout(Stdio::piped()).stderr(Stdio::piped()));
        let (tx, lines) = mpsc::channel();
        let seen = std::sync::Arc::new(Mutex::new(String::new()));
        let out: Box<dyn std::io::Read + Send> =
            Box::new(guard.child.stdout.take().expect("stdout piped"));
        let err: Box<dyn std::io::Read + Send> =
            Box::new(guard.child.stderr.take().expect("stderr piped"));
        let readers = [out, err]
            .into_iter()
            .map(|r| {
                let tx = tx.clone();
                let seen = seen.clone();
                std::thread::spawn(move || {
                    for line in BufReader::new(r).lines().map_while(Result::ok) {
                        let mut s = seen.lock().unwrap_or_else(|p| p.into_inner());
                        s.push_str(&line);
                        s.push('\n');
                        drop(s);
                        let _ = tx.send(line);
                    }
                })
            })
            .collect();
        Self {
            guard,
            lines,
            seen,
            readers,
        }
    }

    /// The process id.
    pub fn pid(&self) -> i32 {
        self.guard.pid()
    }

    /// Waits for a line containing every one of `needles`, failing (with
    /// the output so far) after `deadline`.
    pub fn wait_for(&self, needles: &[&str], deadline: Duration) -> String {
        self.wait_until(
            &format!("with {needles:?}"),
            |line| needles.iter().all(|n| line.contains(n)),
            deadline,
        )
    }

    /// Waits until the output so far holds `n` lines containing every one
    /// of `needles`, counting those earlier waits read past (standard
    /// output and error are read apart, so a line of one may be read
    /// before an earlier line of the other); fails after `deadline`.
    pub fn wait_for_nth(&self, needles: &[&str], n: usize, deadline: Duration) {
        let count = || {
            let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
            (seen.lines())
                .filter(|l| needles.iter().all(|x| l.contains(x)))
                .count()
        };
        let found = Patience::of(self.guard.child.id(), deadline).wait(|slice| {
            if count() >= n {
                return Some(Ok(()));
            }
            match self.lines.recv_timeout(slice) {
                Ok(_) | Err(mpsc::RecvTimeoutError::Timeout) => None,
                Err(mpsc::RecvTimeoutError::Disconnected) => (count() < n)
                    .then(|| Err("the output ended".to_string()))
                    .or(Some(Ok(()))),
            }
        });
        if let Ok(Err(why)) | Err(why) = found {
            panic!("not {n} lines with {needles:?}: {why}:\n{}", self.output());
        }
    }

    /// Waits for a line `wanted` accepts (described as `what`), failing
    /// (with the output so far) after `deadline`.
    pub fn wait_until(
        &self,
        what: &str,
        wanted: impl Fn(&str) -> bool,
        deadline: Duration,
    ) -> String {
        let found = Patience::of(self.guard.child.id(), deadline).wait(|slice| {
            match self.lines.recv_timeout(slice) {
                Ok(line) if wanted(&line) => Some(Ok(line)),
                Ok(_) | Err(mpsc::RecvTimeoutError::Timeout) => None,
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    Some(Err("the output ended".to_string()))
                }
            }
        });
        match found {
            Ok(Ok(line)) => line,
            Ok(Err(why)) | Err(why) => panic!("no line {what}: {why}:\n{}", self.output()),
        }
    }

    /// Everything printed so far.
    pub fn output(&self) -> String {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Waits for the job to end (failing after `deadline`): (success, output).
    pub fn finish(self, deadline: Duration) -> (bool, String) {
        let (status, out) = self.finish_status(deadline);
        (status.success(), out)
    }

    /// Waits for the job to end (failing after `deadline`): its status and
    /// output.
    pub fn finish_status(mut self, deadline: Duration) -> (ExitStatus, String) {
        let child = &mut self.guard.child;
        let waited = Patience::of(child.id(), deadline)
            .wait(|slice| child.wait_timeout(slice).expect("wait"));
        let status = match waited {
            Ok(status) => status,
            Err(why) => {
                let pid = self.pid();
                let _ = self.guard.child.kill();
                let _ = self.guard.child.wait();
                panic!("job {pid} did not end: {why}:\n{}", self.output());
            }
        };
        for r in self.readers.drain(..) {
            let _ = r.join();
        }
        (status, self.output())
    }
}

/// SIGKILLs the process group of node `node`'s daemon (the whole node) in
/// the job whose environment mentions `marker`, as `--inject node:N`
/// does; returns whether it was found.
pub fn kill_node(marker: &Path, node: u32) -> bool {
    let handoff = format!("\"node\":{node},");
    for pid in processes_mentioning(marker) {
        let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        let env = String::from_utf8_lossy(&env);
        let daemon = env.split('\0').any(|v| v == "FRAME_RT_ROLE=daemon");
        if daemon && env.contains(&handoff) {
            if let Some(pid) = rustix::process::Pid::from_raw(pid) {
                let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
                return true;
            }
        }
    }
    false
}
