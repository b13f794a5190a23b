//! A manager as a process of its own: the form the runtime's daemons start
//! on each node, so that a manager crash is not a node crash.
//!
//! The daemon starts its own executable again with the role `manager` and
//! these variables (besides the job's secret and configuration):
//! [`MANAGER`](env::MANAGER) where to listen, [`NODE_DIR`](env::NODE_DIR)
//! the node's local directory, and [`NODE`](env::NODE); in a job across
//! hosts also [`MANAGER_FD`](env::MANAGER_FD), a listening TCP socket
//! managers on other hosts reach it on. The process serves until its
//! daemon dies.

use frame::comm::net::Bind;
use frame::config::Config;
use frame::env;
use frame::internals::manager::{Manager, Options};
use std::process::ExitCode;

/// Entry point of a manager process.
pub(crate) fn main() -> ExitCode {
    ExitCode::from(main_code())
}

/// [`main`], as a plain exit status.
pub(crate) fn main_code() -> u8 {
    let _ = rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL));
    // Failed promotions are worth a line on the job's standard error.
    frame_log::init(frame_log::Style::Plain, "warn");
    match serve() {
        Ok(never) => match never {},
        Err(e) => {
            eprintln!("frame manager: {e}");
            2
        }
    }
}

fn serve() -> Result<std::convert::Infallible, String> {
    let var = |name: &str| env::var_os(name).ok_or_else(|| format!("{name} is not set"));
    let socket = std::path::PathBuf::from(var(env::MANAGER)?);
    let local_dir = std::path::PathBuf::from(var(env::NODE_DIR)?);
    let node: u32 = var(env::NODE)?
        .to_string_lossy()
        .parse()
        .map_err(|_| format!("{} is not a number", env::NODE))?;
    let secret = super::handoff::job_secret().ok_or("the job's secret is not set")?;
    // The ranks' configuration gives the queue; a bad one is the ranks' to report.
    let cfg = Config::load(None).unwrap_or_default();
    let manager = Manager::start(Options {
        node,
        local_dir,
        queue: cfg.manager.queue.max(1) as usize,
        when_full: cfg.manager.when_full,
        bind: Bind::Unix(socket),
        peer_listener: peer_listener()?.map(std::sync::Arc::new),
        secret,
    })
    .map_err(|e| e.to_string())?;
    tracing::debug!(node, endpoint = %manager.endpoint(), "manager serving");
    loop {
        // Everything happens on the manager's threads; this one only keeps
        // the process (and the manager) alive until the daemon is gone.
        std::thread::park();
    }
}

/// The TCP listener the daemon handed down for managers on other hosts, if
/// it did ([`MANAGER_FD`](env::MANAGER_FD)).
fn peer_listener() -> Result<Option<std::net::TcpListener>, String> {
    use std::os::fd::{FromRawFd, OwnedFd};
    let Some(value) = env::var(env::MANAGER_FD) else {
        return Ok(None);
    };
    let fd: i32 = value
        .parse()
        .ok()
        .filter(|fd| *fd > 2)
        .ok_or_else(|| format!("{} is not a descriptor: {value}", env::MANAGER_FD))?;
    // SAFETY: the daemon left this descriptor open for this process alone,
    // and nothing else in it takes ownership of it.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let listener = std::net::TcpListener::from(fd);
    match listener.local_addr() {
        Ok(_) => Ok(Some(listener)),
        Err(e) => Err(format!(
            "{} ({value}) is not a TCP socket: {e}",
            env::MANAGER_FD
        )),
    }
}
