//! Virtual hosts on the test machine, for jobs across hosts: each is a
//! network namespace with its own address on a bridge, its own mount
//! namespace with a fresh tmpfs on `/dev/shm` (its node-local storage, and
//! its sessions' `TMPDIR`), its own hostname, and an sshd of its own that
//! accepts a key the harness generates. Everything else of the file system
//! (the build, wherever the checkout is; the test's global directory under
//! the target directory) is shared, as a cluster's parallel file system
//! would be.
//!
//! Killing a host kills every process of its network namespace: its tmpfs
//! goes with the last of them. Dropping the cluster kills them all and
//! removes the namespaces and the bridge. Needs root, `ip`, `unshare` and
//! `sshd` (the CI script installs iproute2 and openssh-server).

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long a host's sshd has to start listening.
const SSHD_START: Duration = Duration::from_secs(30);

/// A set of virtual hosts.
pub struct Cluster {
    tag: String,
    subnet: String,
    dir: tempfile::TempDir,
    count: usize,
    down: Vec<bool>,
    /// Each host's first process (its sshd, under `ip netns exec`).
    sshd: Vec<std::process::Child>,
}

fn sh(cmd: &str) -> std::process::Output {
    Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .stdin(Stdio::null())
        .output()
        .expect("run sh")
}

fn must(cmd: &str) {
    let out = sh(cmd);
    assert!(
        out.status.success(),
        "`{cmd}` failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Cluster {
    /// Starts `count` hosts, each with a running sshd.
    pub fn start(count: usize) -> Self {
        assert!(
            rustix::process::geteuid().is_root(),
            "virtual hosts need root (network and mount namespaces)"
        );
        for tool in [
            "ip",
            "bridge",
            "unshare",
            "/usr/sbin/sshd",
            "ssh",
            "ssh-keygen",
        ] {
            super::tools::need_tool(tool);
        }
        // Names and addresses of their own for every cluster of every test
        // process (a removed namespace's devices may linger a moment).
        static STARTED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let pid = std::process::id();
        let tag = format!("{:04}{:02}", pid % 10_000, n % 100);
        let subnet = format!("10.{}.{}", 100 + pid % 150, (pid / 150 + n) % 250);
        let dir = tempfile::Builder::new()
            .prefix("frame-vhosts-")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .expect("vhost dir");
        let mut c = Self {
            tag,
            subnet,
            dir,
            count,
            down: vec![false; count],
            sshd: Vec::new(),
        };
        c.keys();
        let br = c.bridge();
        let _ = sh(&format!("ip link del {br} 2>/dev/null"));
        must(&format!(
            "ip link add {br} type bridge && ip addr add {}.1/24 dev {br} && ip link set {br} up",
            c.subnet
        ));
        for i in 0..count {
            let sshd = c.make_host(i);
            c.sshd.push(sshd);
        }
        for i in 0..count {
            c.wait_sshd(i);
        }
        c
    }

    fn bridge(&self) -> String {
        format!("fvb{}", self.tag)
    }

    fn netns(&self, i: usize) -> String {
        format!("frame-vh{}-{i}", self.tag)
    }

    fn veth(&self, i: usize) -> String {
        format!("fv{}h{i}", self.tag)
    }

    /// Host `i`'s address (the name jobs use for it).
    pub fn host(&self, i: usize) -> String {
        format!("{}.{}", self.subnet, 10 + i)
    }

    /// The hosts `from..to` as a `--hosts` list with `slots` each.
    pub fn list(&self, range: std::ops::Range<usize>, slots: usize) -> String {
        range
            .map(|i| format!("{}:{slots}", self.host(i)))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The hosts `from..to` as Slurm writes a node list (`10.1.2.[10-13]`).
    pub fn nodelist(&self, range: std::ops::Range<usize>) -> String {
        format!(
            "{}.[{}-{}]",
            self.subnet,
            10 + range.start,
            10 + range.end - 1
        )
    }

    /// An `srun` stand-in for these hosts (no slurmd runs in them): it
    /// accepts the options frame's Slurm launcher passes and refuses any
    /// other, as srun refuses a misspelt one, then runs the step's `sh -c`
    /// command on the `--nodelist` host through ssh.
    pub fn srun_standin(&self) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = self.dir.path().join("srun");
        let script = format!(
            r#"#!/bin/sh
host=
while [ $# -gt 0 ]; do
    case "$1" in
        --nodelist=*) host="${{1#--nodelist=}}" ;;
        --nodes=1|--ntasks=1|--kill-on-bad-exit=1|--cpu-bind=none|--mem-per-cpu=0|--overlap|--quiet) ;;
        -*) echo "srun: unrecognized option '$1'" >&2; exit 1 ;;
        *) break ;;
    esac
    shift
done
[ -n "$host" ] || {{ echo "srun: no --nodelist" >&2; exit 1; }}
[ "$1" = sh ] && [ "$2" = -c ] && [ $# -eq 3 ] || {{ echo "srun stand-in: expected sh -c COMMAND" >&2; exit 1; }}
exec ssh -F {cfg} -o BatchMode=yes -T "$host" "$3"
"#,
            cfg = self.ssh_config().display()
        );
        std::fs::write(&path, script).expect("srun stand-in");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("srun mode");
        path
    }

    /// The ssh client configuration that reaches every host.
    pub fn ssh_config(&self) -> PathBuf {
        self.dir.path().join("ssh_config")
    }

    /// `--launcher-command` for these hosts.
    pub fn launcher_command(&self) -> String {
        format!("ssh -F {}", self.ssh_config().display())
    }

    /// `--launcher-command` for these hosts whose ssh takes `slow` seconds
    /// to start on host `i` for each `(i, slow)`, and `every` seconds on
    /// the others (a slow name lookup, PAM, a busy sshd).
    pub fn slow_launcher(&self, slow: &[(usize, u32)], every: u32) -> String {
        use std::os::unix::fs::PermissionsExt;
        let path = self.dir.path().join(format!("slow-ssh-{every}"));
        let cases: String = slow
            .iter()
            .map(|(i, s)| format!("        {}) delay={s} ;;\n", self.host(*i)))
            .collect();
        let script = format!(
            "#!/bin/sh\ndelay={every}\nfor a in \"$@\"; do\n    case \"$a\" in\n{cases}    esac\ndone\nsleep \"$delay\"\nexec ssh -F {} \"$@\"\n",
            self.ssh_config().display()
        );
        std::fs::write(&path, script).expect("slow ssh");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("mode");
        path.display().to_string()
    }

    fn keys(&self) {
        let d = self.dir.path();
        must(&format!(
            "ssh-keygen -q -t ed25519 -N '' -f {0}/key && ssh-keygen -q -t ed25519 -N '' -f {0}/hostkey && cp {0}/key.pub {0}/authorized_keys && chmod 600 {0}/authorized_keys",
            d.display()
        ));
        std::fs::write(
            self.ssh_config(),
            format!(
                "Host {subnet}.*\n  User root\n  IdentityFile {d}/key\n  IdentitiesOnly yes\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n  ConnectTimeout 20\n",
                subnet = self.subnet,
                d = d.display()
            ),
        )
        .expect("ssh config");
    }

    fn make_host(&self, i: usize) -> std::process::Child {
        let (ns, veth, br) = (self.netns(i), self.veth(i), self.bridge());
        let _ = sh(&format!("ip netns del {ns} 2>/dev/null"));
        must(&format!(
            "ip netns add {ns} && ip link add {veth} type veth peer name eth0 netns {ns} && ip link set {veth} master {br} up && ip -n {ns} addr add {addr}/24 dev eth0 && ip -n {ns} link set eth0 up && ip -n {ns} link set lo up",
            addr = self.host(i)
        ));
        let d = self.dir.path();
        let cfg = d.join(format!("sshd_config.{i}"));
        std::fs::write(
            &cfg,
            format!(
                "ListenAddress {addr}\nPort 22\nHostKey {d}/hostkey\nAuthorizedKeysFile {d}/authorized_keys\nPidFile none\nUsePAM no\nStrictModes no\nPermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nMaxStartups 200\nMaxSessions 200\nLogLevel ERROR\nSetEnv TMPDIR=/dev/shm\n",
                addr = self.host(i),
                d = d.display()
            ),
        )
        .expect("sshd config");
        std::fs::create_dir_all("/run/sshd").expect("/run/sshd");
        // The host's own hostname and RAM disk, then its sshd in the
        // foreground (the namespace lives as long as its processes).
        let script = format!(
            "mount -t tmpfs -o size=2g,mode=1777 tmpfs /dev/shm && hostname vh{i} && exec /usr/sbin/sshd -D -e -f {}",
            cfg.display()
        );
        let log = std::fs::File::create(d.join(format!("sshd.{i}.log"))).expect("sshd log");
        Command::new("ip")
            .args([
                "netns",
                "exec",
                &ns,
                "unshare",
                "--mount",
                "--uts",
                "--propagation",
                "private",
                "sh",
                "-c",
                &script,
            ])
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("start sshd")
    }

    fn wait_sshd(&self, i: usize) {
        let addr: SocketAddr = format!("{}:22", self.host(i)).parse().expect("address");
        let deadline = Instant::now() + SSHD_START;
        while TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err() {
            let log = std::fs::read_to_string(self.dir.path().join(format!("sshd.{i}.log")))
                .unwrap_or_default();
            assert!(
                Instant::now() < deadline,
                "the sshd of virtual host {i} did not start: {log}"
            );
            // Waiting on the listener itself: nothing to be told of.
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The processes of host `i`.
    pub fn processes(&self, i: usize) -> Vec<i32> {
        let out = sh(&format!("ip netns pids {}", self.netns(i)));
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect()
    }

    /// The processes of host `i` with `FRAME_RT_ROLE=role` in their
    /// environment.
    pub fn with_role(&self, i: usize, role: &str) -> Vec<i32> {
        let needle = format!("FRAME_RT_ROLE={role}\0");
        self.processes(i)
            .into_iter()
            .filter(|p| {
                std::fs::read(format!("/proc/{p}/environ"))
                    .map(|e| contains(&e, needle.as_bytes()))
                    .unwrap_or(false)
            })
            .collect()
    }

    /// Waits until host `i` runs at least one process of `role`.
    pub fn wait_role(&self, i: usize, role: &str, deadline: Duration) -> Vec<i32> {
        super::patience::poll(deadline, Duration::from_millis(20), || {
            let found = self.with_role(i, role);
            (!found.is_empty()).then_some(found)
        })
        .unwrap_or_else(|why| panic!("no {role} appeared on host {i}: {why}"))
    }

    /// Kills host `i`: every process of it, its sshd included (its RAM disk
    /// goes with them).
    pub fn kill(&mut self, i: usize) {
        self.kill_together(&[i]);
    }

    /// Kills `hosts` at once, as one event (a switch, a power domain).
    pub fn kill_together(&mut self, hosts: &[usize]) {
        assert!(self.kill_all(hosts), "hosts {hosts:?} would not die");
        for &i in hosts {
            self.down[i] = true;
        }
    }

    /// SIGKILLs every process of `hosts` until none is left (new ones may
    /// appear meanwhile, an ssh session starting); whether they are empty.
    fn kill_all(&self, hosts: &[usize]) -> bool {
        let all = || -> Vec<i32> { hosts.iter().flat_map(|&i| self.processes(i)).collect() };
        for _ in 0..100 {
            let pids = all();
            if pids.is_empty() {
                return true;
            }
            for p in pids {
                if let Some(p) = rustix::process::Pid::from_raw(p) {
                    let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
                }
            }
        }
        all().is_empty()
    }

    /// Stops host `i`'s sshd only (the host refuses ssh).
    pub fn stop_sshd(&self, i: usize) {
        for p in self.processes(i) {
            let exe = std::fs::read_link(format!("/proc/{p}/exe")).unwrap_or_default();
            if exe.ends_with("sshd") {
                if let Some(p) = rustix::process::Pid::from_raw(p) {
                    let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
                }
            }
        }
    }

    /// Cuts host `i` off the network (or connects it again).
    pub fn link(&self, i: usize, up: bool) {
        must(&format!(
            "ip link set {} {}",
            self.veth(i),
            if up { "up" } else { "down" }
        ));
    }

    /// Cuts `hosts` off from each other only, each still reaching every
    /// other host and this machine (or joins them again): their ports on
    /// the bridge are isolated, and the bridge forwards nothing between
    /// isolated ports. Nothing answers: their packets are dropped.
    pub fn isolate(&self, hosts: &[usize], cut: bool) {
        for &i in hosts {
            must(&format!(
                "bridge link set dev {} isolated {}",
                self.veth(i),
                if cut { "on" } else { "off" }
            ));
        }
    }

    /// Cuts this machine (where the root runs) off every host, the hosts
    /// still reaching each other and the shared directory (or connects it
    /// again): the bridge loses (or gets back) this machine's address.
    pub fn cut_root(&self, cut: bool) {
        must(&format!(
            "ip addr {} {}.1/24 dev {}",
            if cut { "del" } else { "add" },
            self.subnet,
            self.bridge()
        ));
    }

    /// The processes of the job on host `i`: its daemon, ranks and
    /// standbys, manager (with their pid and role).
    pub fn job_processes(&self, i: usize) -> Vec<(i32, &'static str)> {
        ["daemon", "rank", "manager"]
            .into_iter()
            .flat_map(|role| self.with_role(i, role).into_iter().map(move |p| (p, role)))
            .collect()
    }

    /// Waits (with the patience of `limit`) until host `i` runs no process
    /// of the job; fails naming those left.
    pub fn wait_job_gone(&self, i: usize, limit: Duration) {
        let gone = super::patience::poll(limit, Duration::from_millis(50), || {
            self.job_processes(i).is_empty().then_some(())
        });
        if let Err(why) = gone {
            panic!(
                "the job's processes on host {i} outlived it: {:?} ({why})",
                self.job_processes(i)
            );
        }
    }

    /// Removes `path` (absolute) as every live host sees it, in its own
    /// mounts (its RAM disk), through one of its processes.
    pub fn remove_everywhere(&self, path: &Path) {
        for i in 0..self.count {
            if let Some(p) = self.processes(i).first() {
                let inside = format!("/proc/{p}/root{}", path.display());
                let _ = std::fs::remove_dir_all(inside);
            }
        }
    }

    /// A directory every host sees at the same path (the global directory
    /// of jobs).
    pub fn shared_dir(&self) -> &Path {
        self.dir.path()
    }
}

/// Whether `hay` holds `needle`.
pub fn contains(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for i in 0..self.count {
            if !self.down[i] {
                self.kill_all(&[i]);
            }
            let _ = sh(&format!("ip netns del {}", self.netns(i)));
        }
        for child in &mut self.sshd {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = sh(&format!("ip link del {}", self.bridge()));
    }
}
