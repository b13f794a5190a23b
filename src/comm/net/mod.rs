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
//!
//! A communicator may also log what it sends ([`NetComm::with_journal`],
//! for localised recovery): its messages then carry their number towards
//! each destination, a hub drops a number it already has from that sender
//! (the messages a recomputing replacement sends again), and
//! [`NetComm::replay_to`] sends a replacement what it had been sent since
//! the last committed checkpoint (a replacement asks for it itself, see
//! `rejoin.rs`). A logging communicator does not stop at a dead peer: its
//! messages stay in the log for the replacement.

mod hub;
mod journal;
mod link;
mod listen;
mod lost;
mod rejoin;
mod wire;

use hub::Envelope;
pub use hub::Hub;
pub use journal::Unreplayable;
use link::Link;
pub use link::Links;
pub use listen::bind_private;
pub use listen::{listen, Bind};
pub use lost::LostPeers;
pub use rejoin::{Fallback, Replay, ReplayNotes};

use super::{
    check_rank, Bytes, Comm, CommError, CommResult, MessageCounts, NodeId, Rank, RecoveryContext,
    RuntimeLink,
};
use crate::auth::Secret;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

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

/// What every connection of a job shares: the secret it proves, the caps,
/// and how long a peer may stay silent.
#[derive(Clone, Debug)]
pub struct Security {
    /// The job's secret.
    pub secret: Secret,
    /// Caps on frames and queues.
    pub limits: Limits,
    /// How long a peer on another host may leave bytes sent to it, or
    /// keepalive probes of an idle connection, unanswered before the
    /// network counts as having lost it (see [`LostPeers`]).
    pub lost_after: Duration,
}

/// [`Security::lost_after`] of [`Security::generate`].
pub const LOST_AFTER: Duration = Duration::from_secs(10);

impl Security {
    /// Security with a fresh random secret and default limits (for a job
    /// whose ranks are all set up by the caller, as in tests and benches).
    pub fn generate() -> std::io::Result<Arc<Self>> {
        Ok(Arc::new(Self {
            secret: Secret::generate()?,
            limits: Limits::default(),
            lost_after: LOST_AFTER,
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

/// The communicator of one epoch of a multi-process job.
pub struct NetComm {
    rank: Rank,
    node: NodeId,
    epoch: u64,
    hub: Arc<Hub>,
    security: Arc<Security>,
    peers: Vec<Mutex<Peer>>,
    journal: Option<Mutex<Logged>>,
    recovery: RecoveryContext,
    notes: Option<CommitNotes>,
    end: Option<EndConfirm>,
    runtime_node: Option<crate::node::RuntimeNode>,
    /// Where this rank listens (sent with a replacement's requests).
    endpoint: Option<Endpoint>,
    fallback: Option<Fallback>,
    replay_notes: Option<ReplayNotes>,
    /// Node managers that moved, as replacements on a spare node said.
    moved: Mutex<std::collections::BTreeMap<u32, Endpoint>>,
    /// Where peers the network lost are reported, and those reported.
    lost: Option<LostPeers>,
    reported: Mutex<std::collections::BTreeSet<Rank>>,
    /// Where its connections go when it is dropped (see [`Links`]).
    links: Option<Arc<Links>>,
}

/// Where a rank is reached, and the connection to it once opened.
struct Peer {
    endpoint: Endpoint,
    link: Option<Link>,
    /// Its connection broke while this communicator logs: messages to it
    /// only go to the log until its replacement asks for them.
    down: bool,
    /// `link` came from the previous communicator and has not carried a
    /// message of this one yet (a write that fails on it connects anew).
    reused: bool,
}

/// A logging communicator's log, and the number of the last message the
/// program received from each rank.
struct Logged {
    journal: journal::Journal,
    consumed: Vec<u64>,
}

/// Where a communicator passes the commits the library notes (see
/// [`RuntimeLink::note_committed`]): the runtime's record of them.
pub type CommitNotes = Arc<dyn Fn(Option<u64>) + Send + Sync>;

/// Where a communicator asks whether the job ends well (see
/// [`RuntimeLink::confirm_end`]): the runtime's root.
pub type EndConfirm = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

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
        let peers = table
            .iter()
            .map(|endpoint| {
                Mutex::new(Peer {
                    endpoint: endpoint.clone(),
                    link: None,
                    down: false,
                    reused: false,
                })
            })
            .collect();
        Self {
            rank,
            node,
            epoch,
            hub,
            security,
            peers,
            journal: None,
            recovery: RecoveryContext::default(),
            notes: None,
            end: None,
            runtime_node: None,
            endpoint: None,
            fallback: None,
            replay_notes: None,
            moved: Mutex::default(),
            lost: None,
            reported: Mutex::default(),
            links: None,
        }
    }

    /// The same communicator, reporting each peer the network lost (once)
    /// to `lost` before it waits for the runtime's recovery.
    pub fn with_lost_peers(mut self, lost: LostPeers) -> Self {
        self.lost = Some(lost);
        self
    }

    fn was_reported(&self, peer: Rank) -> bool {
        self.reported
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&peer)
    }

    /// Tells the runtime, once, that the network lost `peer`.
    fn report_lost(&self, peer: Rank) {
        let first = self
            .reported
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(peer);
        if first {
            tracing::warn!(
                "rank {} cannot reach rank {peer}: the network lost it",
                self.rank
            );
            if let Some(lost) = &self.lost {
                lost(peer);
            }
        }
    }

    /// The same communicator, passing the commits the library notes to
    /// `notes`.
    pub fn with_commit_notes(mut self, notes: CommitNotes) -> Self {
        self.notes = Some(notes);
        self
    }

    /// The same communicator, asking `end` whether the job ends well
    /// before the library removes its checkpoints.
    pub fn with_end_confirm(mut self, end: EndConfirm) -> Self {
        self.end = Some(end);
        self
    }

    /// The same communicator, telling the library which failures led to
    /// its epoch.
    pub fn with_recovery(mut self, recovery: RecoveryContext) -> Self {
        self.recovery = recovery;
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

    /// The same communicator, logging every message it sends to another
    /// rank (up to `limit` bytes of payload per window, see
    /// [`Unreplayable::Overflowed`]) and numbering them; a commit the
    /// library notes starts a new window.
    pub fn with_journal(mut self, limit: u64) -> Self {
        self.journal = Some(Mutex::new(Logged {
            journal: journal::Journal::new(self.peers.len(), limit),
            consumed: vec![0; self.peers.len()],
        }));
        self
    }

    fn logged(&self) -> Option<MutexGuard<'_, Logged>> {
        self.journal
            .as_ref()
            .map(|j| j.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Bytes of payload the log holds.
    pub fn journal_bytes(&self) -> u64 {
        self.logged().map_or(0, |l| l.journal.held())
    }

    /// From now on, reaches rank `rank` at `endpoint` (its replacement).
    pub fn replace_peer(&self, rank: Rank, endpoint: Endpoint) -> CommResult<()> {
        check_rank(self, rank)?;
        *self.peer(rank) = Peer {
            endpoint,
            link: None,
            down: false,
            reused: false,
        };
        Ok(())
    }

    /// Sends rank `dest` again, in order and with their numbers, the logged
    /// messages numbered after `after` (the last it received before the
    /// checkpoint it was restored from); how many and how many bytes of
    /// payload, or why they cannot be.
    pub fn replay_to(
        &self,
        dest: Rank,
        after: u64,
    ) -> CommResult<Result<(usize, u64), Unreplayable>> {
        check_rank(self, dest)?;
        let entries = match self.logged().map(|l| l.journal.replay(dest, after)) {
            None => return Ok(Ok((0, 0))),
            Some(Err(e)) => return Ok(Err(e)),
            Some(Ok(entries)) => entries,
        };
        let mut bytes = 0;
        for e in &entries {
            self.write_to(dest, e.tag, e.seq, &e.data)?;
            bytes += e.data.len() as u64;
        }
        Ok(Ok((entries.len(), bytes)))
    }

    fn peer(&self, rank: Rank) -> MutexGuard<'_, Peer> {
        self.peers[rank].lock().unwrap_or_else(|e| e.into_inner())
    }

    fn check_interrupt(&self) -> CommResult<()> {
        match self.hub.interrupted() {
            Some(epoch) if epoch > self.epoch => Err(CommError::Interrupted { epoch }),
            _ => Ok(()),
        }
    }
}

/// The runtime's side of a rank: what the runtime handed it at its start
/// and the calls that reach the runtime (through the callbacks it set).
impl RuntimeLink for NetComm {
    fn recovery(&self) -> RecoveryContext {
        self.recovery.clone()
    }

    fn recovery_watch(&self) -> crate::comm::RecoveryWatch {
        let hub = Arc::clone(&self.hub);
        let epoch = self.epoch;
        crate::comm::RecoveryWatch::new(move || hub.interrupted().filter(|e| *e > epoch))
    }

    fn runtime_node(&self) -> Option<crate::node::RuntimeNode> {
        self.runtime_node.clone()
    }

    /// `None` also while a message received is followed by an earlier
    /// one from the same rank not yet received.
    fn message_counts(&self) -> Option<MessageCounts> {
        let mut logged = self.logged()?;
        logged.journal.mark();
        let s = self.hub.lock();
        let behind = s.queue.iter().any(|m| {
            m.epoch == self.epoch
                && m.seq != 0
                && logged.consumed.get(m.src).is_some_and(|c| m.seq < *c)
        });
        if behind {
            return None;
        }
        Some(MessageCounts {
            window: logged.journal.window(),
            sent: logged.journal.sent(),
            received: logged.consumed.clone(),
        })
    }

    fn resume_messages(&self, counts: &MessageCounts) {
        if let Some(mut logged) = self.logged() {
            logged.journal.resume(counts.window, &counts.sent);
            for (c, r) in logged.consumed.iter_mut().zip(&counts.received) {
                *c = *r;
            }
            drop(logged);
            self.request_replays(counts);
        }
    }

    fn fall_back(&self, reason: &str) -> Option<CommError> {
        self.give_up(reason)
    }

    fn moved_managers(&self) -> std::collections::BTreeMap<u32, Endpoint> {
        self.moved.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn note_committed(&self, id: Option<u64>) {
        if let (Some(id), Some(mut logged)) = (id, self.logged()) {
            logged.journal.open_window(id);
        }
        if let Some(notes) = &self.notes {
            notes(id);
        }
    }

    fn confirm_end(&self) -> Result<(), String> {
        match &self.end {
            Some(end) => end(),
            None => Ok(()),
        }
    }
}

impl Comm for NetComm {
    fn rank(&self) -> Rank {
        self.rank
    }

    fn size(&self) -> usize {
        self.peers.len()
    }

    fn node(&self) -> NodeId {
        self.node
    }

    fn link(&self) -> &dyn RuntimeLink {
        self
    }

    fn send_tagged(&self, dest: Rank, tag: u64, data: &[u8]) -> CommResult<()> {
        check_rank(self, dest)?;
        self.check_interrupt()?;
        if self.journal.is_some() {
            self.serve_requests()?;
        }
        if tag == rejoin::REQUEST_TAG {
            return Err(CommError::Unsupported(format!(
                "tag {tag} is reserved by frame for replacements' requests"
            )));
        }
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
                seq: 0,
                data: Bytes::copy_from_slice(data),
                _budget: None,
            });
            return Ok(());
        }
        let seq = self
            .logged()
            .map_or(0, |mut l| l.journal.record(dest, tag, data));
        self.write_to(dest, tag, seq, data)
    }

    fn recv_tagged(&self, src: Rank, tag: u64) -> CommResult<Bytes> {
        check_rank(self, src)?;
        let mut s = self.hub.lock();
        loop {
            if let Some(epoch) = s.interrupt.filter(|e| *e > self.epoch) {
                return Err(CommError::Interrupted { epoch });
            }
            if !s.requests.is_empty() {
                if self.journal.is_none() {
                    // Nothing to replay from: a request is no concern here.
                    s.requests.clear();
                    continue;
                }
                drop(s);
                self.serve_requests()?;
                s = self.hub.lock();
                continue;
            }
            if s.lost.contains(&(src, self.epoch)) {
                if self.journal.is_none() {
                    drop(s);
                    self.report_lost(src);
                    // As for a peer that died: the recovery the runtime
                    // starts, or the peer's failure.
                    return Err(match self.hub.await_interrupt(self.epoch, PEER_GRACE) {
                        Some(epoch) => CommError::Interrupted { epoch },
                        None => CommError::PeerFailed { rank: src },
                    });
                }
                if !self.was_reported(src) {
                    // A logging communicator waits for the replacement.
                    drop(s);
                    self.report_lost(src);
                    s = self.hub.lock();
                    continue;
                }
            }
            let found = s
                .queue
                .iter()
                .position(|m| m.src == src && m.tag == tag && m.epoch == self.epoch);
            if let Some(m) = found.and_then(|pos| s.queue.remove(pos)) {
                drop(s);
                if m.seq != 0 {
                    if let Some(mut l) = self.logged() {
                        if let Some(c) = l.consumed.get_mut(src) {
                            *c = (*c).max(m.seq);
                        }
                    }
                }
                return Ok(m.data);
            }
            s = self.hub.wait(s);
        }
    }
}

#[cfg(test)]
mod tests;
