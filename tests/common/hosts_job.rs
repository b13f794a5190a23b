//! A heat2d job across the virtual hosts of [`super::vhost`]: its command,
//! the launch options for 4 hosts and 2 spares over ssh, the checksum the
//! same job computes on one machine, and a job running in the background
//! whose standard error is read line by line (to inject a fault once an
//! event was reported).

use super::heat2d::{Heat2d, ALL_LEVELS};
use super::vhost::Cluster;
use super::{final_checksum, run, wait_for_line, ChildGuard};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

pub const DEADLINE: Duration = Duration::from_secs(240);
/// A short run (fault-free comparisons) and a long one (faults injected
/// from outside while it runs).
pub const SHORT: [&str; 8] = [
    "--nx", "64", "--ny", "60", "--steps", "240", "--every", "10",
];
pub const LONG: [&str; 8] = [
    "--nx", "64", "--ny", "60", "--steps", "1500", "--every", "10",
];
/// Every host's node-local directory, on its own RAM disk.
pub const LOCAL: &str = "/dev/shm/frame-hosts-test";

/// heat2d with levels 2 to 4 on (groups of 2 hosts), its global directory
/// in `global`.
pub fn heat2d(grid: &[&str], global: &Path, args: &[&str]) -> Command {
    (Heat2d::new(grid).args(args).local(Path::new(LOCAL)))
        .env("FRAME_STORAGE_GLOBAL_DIR", global)
        .envs(ALL_LEVELS)
        .env("FRAME_L3_GROUP_SIZE", "2")
        .command()
}

/// The launch options for hosts 0..4 with hosts 4 and 5 as spares.
pub fn host_args(c: &Cluster) -> Vec<String> {
    [
        "--hosts",
        &c.list(0..6, 2),
        "--spare-nodes",
        "2",
        "--launcher",
        "ssh",
        "--launcher-command",
        &c.launcher_command(),
        "--heartbeat-timeout",
        "3s",
    ]
    .map(String::from)
    .to_vec()
}

pub fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// The checksum of `grid` on virtual nodes of this machine (4 nodes of 2
/// ranks, 2 spares).
/// Computed once per grid and test binary: every test compares with it.
pub fn on_one_host(grid: &[&str]) -> String {
    static KNOWN: Mutex<Vec<(Vec<String>, String)>> = Mutex::new(Vec::new());
    let key: Vec<String> = grid.iter().map(|a| a.to_string()).collect();
    let mut known = KNOWN.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, sum)) = known.iter().find(|(k, _)| *k == key) {
        return sum.clone();
    }
    let sum = compute_on_one_host(grid);
    known.push((key, sum.clone()));
    sum
}

fn compute_on_one_host(grid: &[&str]) -> String {
    let dir = super::scratch();
    let mut cmd = heat2d(
        grid,
        &dir.path().join("global"),
        &[
            "--nodes",
            "4",
            "--ranks-per-node",
            "2",
            "--spare-nodes",
            "2",
        ],
    );
    cmd.env("FRAME_STORAGE_LOCAL_DIR", dir.path().join("local"));
    let (status, out, err) = run(&mut cmd, DEADLINE);
    assert!(status.success(), "{out}{err}");
    final_checksum(&out)
}

/// A long job across the hosts, running in the background, its standard
/// error read line by line as it comes.
pub struct Running {
    pub guard: ChildGuard,
    out: std::thread::JoinHandle<String>,
    pub lines: mpsc::Receiver<String>,
    err: Arc<Mutex<String>>,
}

impl Running {
    pub fn start(c: &Cluster, tag: &str, env: &[(&str, &str)]) -> Self {
        // Rank 0 logs each level's commits.
        Self::start_with(c, tag, env, &[], "warn,frame::checkpoint::promotion=info")
    }

    /// [`Running::start`] with more heat2d arguments and this log filter.
    pub fn start_with(
        c: &Cluster,
        tag: &str,
        env: &[(&str, &str)],
        more: &[&str],
        log: &str,
    ) -> Self {
        let mut args = host_args(c);
        args.extend(more.iter().map(|a| a.to_string()));
        Self::launch(c, tag, env, &args, log)
    }

    /// The job with the launch options `args` (instead of [`host_args`]),
    /// its global directory named after `tag`, and the log filter `log`.
    pub fn launch(
        c: &Cluster,
        tag: &str,
        env: &[(&str, &str)],
        args: &[String],
        log: &str,
    ) -> Self {
        let mut cmd = heat2d(
            &LONG,
            &c.shared_dir().join(format!("global-{tag}")),
            &strs(args),
        );
        cmd.envs(env.iter().copied());
        cmd.env("RUST_LOG", log)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut guard = ChildGuard::spawn(&mut cmd);
        let mut stdout = guard.child.stdout.take().expect("stdout");
        let out = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = std::io::Read::read_to_string(&mut stdout, &mut s);
            s
        });
        let stderr = guard.child.stderr.take().expect("stderr");
        let (tx, lines) = mpsc::channel();
        let err = Arc::new(Mutex::new(String::new()));
        let all = Arc::clone(&err);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let mut all = all.lock().unwrap_or_else(|p| p.into_inner());
                all.push_str(&line);
                all.push('\n');
                let _ = tx.send(line);
            }
        });
        Self {
            guard,
            out,
            lines,
            err,
        }
    }

    /// Waits until `level` committed twice: the first of the two commits
    /// is then recorded on every node (a node's manager handles its orders
    /// in turn, and the second promotion came after the first commit).
    pub fn wait_for_commits(&self, level: u8) {
        let tag = format!("level=L{level}");
        let mut seen = 0;
        while seen < 2 {
            let line = wait_for_line(&self.lines, "level committed", Duration::from_secs(120));
            if line.contains(&tag) {
                seen += 1;
            }
        }
    }

    /// What the job wrote to its standard error so far (for a failure's
    /// message).
    pub fn so_far(&self) -> String {
        self.err.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Waits for the end: (success, output).
    pub fn finish(mut self) -> (bool, String) {
        use wait_timeout::ChildExt;
        let child = &mut self.guard.child;
        let status = super::Patience::of(child.id(), DEADLINE)
            .wait(|slice| child.wait_timeout(slice).expect("wait"));
        if status.is_err() {
            let _ = self.guard.child.kill();
        }
        let out = self.out.join().unwrap_or_default();
        // The reader ends with the job's standard error.
        let end = Instant::now() + Duration::from_secs(10);
        while self
            .lines
            .recv_timeout(end.saturating_duration_since(Instant::now()))
            .is_ok()
        {}
        let out = out + &self.err.lock().unwrap_or_else(|p| p.into_inner());
        let status = match status {
            Ok(status) => status,
            Err(why) => panic!("the job did not end: {why}:\n{out}"),
        };
        (status.success(), out)
    }
}
