//! VeloC programs in tests: libveloc built and linked under VeloC's name
//! (`-lveloc-client`), C programs compiled against `veloc.h`, VeloC
//! configuration files, and the heat program (`veloc_heat.c`) run on 8
//! ranks as 4 virtual nodes, killed and run again with nodes' scratch
//! directories lost.

use super::mpirun::{in_group, MpiJob, JOB_DEADLINE};
use super::{final_checksum, scratch};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Builds libveloc once, and gives the directory where it is
/// `libveloc-client.so`, VeloC's name (cargo cannot name it so).
pub fn libveloc() -> PathBuf {
    libveloc_with("mpi")
}

/// [`libveloc`] built with the cargo features `features`, in a directory
/// of its own (`ulfm`: for programs under `frame_run_ulfm`).
pub fn libveloc_with(features: &'static str) -> PathBuf {
    super::mpirun::mpi_library_copy(
        "frame-veloc",
        "libveloc_client.so",
        features,
        "libveloc-client.so",
    )
}

/// Compiles `source` (relative to the repository) with `mpicc` against
/// `veloc.h` and libveloc into `name`, once per test binary.
pub fn compile(source: &str, name: &str) -> PathBuf {
    super::mpirun::mpicc(
        source,
        name,
        "veloc-programs",
        &["ffi/veloc/include", "examples/c"],
        &libveloc(),
        "veloc-client",
    )
}

/// Writes VeloC's configuration into `dir`: scratch and persistent
/// directories there, synchronous, and `extra` lines.
pub fn config(dir: &Path, extra: &str) -> PathBuf {
    let path = dir.join("heat.cfg");
    for d in ["scratch", "persistent"] {
        std::fs::create_dir_all(dir.join(d)).expect("a directory");
    }
    let text = format!(
        "scratch = {}\npersistent = {}\nmode = sync\n{extra}",
        dir.join("scratch").display(),
        dir.join("persistent").display()
    );
    std::fs::write(&path, text).expect("write the configuration");
    path
}

/// `benches/side_by_side/veloc_heat.c` (`CONFIG NX NY STEPS [CRASH_AT]`)
/// on 8 ranks as 4 virtual nodes, a checkpoint every 20 steps.
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

    /// A run in `dir` with the configuration `config` and `env`.
    pub fn run(
        &self,
        dir: &Path,
        config: &Path,
        crash_at: Option<u32>,
        env: &[(&str, &str)],
    ) -> MpiJob {
        let mut cmd = Command::new("mpiexec");
        cmd.args(["-n", "8"])
            .arg(&self.program)
            .arg(config)
            .args(["96", "80", "200"])
            .args(crash_at.map(|c| c.to_string()))
            .current_dir(dir)
            .env("FRAME_TOPOLOGY_RANKS_PER_NODE", "2")
            .env("HEAT_EVERY", "20")
            .envs(env.iter().copied());
        in_group(cmd, JOB_DEADLINE, dir)
    }

    /// The checksum of a fault-free run.
    pub fn reference(&self) -> String {
        self.reference
            .get_or_init(|| {
                let dir = scratch();
                let job = self.run(dir.path(), &config(dir.path(), ""), None, &[]);
                assert!(job.status.success(), "{}", job.out);
                final_checksum(&job.out)
            })
            .clone()
    }

    /// Kills the job at step 130 (configuration lines `extra`, variables
    /// `env`), removes the `lost` nodes' scratch directories, runs it
    /// again and checks the step, the level and the checksum.
    pub fn killed_and_resumed(
        &self,
        extra: &str,
        env: &[(&str, &str)],
        lost: &[u32],
        level: &str,
        step: u32,
    ) {
        let dir = scratch();
        let config = config(dir.path(), extra);
        let crashed = self.run(dir.path(), &config, Some(130), env);
        assert!(
            !crashed.status.success() && crashed.out.contains("crashing at step 130"),
            "the job did not crash:\n{}",
            crashed.out
        );
        for node in lost {
            let node_dir = dir.path().join("scratch").join(format!("node-{node}"));
            std::fs::remove_dir_all(&node_dir).expect("remove a node's scratch");
        }
        let mut again = env.to_vec();
        again.push(("RUST_LOG", "info"));
        let resumed = self.run(dir.path(), &config, Some(130), &again);
        let what = format!("{extra:?} {env:?}, lost nodes {lost:?}");
        super::fti::restarted_from(&resumed, step, level, &what);
        assert_eq!(final_checksum(&resumed.out), self.reference(), "{what}");
    }
}
