//! [`NetComm`]: the communicator of ranks that are separate processes.
//!
//! Each rank process owns a [`Hub`] (its mailbox) and a listener (see
//! `listen.rs`) served by a background tokio runtime: one task per incoming
//! connection decodes frames and drops them into the hub. Sends are written
//! by the calling thread straight onto a lazily opened connection to the
//! peer, which is eager in practice because every peer's readers drain their
//! sockets into memory.
//!
//! Every message carries the epoch it was sent in. A communicator belongs to
//! one epoch: it only ever receives messages of that epoch, and the hub
//! discards older ones. When the runtime starts a recovery it interrupts the
//! hub: every call in progress or to come on the old communicator fails with
//! [`CommError::Interrupted`], and blocked receives wake up.
//!
//! Addresses are Unix-domain sockets on one machine or TCP anywhere
//! ([`Endpoint`]). Every connection starts with the job's handshake (see
//! `crate::auth`); a peer that does not know the job's secret is dropped
//! before it can send a frame. Frame lengths and the bytes queued per
//! connection are capped ([`Limits`]): a peer cannot make a rank allocate
//! without bound, and a reader whose queue is full stops reading until the
//! rank consumes messages.

mod listen;
mod wire;

pub use listen::bind_private;
pub use listen::{listen, Bind};

use super::{check_rank, Bytes, Comm, CommError, CommResult, Failures, NodeId, Rank};
use crate::auth::{self, Channel, Secret};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::fmt;
use std::io::{self, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long a receive polls for a message before it sleeps. Waking a
/// sleeping thread costs tens of microseconds on virtual machines; a message
/// that arrives while the receiver still polls is picked up at once.
const POLL: Duration = Duration::from_micros(30);

/// How long a rank whose peer died waits for the runtime's recovery before
/// reporting the peer as failed.
const PEER_GRACE: Duration = Duration::from_secs(20);

/// Caps on what a peer can make a rank hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest message, in bytes.
    pub max_message: u64,
    /// Most bytes of received messages waiting, per connection.
    pub max_queued: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_message: 1 << 30,
            max_queued: 2 << 30,
        }
    }
}

/// What every connection of a job shares: the secret it proves, and the caps.
#[derive(Clone, Debug)]
pub struct Security {
    /// The job's secret.
    pub secret: Secret,
    /// Caps on frames and queues.
    pub limits: Limits,
}

impl Security {
    /// Security with a fresh random secret and default limits (for a job
    /// whose ranks are all set up by the caller, as in tests and benches).
    pub fn generate() -> std::io::Result<Arc<Self>> {
        Ok(Arc::new(Self {
            secret: Secret::generate()?,
            limits: Limits::default(),
        }))
    }
}

/// Where a rank listens for messages.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Endpoint {
    /// A Unix-domain socket (ranks on the same machine).
    Unix(PathBuf),
    /// A TCP address.
    Tcp(SocketAddr),
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Unix(p) => write!(f, "unix:{}", p.display()),
            Endpoint::Tcp(a) => write!(f, "tcp:{a}"),
        }
    }
}

struct Envelope {
    epoch: u64,
    src: Rank,
    tag: u64,
    data: Bytes,
    /// The connection's queue budget this message holds until received.
    _budget: Option<tokio::sync::OwnedSemaphorePermit>,
}

struct HubState {
    /// Messages of epochs below this are discarded.
    epoch: u64,
    /// Set when the runtime starts a recovery into this (newer) epoch.
    interrupt: Option<u64>,
    queue: VecDeque<Envelope>,
}

/// A rank process's mailbox, shared by its communicators and its readers.
pub struct Hub {
    state: Mutex<HubState>,
    ready: Condvar,
    /// Bumped on every delivery and interrupt (read without the lock while polling).
    changes: AtomicU64,
    /// Receives that went to sleep (lets tests interrupt a sleeping receive).
    #[cfg(test)]
    sleepers: AtomicU64,
}

impl Hub {
    /// An empty hub at epoch 0.
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(HubState {
                epoch: 0,
                interrupt: None,
                queue: VecDeque::new(),
            }),
            ready: Condvar::new(),
            changes: AtomicU64::new(0),
            #[cfg(test)]
            sleepers: AtomicU64::new(0),
        })
    }

    /// Waits until something changes in the hub: polls briefly, then sleeps.
    fn wait<'a>(&'a self, s: MutexGuard<'a, HubState>) -> MutexGuard<'a, HubState> {
        let seen = self.changes.load(Ordering::Acquire);
        drop(s);
        let start = Instant::now();
        while self.changes.load(Ordering::Acquire) == seen && start.elapsed() < POLL {
            std::hint::spin_loop();
        }
        let s = self.lock();
        if self.changes.load(Ordering::Acquire) != seen {
            return s;
        }
        #[cfg(test)]
        self.sleepers.fetch_add(1, Ordering::AcqRel);
        self.ready.wait(s).unwrap_or_else(|e| e.into_inner())
    }

    fn lock(&self) -> MutexGuard<'_, HubState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Accepts a message from a reader; messages of past epochs are dropped.
    fn deliver(&self, env: Envelope) {
        let mut s = self.lock();
        if env.epoch >= s.epoch {
            s.queue.push_back(env);
            self.changes.fetch_add(1, Ordering::Release);
            drop(s);
            self.ready.notify_all();
        }
    }

    /// Starts a recovery into `epoch`: calls on communicators of older epochs
    /// fail with [`CommError::Interrupted`] from now on.
    pub fn interrupt(&self, epoch: u64) {
        let mut s = self.lock();
        if s.interrupt.is_none_or(|e| e < epoch) {
            s.interrupt = Some(epoch);
        }
        self.changes.fetch_add(1, Ordering::Release);
        drop(s);
        self.ready.notify_all();
    }

    /// Waits up to `grace` for a recovery into an epoch newer than `epoch`.
    fn await_interrupt(&self, epoch: u64, grace: Duration) -> Option<u64> {
        let s = self.lock();
        let (s, _) = self
            .ready
            .wait_timeout_while(s, grace, |s| s.interrupt.is_none_or(|e| e <= epoch))
            .unwrap_or_else(|e| e.into_inner());
        s.interrupt.filter(|e| *e > epoch)
    }

    /// Bytes of messages waiting to be received.
    #[cfg(test)]
    fn queued_bytes(&self) -> usize {
        self.lock().queue.iter().map(|m| m.data.len()).sum()
    }

    /// The epoch of the pending recovery, if one was started.
    pub fn interrupted(&self) -> Option<u64> {
        self.lock().interrupt
    }

    /// Enters `epoch`: older messages are discarded and a pending interrupt
    /// for an epoch at or below it is cleared.
    pub fn begin_epoch(&self, epoch: u64) {
        let mut s = self.lock();
        s.epoch = s.epoch.max(epoch);
        let floor = s.epoch;
        s.queue.retain(|m| m.epoch >= floor);
        if s.interrupt.is_some_and(|e| e <= floor) {
            s.interrupt = None;
        }
    }
}

/// An outgoing connection to one peer.
enum Link {
    Unix(std::os::unix::net::UnixStream),
    Tcp(std::net::TcpStream),
}

/// Makes a write to a connection whose peer died an error instead of a
/// fatal SIGPIPE, in a program that left the signal at its default (C
/// and Fortran programs; Rust programs already ignore it): a peer's death
/// is something the job recovers from. A handler the program installed
/// is left alone.
pub fn quiet_broken_pipes() {
    // SAFETY: sigaction with a zeroed struct only reads the current
    // disposition; SIG_IGN is set only where the default was.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGPIPE, std::ptr::null(), &mut old) == 0
            && old.sa_sigaction == libc::SIG_DFL
        {
            libc::signal(libc::SIGPIPE, libc::SIG_IGN);
        }
    }
}

impl Link {
    /// Connects and proves the job's secret (each attempt bounded by the
    /// handshake timeout), trying again after a pause while the listener
    /// drops the connection before the handshake is through.
    fn connect(to: &Endpoint, secret: &Secret) -> io::Result<Self> {
        let mut pauses = auth::backoff();
        loop {
            match Self::connect_once(to, secret) {
                Err(e) if auth::worth_retrying(&e) => match pauses.next() {
                    Some(pause) => std::thread::sleep(pause),
                    None => return Err(e),
                },
                other => return other,
            }
        }
    }

    fn connect_once(to: &Endpoint, secret: &Secret) -> io::Result<Self> {
        let limit = Some(auth::HANDSHAKE_TIMEOUT);
        match to {
            Endpoint::Unix(path) => {
                let mut s = std::os::unix::net::UnixStream::connect(path)?;
                s.set_read_timeout(limit)?;
                s.set_write_timeout(limit)?;
                auth::connect_blocking(&mut s, secret, Channel::Data)?;
                s.set_read_timeout(None)?;
                s.set_write_timeout(None)?;
                Ok(Link::Unix(s))
            }
            Endpoint::Tcp(addr) => {
                let mut s = std::net::TcpStream::connect_timeout(addr, auth::HANDSHAKE_TIMEOUT)?;
                s.set_nodelay(true)?;
                s.set_read_timeout(limit)?;
                s.set_write_timeout(limit)?;
                auth::connect_blocking(&mut s, secret, Channel::Data)?;
                s.set_read_timeout(None)?;
                s.set_write_timeout(None)?;
                Ok(Link::Tcp(s))
            }
        }
    }

    fn writer(&mut self) -> &mut dyn Write {
        match self {
            Link::Unix(s) => s,
            Link::Tcp(s) => s,
        }
    }
}

/// The communicator of one epoch of a multi-process job.
pub struct NetComm {
    rank: Rank,
    node: NodeId,
    epoch: u64,
    hub: Arc<Hub>,
    table: Arc<Vec<Endpoint>>,
    security: Arc<Security>,
    links: Vec<Mutex<Option<Link>>>,
    failures: Failures,
    notes: Option<CommitNotes>,
    runtime_node: Option<crate::node::RuntimeNode>,
}

/// Where a communicator passes the commits the library notes (see
/// [`Comm::note_committed`]): the runtime's record of them.
pub type CommitNotes = Arc<dyn Fn(Option<u64>) + Send + Sync>;

impl NetComm {
    /// A communicator for `epoch`, reaching rank `r` at `table[r]`.
    pub fn new(
        rank: Rank,
        node: NodeId,
        epoch: u64,
        hub: Arc<Hub>,
        table: Arc<Vec<Endpoint>>,
        security: Arc<Security>,
    ) -> Self {
        hub.begin_epoch(epoch);
        let links = table.iter().map(|_| Mutex::new(None)).collect();
        Self {
            rank,
            node,
            epoch,
            hub,
            table,
            security,
            links,
            failures: Failures::default(),
            notes: None,
            runtime_node: None,
        }
    }

    /// The same communicator, passing the commits the library notes to
    /// `notes`.
    pub fn with_commit_notes(mut self, notes: CommitNotes) -> Self {
        self.notes = Some(notes);
        self
    }

    /// The same communicator, telling the library which failures led to
    /// its epoch.
    pub fn with_failures(mut self, failures: Failures) -> Self {
        self.failures = failures;
        self
    }

    /// The same communicator, telling the library what the runtime that
    /// started the rank gave it about its node.
    pub fn with_runtime_node(mut self, node: crate::node::RuntimeNode) -> Self {
        self.runtime_node = Some(node);
        self
    }

    /// The epoch this communicator belongs to.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    fn check_interrupt(&self) -> CommResult<()> {
        match self.hub.interrupted() {
            Some(epoch) if epoch > self.epoch => Err(CommError::Interrupted { epoch }),
            _ => Ok(()),
        }
    }
}

impl Comm for NetComm {
    fn rank(&self) -> Rank {
        self.rank
    }

    fn size(&self) -> usize {
        self.table.len()
    }

    fn node(&self) -> NodeId {
        self.node
    }

    fn failures(&self) -> Failures {
        self.failures.clone()
    }

    fn place(&self) -> crate::node::NodePlace {
        crate::node::NodePlace {
            id: self.node,
            runtime: self.runtime_node.clone(),
        }
    }

    fn note_committed(&self, id: Option<u64>) {
        if let Some(notes) = &self.notes {
            notes(id);
        }
    }

    fn send_tagged(&self, dest: Rank, tag: u64, data: &[u8]) -> CommResult<()> {
        check_rank(self, dest)?;
        self.check_interrupt()?;
        let max = self.security.limits.max_message;
        if data.len() as u64 > max {
            return Err(CommError::Unsupported(format!(
                "a message of {} bytes exceeds the job's limit of {max} bytes (frame run --max-message)",
                data.len()
            )));
        }
        if dest == self.rank {
            self.hub.deliver(Envelope {
                epoch: self.epoch,
                src: self.rank,
                tag,
                data: Bytes::copy_from_slice(data),
                _budget: None,
            });
            return Ok(());
        }
        let mut link = self.links[dest].lock().unwrap_or_else(|e| e.into_inner());
        let failed = |e: io::Error| {
            tracing::debug!(dest, error = %e, "send failed");
            // Only a dead peer breaks its connection, and the runtime reacts
            // to every death with a recovery: wait for it, so that this rank
            // rolls back like the others instead of failing on its own.
            match self.hub.await_interrupt(self.epoch, PEER_GRACE) {
                Some(epoch) => CommError::Interrupted { epoch },
                None => CommError::PeerFailed { rank: dest },
            }
        };
        if link.is_none() {
            *link = Some(Link::connect(&self.table[dest], &self.security.secret).map_err(failed)?);
        }
        let result = match link.as_mut() {
            Some(l) => wire::write_frame(l.writer(), self.epoch, tag, self.rank as u32, data),
            None => Ok(()),
        };
        if let Err(e) = result {
            *link = None;
            return Err(failed(e));
        }
        Ok(())
    }

    fn recv_tagged(&self, src: Rank, tag: u64) -> CommResult<Bytes> {
        check_rank(self, src)?;
        let mut s = self.hub.lock();
        loop {
            if let Some(epoch) = s.interrupt.filter(|e| *e > self.epoch) {
                return Err(CommError::Interrupted { epoch });
            }
            let found = s
                .queue
                .iter()
                .position(|m| m.src == src && m.tag == tag && m.epoch == self.epoch);
            if let Some(m) = found.and_then(|pos| s.queue.remove(pos)) {
                return Ok(m.data);
            }
            s = self.hub.wait(s);
        }
    }
}

#[cfg(test)]
mod tests;
