//! One launcher for the heat2d example, the program most system tests run:
//! its options and environment are built up once, then it runs on its own
//! (`--nodes`, `--ranks-per-node`: heat2d starts the runtime itself) or
//! under `frame run`.
//!
//! ```ignore
//! let job = Heat2d::new(GRID).all_levels(dir).arg("--crash-at").arg("55")
//!     .frame_run(dir, &NODES);
//! ```

use super::{example, finished_run, frame_run_command, run, Job};
use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, ExitStatus};
use std::time::Duration;

/// Levels 2 to 4 at every 1st, 2nd and 3rd checkpoint, level 4 in 64 KiB
/// chunks: every level used within a few checkpoints.
pub const ALL_LEVELS: [(&str, &str); 4] = [
    ("FRAME_L2_INTERVAL", "1"),
    ("FRAME_L3_INTERVAL", "2"),
    ("FRAME_L4_INTERVAL", "3"),
    ("FRAME_L4_CHUNK_SIZE", "64 KiB"),
];

/// A heat2d launch being put together.
#[derive(Clone, Debug, Default)]
pub struct Heat2d {
    args: Vec<OsString>,
    /// Set (`Some`) or removed (`None`), in order.
    env: Vec<(String, Option<OsString>)>,
}

impl Heat2d {
    /// heat2d with its options `args` (grid, steps, checkpoint interval).
    pub fn new<S: AsRef<std::ffi::OsStr>>(args: impl IntoIterator<Item = S>) -> Self {
        Self::default().args(args)
    }

    /// One more option.
    pub fn arg(mut self, arg: impl AsRef<std::ffi::OsStr>) -> Self {
        self.args.push(arg.as_ref().to_os_string());
        self
    }

    /// More options.
    pub fn args<S: AsRef<std::ffi::OsStr>>(mut self, args: impl IntoIterator<Item = S>) -> Self {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_os_string()));
        self
    }

    /// Sets the environment variable `key`.
    pub fn env(mut self, key: &str, value: impl AsRef<std::ffi::OsStr>) -> Self {
        self.env
            .push((key.to_string(), Some(value.as_ref().to_os_string())));
        self
    }

    /// Sets each variable of `vars`.
    pub fn envs<K: AsRef<str>, V: AsRef<std::ffi::OsStr>>(
        mut self,
        vars: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        for (k, v) in vars {
            self = self.env(k.as_ref(), v);
        }
        self
    }

    /// Sets each variable of `vars` given `Some` value, removes each given
    /// `None`.
    pub fn vars(mut self, vars: &[(&str, Option<&str>)]) -> Self {
        for (k, v) in vars {
            self = match v {
                Some(v) => self.env(k, v),
                None => self.unset(k),
            };
        }
        self
    }

    /// Removes the environment variable `key` (for example `FRAME_CONFIG`,
    /// so that only what the test sets applies).
    pub fn unset(mut self, key: &str) -> Self {
        self.env.push((key.to_string(), None));
        self
    }

    /// Node-local storage in `local`.
    pub fn local(self, local: &Path) -> Self {
        self.env("FRAME_STORAGE_LOCAL_DIR", local)
    }

    /// Node-local storage in `dir/local`, the global directory in
    /// `dir/global`.
    pub fn storage_in(self, dir: &Path) -> Self {
        self.local(&dir.join("local"))
            .env("FRAME_STORAGE_GLOBAL_DIR", dir.join("global"))
    }

    /// [`storage_in`](Self::storage_in) `dir` with every level on
    /// ([`ALL_LEVELS`]).
    pub fn all_levels(self, dir: &Path) -> Self {
        self.storage_in(dir).envs(ALL_LEVELS)
    }

    /// The library's metrics lines in `dir/metrics.jsonl` (under
    /// `frame run`, the run's own metrics file).
    pub fn metrics_in(self, dir: &Path) -> Self {
        self.env("FRAME_METRICS_FILE", dir.join("metrics.jsonl"))
    }

    fn apply(&self, cmd: &mut Command) {
        for (k, v) in &self.env {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
    }

    /// heat2d starting the runtime itself (its options say how many
    /// nodes and ranks).
    pub fn command(&self) -> Command {
        let mut cmd = Command::new(example("heat2d"));
        cmd.args(&self.args);
        self.apply(&mut cmd);
        cmd
    }

    /// Runs [`command`](Self::command) within `deadline`: its exit status
    /// and its output (standard output, then standard error).
    pub fn run(&self, deadline: Duration) -> (ExitStatus, String) {
        let (status, out, err) = run(&mut self.command(), deadline);
        (status, out + &err)
    }

    /// heat2d under `frame run FRAME_ARGS`, its run directory, node-local
    /// storage and metrics in `scratch` (see [`frame_run_command`]), to be
    /// watched while it runs.
    pub fn frame_run_command(&self, scratch: &Path, frame_args: &[&str]) -> Command {
        let args: Vec<String> = (self.args.iter())
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut cmd = frame_run_command(scratch, frame_args, &example("heat2d"), &args, &[]);
        self.apply(&mut cmd);
        cmd
    }

    /// Runs heat2d under `frame run FRAME_ARGS` to the end, and checks what
    /// the run left (see [`frame_run`](super::frame_run)).
    pub fn frame_run(&self, scratch: &Path, frame_args: &[&str]) -> Job {
        let mut cmd = self.frame_run_command(scratch, frame_args);
        let (status, out, err) = run(&mut cmd, Duration::from_secs(240));
        finished_run(scratch, status, out + &err)
    }
}
