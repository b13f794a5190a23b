//! SCR programs in tests: libscr built, C programs compiled against
//! `scr.h` with `mpicc`, and the heat program (`examples/c/scr_heat.c`)
//! run on 8 ranks as 4 virtual nodes in a directory that is its prefix,
//! killed and run again with levels' copies lost.

use super::mpirun::{in_group, MpiJob, JOB_DEADLINE};
use super::{final_checksum, scratch};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Builds libscr once and returns its directory.
pub fn libscr() -> PathBuf {
    libscr_with("mpi")
}

/// libscr built with the cargo features `features`, in a directory of
/// its own (`ulfm`: for programs under `frame_run_ulfm`).
pub fn libscr_with(features: &'static str) -> PathBuf {
    super::mpirun::mpi_library_copy("frame-scr", "libscr.so", features, "libscr.so")
}

/// Compiles `source` (relative to the repository) with `mpicc` against
/// `scr.h` and libscr into `name`, once per test binary.
pub fn compile(source: &str, name: &str) -> PathBuf {
    super::mpirun::mpicc(
        source,
        name,
        "scr-programs",
        &["ffi/scr/include"],
        &libscr(),
        "scr",
    )
}

/// Compiles the Fortran program `source` (relative to the repository)
/// with `mpif90` against `scrf.h` and libscr into `name`.
pub fn compile_fortran(source: &str, name: &str) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = libscr();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("scr-programs");
    std::fs::create_dir_all(&dir).expect("programs directory");
    let out = dir.join(name);
    let mut cmd = std::process::Command::new("mpif90");
    cmd.args(["-O2", "-Wall", "-Werror", "-std=f2018", "-I"])
        .arg(root.join("ffi/scr/include"))
        .arg(root.join(source))
        .arg("-L")
        .arg(&lib)
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .args(["-lscr", "-o"])
        .arg(&out);
    let (status, stdout, err) = super::run(&mut cmd, super::CHILD_DEADLINE);
    assert!(status.success(), "mpif90 {source} failed:\n{stdout}{err}");
    out
}

/// SCR's parameters of every run: the cache in `cache/` below the
/// directory, a checkpoint every 20 steps, each on its levels before the
/// program goes on (as SCR does by default), 2 ranks per virtual node.
pub fn base_env(dir: &Path) -> Vec<(String, String)> {
    [
        ("SCR_CACHE_BASE", dir.join("cache").display().to_string()),
        ("SCR_CHECKPOINT_INTERVAL", "20".into()),
        ("SCR_FLUSH_ASYNC", "0".into()),
        ("FRAME_TOPOLOGY_RANKS_PER_NODE", "2".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// `examples/c/scr_heat.c` (`NX NY STEPS [CRASH_AT]`), run on 8 ranks on a
/// 96x80 grid for 200 steps with its working directory as prefix.
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

    /// A run in `dir` (its prefix) with [`base_env`] and `env` (which wins).
    pub fn run(&self, dir: &Path, crash_at: Option<u32>, env: &[(&str, &str)]) -> MpiJob {
        let mut cmd = Command::new("mpiexec");
        cmd.args(["-n", "8"])
            .arg(&self.program)
            .args(["96", "80", "200"])
            .args(crash_at.map(|c| c.to_string()))
            .current_dir(dir)
            .envs(base_env(dir))
            .envs(env.iter().copied());
        in_group(cmd, JOB_DEADLINE, dir)
    }

    /// The checksum of a fault-free run.
    pub fn reference(&self) -> String {
        self.reference
            .get_or_init(|| {
                let dir = scratch();
                let job = self.run(dir.path(), None, &[]);
                assert!(job.status.success(), "{}", job.out);
                final_checksum(&job.out)
            })
            .clone()
    }

    /// Kills the job at step 130 under the parameters `env`, removes the
    /// `lost` nodes' cache directories, runs it again and checks the step
    /// it resumed at, the level it restored from (`L1`: none fetched) and
    /// its checksum.
    pub fn killed_and_resumed(&self, env: &[(&str, &str)], lost: &[u32], level: &str, step: u32) {
        let dir = scratch();
        let crashed = self.run(dir.path(), Some(130), env);
        assert!(
            !crashed.status.success() && crashed.out.contains("crashing at step 130"),
            "the job did not crash:\n{}",
            crashed.out
        );
        for node in lost {
            let node_dir = dir.path().join("cache").join(format!("node-{node}"));
            std::fs::remove_dir_all(&node_dir).expect("remove a node's cache");
        }
        let mut again = env.to_vec();
        again.push(("SCR_DEBUG", "1"));
        let resumed = self.run(dir.path(), Some(130), &again);
        let what = format!("{env:?}, lost nodes {lost:?}");
        super::fti::restarted_from(&resumed, step, level, &what);
        assert_eq!(final_checksum(&resumed.out), self.reference(), "{what}");
    }
}
