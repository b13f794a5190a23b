//! FTI programs in tests: libfti built, C programs compiled against `fti.h`
//! with `mpicc` and Fortran programs against the module `fti` with
//! `mpif90`, FTI configuration files, and a heat program (C or Fortran)
//! killed and run again with levels' copies lost.

use super::mpirun::{mpiexec, MpiJob};
use super::{final_checksum, run, scratch, CHILD_DEADLINE};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Builds libfti once and returns its directory.
pub fn libfti() -> PathBuf {
    super::mpirun::mpi_library("frame-fti", "libfti.so")
}

/// Compiles `source` (relative to the repository) with `mpicc` against
/// `fti.h` and libfti into `name` (in cargo's directory for test files,
/// not a temporary one: the programs are built once per test binary).
pub fn compile(source: &str, name: &str) -> PathBuf {
    super::mpirun::mpicc(
        source,
        name,
        "fti-programs",
        &["ffi/fti/include"],
        &libfti(),
        "fti",
    )
}

/// Compiles the Fortran program `source` (relative to the repository)
/// with `mpif90` against the module `fti` (built with
/// `ffi/fti/fortran/Makefile`, as users build it) and libfti into `name`.
pub fn compile_fortran(source: &str, name: &str) -> PathBuf {
    let lib = libfti();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fti-programs");
    let module = dir.join("fortran");
    let mut make = Command::new("make");
    make.arg("-C")
        .arg(Path::new(ROOT).join("ffi/fti/fortran"))
        .arg(format!("OUT={}", module.display()))
        .arg("FFLAGS=-O2 -Wall -Werror -std=f2018");
    let (status, stdout, err) = run(&mut make, CHILD_DEADLINE);
    assert!(
        status.success(),
        "building the module fti failed:\n{stdout}{err}"
    );
    let out = dir.join(name);
    let mut cmd = Command::new("mpif90");
    cmd.args(["-O2", "-Wall", "-Werror", "-I"])
        .arg(&module)
        .arg(Path::new(ROOT).join(source))
        .arg("-L")
        .arg(&module)
        .arg("-L")
        .arg(&lib)
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .args(["-lfti_f90", "-lfti", "-o"])
        .arg(&out);
    let (status, stdout, err) = run(&mut cmd, CHILD_DEADLINE);
    assert!(status.success(), "mpif90 {source} failed:\n{stdout}{err}");
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

/// A checkpoint every 20 FTI_Snapshot calls, promoted to L2 every time, to
/// L3 every 2nd and to L4 every 5th (FTI's intervals are minutes).
pub const LEVELS: [(&str, &str); 4] = [
    ("FRAME_SNAPSHOT_INTERVAL", "20"),
    ("FRAME_L2_INTERVAL", "1"),
    ("FRAME_L3_INTERVAL", "2"),
    ("FRAME_L4_INTERVAL", "5"),
];

/// A heat program on libfti (`examples/c/fti_heat.c` or
/// `examples/fortran/fti_heat.f90`: `CONFIG NX NY STEPS [CRASH_AT]`, the
/// output lines "restarted at step N in" and "final checksum: "), run on
/// 8 ranks as 4 virtual nodes on a 96x80 grid for 200 steps.
pub struct Heat {
    program: PathBuf,
    reference: OnceLock<String>,
}

impl Heat {
    /// The heat program built at `program`.
    pub fn new(program: PathBuf) -> Self {
        Self {
            program,
            reference: OnceLock::new(),
        }
    }

    /// A run with [`LEVELS`], storage in `dir`.
    pub fn run(&self, dir: &Path, config: &Path, crash_at: Option<u32>) -> MpiJob {
        self.run_with(dir, config, crash_at, &LEVELS)
    }

    /// A run with the levels `env` sets instead of [`LEVELS`].
    pub fn run_with(
        &self,
        dir: &Path,
        config: &Path,
        crash_at: Option<u32>,
        env: &[(&str, &str)],
    ) -> MpiJob {
        let mut args = vec![
            config.to_str().unwrap().to_string(),
            "96".into(),
            "80".into(),
            "200".into(),
        ];
        args.extend(crash_at.map(|c| c.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        mpiexec(dir, 8, &self.program, &args, env)
    }

    /// The checksum of a fault-free run.
    pub fn reference(&self) -> String {
        self.reference
            .get_or_init(|| {
                let dir = scratch();
                let job = self.run(dir.path(), &config(dir.path(), 0, 2, 1), None);
                assert!(job.status.success(), "{}", job.out);
                final_checksum(&job.out)
            })
            .clone()
    }

    /// Killed at step 130 and run again with each level's copies lost in
    /// turn, from L1 to L4 (the newest checkpoint, the 6th, saved step 119
    /// at L1, L2 and L3; L4 holds the 5th, step 99).
    pub fn killed_and_resumed_at_every_level(&self, head: u32) {
        self.reference();
        self.killed_and_resumed(head, &[], &[], "L1", 119);
        self.killed_and_resumed(head, &[1], &[], "L2", 119);
        // Node 1's partner copies live on node 2.
        self.killed_and_resumed(head, &[1], &["node-2/fti-*/l2"], "L3", 119);
        // FTI's groups survive the loss of half their nodes.
        self.killed_and_resumed(head, &[1, 2], &[], "L3", 119);
        self.killed_and_resumed(head, &[1, 2, 3], &[], "L4", 99);
    }

    /// Kills the job at step 130, removes the `lost` node directories and
    /// the `also` paths below the local directory, runs it again and
    /// checks where it resumed, the level it recovered from and its
    /// checksum. The crashed run wrote `[restart] failure = 1` into the
    /// configuration, as FTI does: the same command restarts.
    pub fn killed_and_resumed(
        &self,
        head: u32,
        lost: &[u32],
        also: &[&str],
        level: &str,
        step: u32,
    ) {
        let dir = scratch();
        let config = config(dir.path(), head, 2, 1);
        let crashed = self.run(dir.path(), &config, Some(130));
        assert!(
            !crashed.status.success(),
            "the job did not crash:\n{}",
            crashed.out
        );
        assert!(
            crashed.out.contains("crashing at step 130"),
            "{}",
            crashed.out
        );
        let local = dir.path().join("local");
        for node in lost {
            std::fs::remove_dir_all(local.join(format!("node-{node}")))
                .expect("remove node directory");
        }
        for path in also {
            std::fs::remove_dir_all(resolve(&local, path)).expect("remove a level's copies");
        }
        let resumed = self.run(dir.path(), &config, Some(130));
        let what = format!(
            "{}, head = {head}, lost {lost:?} and {also:?}",
            self.program.display()
        );
        restarted_from(&resumed, step, level, &what);
        assert_eq!(final_checksum(&resumed.out), self.reference(), "{what}");
    }
}

/// Checks that the run `resumed` (`what`, for messages) succeeded after
/// restarting at `step` from `level` (`L1`: nothing was brought back from
/// another level), as the heat programs on libfti and libscr say.
pub fn restarted_from(resumed: &MpiJob, step: u32, level: &str, what: &str) {
    assert!(resumed.status.success(), "{what}:\n{}", resumed.out);
    assert!(
        resumed
            .out
            .contains(&format!("restarted at step {step} in ")),
        "{what}: expected a restart at step {step}:\n{}",
        resumed.out
    );
    let fetched = resumed
        .out
        .lines()
        .find(|l| l.contains("checkpoint brought back to level 1"));
    match (level, fetched) {
        ("L1", None) => {}
        ("L1", Some(l)) => panic!("{what}: expected L1, got {l}"),
        (_, Some(l)) => assert!(
            l.ends_with(&format!("level={level}")),
            "{what}: expected {level}: {l}"
        ),
        (_, None) => panic!("{what}: expected {level}:\n{}", resumed.out),
    }
}

/// `path` below `base`, a component `prefix*` standing for the one entry
/// that starts with `prefix` (the job directory, named after the
/// execution).
pub fn resolve(base: &Path, path: &str) -> PathBuf {
    let mut at = base.to_path_buf();
    for part in path.split('/') {
        at = match part.strip_suffix('*') {
            Some(prefix) => {
                let mut found = std::fs::read_dir(&at)
                    .expect("read a directory")
                    .flatten()
                    .map(|e| e.path())
                    .filter(|p| {
                        p.file_name()
                            .is_some_and(|n| n.to_string_lossy().starts_with(prefix))
                    });
                let one = found
                    .next()
                    .unwrap_or_else(|| panic!("nothing named {part} in {}", at.display()));
                assert!(
                    found.next().is_none(),
                    "more than one {part} in {}",
                    at.display()
                );
                one
            }
            None => at.join(part),
        };
    }
    at
}
