//! Starting a node's daemon on another host with an engine the cluster
//! already has: the user's `ssh` (batch mode, as mpirun's ssh agent runs
//! it) or Slurm's `srun` inside the allocation. frame adds no launcher of
//! its own.
//!
//! The command line carries nothing private: the remote shell runs
//! `cd <dir>; exec env FRAME_RT_ROLE=daemon FRAME_RT_HANDOFF=stdin <exe>`,
//! and the daemon reads its [`Handoff`] (the job's description, the root's
//! address and the job's secret) as one JSON line on its standard input,
//! which the root keeps open for the job's lifetime: the daemon takes its
//! end as the root's. What the launcher prints on its standard error is
//! passed on, and its last lines kept to explain a daemon that could not
//! start.

use crate::handoff::Handoff;
use frame::env;
use std::collections::VecDeque;
use std::io;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs, UdpSocket};
use std::path::Path;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin, Command};

/// What starts daemons.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Launcher {
    /// Processes of this machine (virtual nodes).
    Local,
    /// `ssh` to each host, in batch mode.
    Ssh,
    /// `srun`, one daemon per node of the Slurm allocation.
    Slurm,
}

impl Launcher {
    /// The launcher's command when the user gives none.
    pub fn default_command(self) -> &'static str {
        match self {
            Launcher::Local => "",
            Launcher::Ssh => "ssh",
            Launcher::Slurm => "srun",
        }
    }

    /// Its name, as `--launcher` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Launcher::Local => "local",
            Launcher::Ssh => "ssh",
            Launcher::Slurm => "slurm",
        }
    }
}

/// Bytes of the launcher's standard error kept to explain a failed start.
const TAIL: usize = 4096;

/// The end of what a launcher printed on its standard error.
#[derive(Clone, Default)]
pub(super) struct Tail(Arc<Mutex<VecDeque<u8>>>);

impl Tail {
    fn push(&self, bytes: &[u8]) {
        let mut t = self.0.lock().unwrap_or_else(|p| p.into_inner());
        t.extend(bytes);
        let extra = t.len().saturating_sub(TAIL);
        t.drain(..extra);
    }

    /// Its last non-empty lines, joined with ` / `.
    pub(super) fn lines(&self) -> String {
        let t = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let bytes: Vec<u8> = t.iter().copied().collect();
        let text = String::from_utf8_lossy(&bytes);
        let lines: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        lines[lines.len().saturating_sub(3)..].join(" / ")
    }
}

/// A daemon being started (or running) on another host.
pub(super) struct Started {
    /// The launcher's process (ssh or srun) on this host.
    pub child: Child,
    /// What the root keeps of it besides.
    pub link: Link,
}

/// The root's ends of a launcher.
pub(super) struct Link {
    /// Its standard input, the daemon's, held open: dropping it stops the
    /// daemon.
    pub _stdin: ChildStdin,
    /// The end of its standard error.
    pub tail: Tail,
    /// The task passing its standard error on; ends with it.
    pub reader: tokio::task::JoinHandle<()>,
}

/// The shell command the launcher runs on `host`.
fn remote_command(exe: &Path) -> io::Result<String> {
    let quote = |s: &str| {
        shlex::try_quote(s)
            .map(|q| q.into_owned())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{s:?}: {e}")))
    };
    let exe = exe.to_str().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "the daemon's path is not UTF-8",
        )
    })?;
    // Ranks run in the launching directory when the host has it too, as
    // mpirun does; else in the remote home.
    let cwd = std::env::current_dir()?;
    let cwd = cwd.to_str().unwrap_or("/");
    Ok(format!(
        "cd {} 2>/dev/null; exec env {}=daemon {}=stdin {}",
        quote(cwd)?,
        env::ROLE,
        env::HANDOFF,
        quote(exe)?
    ))
}

/// Starts the daemon that `handoff` describes on `host` through
/// `launcher`, whose command is `command` (the program and its first
/// arguments), and hands it over.
pub(super) async fn start(
    launcher: Launcher,
    command: &[String],
    host: &str,
    exe: &Path,
    handoff: &Handoff,
) -> io::Result<Started> {
    let (program, first) = command
        .split_first()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "empty launcher command"))?;
    let remote = remote_command(exe)?;
    let mut cmd = Command::new(program);
    cmd.args(first);
    match launcher {
        Launcher::Ssh => {
            cmd.args(["-o", "BatchMode=yes", "-T", "--", host, &remote]);
        }
        Launcher::Slurm => {
            cmd.args([
                "--nodes=1",
                "--ntasks=1",
                &format!("--nodelist={host}"),
                "--kill-on-bad-exit=1",
                "--cpu-bind=none",
                "--mem-per-cpu=0",
                "--overlap",
                "--quiet",
                "sh",
                "-c",
                &remote,
            ]);
        }
        Launcher::Local => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the local launcher starts no remote daemons",
            ))
        }
    }
    super::daemons::leading_its_group(&mut cmd);
    cmd.stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd
        .spawn()
        .map_err(|e| io::Error::new(e.kind(), format!("cannot run {program}: {e}")))?;
    let tail = Tail::default();
    let mut err = child
        .stderr
        .take()
        .ok_or_else(|| io::Error::other("the launcher has no standard error"))?;
    let reader = {
        let tail = tail.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 8192];
            while let Ok(n) = err.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                tail.push(&buf[..n]);
                let _ = tokio::io::stderr().write_all(&buf[..n]).await;
            }
        })
    };
    let mut stdin = child
        .stdin
        .take()
        .ok_or_else(|| io::Error::other("the launcher has no standard input"))?;
    let mut line = serde_json::to_vec(handoff).map_err(io::Error::other)?;
    line.push(b'\n');
    // A launcher that died at once leaves a broken pipe: its exit explains.
    let _ = stdin.write_all(&line).await;
    let _ = stdin.flush().await;
    Ok(Started {
        child,
        link: Link {
            _stdin: stdin,
            tail,
            reader,
        },
    })
}

/// The address a daemon on `host` reaches the root at: the root's bound
/// address when it names one interface, else the address of this host's
/// interface that routes to `host`.
pub(super) fn root_for(bind: IpAddr, port: u16, host: &str) -> Result<SocketAddr, String> {
    if !bind.is_unspecified() && !bind.is_loopback() {
        return Ok(SocketAddr::new(bind, port));
    }
    let name = host.rsplit_once('@').map_or(host, |(_, h)| h);
    let name = name.trim_start_matches('[').trim_end_matches(']');
    let target = (name, 9)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| {
            format!("cannot resolve host {host} to find the address it reaches this one on; pass --bind with this host's address on the hosts' network")
        })?;
    let local: SocketAddr = match target {
        SocketAddr::V4(_) => (std::net::Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (std::net::Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    // Connecting a datagram socket sends nothing; it asks the kernel for
    // the route, and so for the source address.
    let ip = UdpSocket::bind(local)
        .and_then(|s| {
            s.connect(target)?;
            s.local_addr()
        })
        .map_err(|e| format!("no route to host {host} ({target}): {e}"))?
        .ip();
    Ok(SocketAddr::new(ip, port))
}

#[cfg(test)]
mod tests;
