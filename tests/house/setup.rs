//! The test set-up. The README's test command sets up a machine from one
//! list: CI calls it rather than installing anything itself, every
//! program the tests start comes from a package of its list, its dry run
//! names every missing package and changes nothing, and without root it
//! says what to install and stops before running anything. And the
//! patience every wait of the tests has (`common::Patience`) runs out for
//! a process that hangs and for one that spins, never for one that works.

use crate::common;

use common::{run, scratch, TOOLS};
use std::collections::{BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const DEADLINE: Duration = Duration::from_secs(60);

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn script() -> PathBuf {
    repo().join("scripts/test")
}

/// `scripts/test --list`: the Debian packages the tests need.
fn listed() -> Vec<String> {
    let (status, out, err) = run(Command::new(script()).arg("--list"), DEADLINE);
    assert!(status.success(), "scripts/test --list failed: {err}");
    let list: Vec<String> = out.lines().map(str::to_string).collect();
    assert!(!list.is_empty(), "scripts/test --list printed nothing");
    list
}

/// A dpkg database directory that has no package installed.
fn empty_dpkg_db(dir: &Path) -> PathBuf {
    let db = dir.join("dpkg");
    std::fs::create_dir_all(db.join("updates")).unwrap();
    std::fs::write(db.join("status"), "").unwrap();
    db
}

#[test]
fn ci_sets_up_the_machine_only_through_the_test_command() {
    let ci = std::fs::read_to_string(repo().join(".ci/run")).unwrap();
    let code: Vec<&str> = ci
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#'))
        .collect();
    assert!(
        code.iter().any(|l| l.contains("scripts/test")),
        ".ci/run does not run scripts/test:\n{ci}"
    );
    for l in &code {
        for installer in ["apt-get", "apt ", "pip ", "dpkg"] {
            assert!(
                !l.contains(installer),
                ".ci/run installs something itself ({l}); scripts/test holds the one list"
            );
        }
    }
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    assert!(
        readme.contains("\nscripts/test\n"),
        "the README's test command is not scripts/test"
    );
}

/// The package dpkg says holds `path` (resolved), trying the merged-/usr
/// spelling too.
fn owner(path: &Path) -> Option<String> {
    let real = std::fs::canonicalize(path).ok()?;
    let text = real.to_string_lossy().into_owned();
    let mut tries = vec![text.clone()];
    if let Some(rest) = text.strip_prefix("/usr") {
        tries.push(rest.to_string());
    }
    for t in tries {
        let (status, out, _) = run(Command::new("dpkg-query").args(["-S", &t]), DEADLINE);
        if status.success() {
            let pkg = out.lines().next()?.split(':').next()?.trim();
            return Some(pkg.to_string());
        }
    }
    None
}

/// Every installed package `roots` depend on, directly or not (theirs
/// included), by name.
fn closure(roots: &[String]) -> BTreeSet<String> {
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut queue: VecDeque<String> = roots.iter().cloned().collect();
    while let Some(p) = queue.pop_front() {
        if !seen.insert(p.clone()) || seen.len() > 5_000 {
            continue;
        }
        let (status, out, _) = run(
            Command::new("dpkg-query").args(["-W", "-f=${Depends}, ${Pre-Depends}", &p]),
            DEADLINE,
        );
        if !status.success() {
            continue;
        }
        for dep in out.split([',', '|']) {
            let name = dep.split_whitespace().next().unwrap_or("");
            let name = name.split(':').next().unwrap_or("");
            if !name.is_empty() && !seen.contains(name) {
                queue.push_back(name.to_string());
            }
        }
    }
    seen
}

#[test]
fn every_program_the_tests_start_comes_from_a_listed_package() {
    let list = listed();
    let covered = closure(&list);
    let mut problems = Vec::new();
    for tool in TOOLS {
        let path = if tool.starts_with('/') {
            PathBuf::from(tool)
        } else {
            let (status, out, _) = run(
                Command::new("sh").args(["-c", &format!("command -v {tool}")]),
                DEADLINE,
            );
            if !status.success() {
                problems.push(format!("{tool}: not installed (run scripts/test --setup)"));
                continue;
            }
            PathBuf::from(out.trim())
        };
        match owner(&path) {
            Some(pkg) if covered.contains(&pkg) => {}
            Some(pkg) => problems.push(format!(
                "{tool} ({}) comes from {pkg}, which no package of scripts/test's list brings",
                path.display()
            )),
            None => problems.push(format!("{tool} ({}): no package holds it", path.display())),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn a_dry_run_names_every_missing_package_and_installs_nothing() {
    let list = listed();
    let dir = scratch();
    let db = empty_dpkg_db(dir.path());
    let (status, out, err) = run(
        Command::new(script())
            .arg("--dry-run")
            .env("DPKG_ADMINDIR", &db),
        DEADLINE,
    );
    assert!(status.success(), "{out}{err}");
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix("would install Debian packages: "))
        .unwrap_or_else(|| panic!("no package line in:\n{out}{err}"));
    let named: Vec<&str> = line
        .split_whitespace()
        .filter(|p| *p != "python3-venv")
        .collect();
    assert_eq!(named, list, "the dry run and --list disagree");
    assert!(!out.contains("installing"), "{out}");
    // On this machine, set up by the script, nothing is missing.
    let (status, out, err) = run(Command::new(script()).arg("--dry-run"), DEADLINE);
    assert!(status.success(), "{err}");
    assert!(
        !out.contains("would install Debian packages"),
        "this machine lacks packages of the list:\n{out}"
    );
}

#[test]
fn without_root_it_names_what_to_install_and_runs_nothing() {
    use std::os::unix::fs::PermissionsExt;
    common::need_tool("setpriv");
    let list = listed();
    let dir = scratch();
    let db = empty_dpkg_db(dir.path());
    // A copy another user can read: the checkout may be private.
    let copy = dir.path().join("scripts");
    std::fs::create_dir(&copy).unwrap();
    std::fs::copy(script(), copy.join("test")).unwrap();
    for (p, mode) in [(dir.path(), 0o755), (copy.as_path(), 0o755), (&db, 0o755)] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    std::fs::set_permissions(db.join("status"), std::fs::Permissions::from_mode(0o644)).unwrap();
    let (status, out, err) = run(
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(copy.join("test"))
            .env("DPKG_ADMINDIR", &db),
        DEADLINE,
    );
    assert_eq!(status.code(), Some(1), "{out}{err}");
    let command = format!("apt-get install -y {}", list.join(" "));
    assert!(err.contains(&command), "no `{command}` in:\n{err}");
    assert!(
        !out.contains("scripts/test: ") && !err.contains("installing"),
        "it went on without the packages:\n{out}{err}"
    );
    assert!(!dir.path().join("target").exists(), "it made target/");
}

#[test]
fn patience_runs_out_for_a_child_that_does_nothing() {
    let _g = common::serial();
    let mut child = common::ChildGuard::spawn(Command::new("sleep").arg("600"));
    let began = std::time::Instant::now();
    let why = common::Patience::of(child.child.id(), Duration::from_secs(2))
        .wait(|slice| wait_timeout::ChildExt::wait_timeout(&mut child.child, slice).unwrap())
        .unwrap_err();
    assert!(why.starts_with("nothing ran for"), "{why}");
    assert!(began.elapsed() >= Duration::from_secs(2), "{why}");
}

#[test]
fn patience_runs_out_for_a_child_that_spins() {
    let _g = common::serial();
    let mut child =
        common::ChildGuard::spawn(Command::new("sh").args(["-c", "while :; do :; done"]));
    let why = common::Patience::of(child.child.id(), Duration::from_secs(1))
        .wait(|slice| wait_timeout::ChildExt::wait_timeout(&mut child.child, slice).unwrap())
        .unwrap_err();
    assert!(why.starts_with("used "), "{why}");
}

/// A process that spins on CPU 0 and is not one of the test's (its
/// parent is gone): the load of another user. Killed when dropped.
struct Hog(i32);

impl Hog {
    fn start(dir: &Path) -> Self {
        let pid_file = dir.join("hog.pid");
        let script = format!(
            "echo $$ > {}; exec taskset -c 0 sh -c 'while :; do :; done' </dev/null >/dev/null 2>&1",
            pid_file.display()
        );
        let (status, _, err) = run(
            Command::new("setsid").args(["-f", "sh", "-c", &script]),
            DEADLINE,
        );
        assert!(status.success(), "{err}");
        let pid = common::patience::poll(DEADLINE, Duration::from_millis(10), || {
            std::fs::read_to_string(&pid_file).ok()?.trim().parse().ok()
        })
        .unwrap();
        Hog(pid)
    }
}

impl Drop for Hog {
    fn drop(&mut self) {
        if let Some(p) = rustix::process::Pid::from_raw(self.0) {
            let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
        }
    }
}

#[test]
fn patience_lasts_while_a_child_on_a_loaded_cpu_works_past_the_wall_clock_limit() {
    let _g = common::serial();
    let dir = scratch();
    let _hog = Hog::start(dir.path());
    // 1.5 s of CPU on the hog's CPU: about 3 s of wall time, past a 2 s
    // wall-clock deadline, well within the CPU budget of a 2 s patience.
    // In a session of its own, as the hog: the scheduler shares the CPU
    // between the two sessions, whatever the tests running beside this
    // one load the test's own session with.
    let mut child = common::ChildGuard::spawn(Command::new("setsid").args([
        "-w",
        "taskset",
        "-c",
        "0",
        "python3",
        "-c",
        "import time\nwhile time.process_time() < 1.5: pass",
    ]));
    let began = std::time::Instant::now();
    let status = common::Patience::of(child.child.id(), Duration::from_secs(2))
        .wait(|slice| wait_timeout::ChildExt::wait_timeout(&mut child.child, slice).unwrap());
    let status = status.unwrap_or_else(|why| panic!("{why}"));
    assert!(status.success());
    assert!(
        began.elapsed() > Duration::from_secs(2),
        "{:?}",
        began.elapsed()
    );
}
