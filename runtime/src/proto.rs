//! Control messages between the root, the daemons and the ranks.
//!
//! Each message is one JSON document in one frame of tokio-util's
//! [`LengthDelimitedCodec`]. The control plane carries little traffic, so
//! readability wins over compactness; the data plane between ranks is the
//! binary transport in [`frame::comm::net`].

use super::inject::Action;
use super::State;
use bytes::Bytes;
use frame::comm::net::Endpoint;
use frame::comm::FailureTopology;
use futures_util::{SinkExt, StreamExt};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::io;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::codec::{FramedRead, FramedWrite, LengthDelimitedCodec};

/// What the root tells a daemon.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) enum ToDaemon {
    /// Start these ranks (first start, or a redeployment).
    Launch {
        epoch: u64,
        ranks: Vec<u32>,
        state: State,
    },
    /// A recovery into `epoch`: roll back every local rank, start `spawn` here.
    Reinit {
        epoch: u64,
        failed: FailureTopology,
        spawn: Vec<u32>,
    },
    /// Every rank is ready in `epoch`: here is how to reach each one.
    Go(Go),
    /// A logged recovery: replace failed rank `rank` in the same epoch
    /// (the other ranks go on).
    /// With `helpers` more processes of the program on its node, to
    /// recompute with the replacement (`recovery.spares - 1`).
    Replace { epoch: u64, rank: u32, helpers: u32 },
    /// A logged recovery's replacement is ready: release it alone.
    Release { rank: u32, go: Go },
    /// Every member of the team recomputing for `rank` listens: release
    /// its helpers (parts 1 and up), with where each member listens.
    ReleaseHelpers {
        rank: u32,
        epoch: u64,
        team: Vec<Endpoint>,
    },
    /// A logged recovery of `ranks` started (`on`) or ended: the other
    /// ranks idle meanwhile.
    Idle { on: bool, ranks: Vec<u32> },
    /// Kill (or stop) this rank (time-triggered fault injection).
    Kill { rank: u32, action: Action },
    /// Kill (or stop) the whole node: its ranks, its manager and the daemon
    /// (a fault injection on a node that is another host).
    Die { action: Action },
    /// Every rank finished: let them exit.
    Finish,
    /// Stop: kill every local rank and exit.
    Shutdown,
    /// The answer to rank `rank`'s `Ending`: `None` when the job ends
    /// well and the rank may remove its checkpoints, or why it must not.
    EndConfirmed { rank: u32, refused: Option<String> },
    /// The root heard heartbeat `beat`: the daemon's lease runs until `ms`
    /// milliseconds after it sent that heartbeat (by its own clock), and
    /// the root declares the node dead no sooner than that (see
    /// `root::control::liveness`).
    Lease { beat: u64, ms: u64 },
}

/// The release of the world barrier of an epoch.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Go {
    pub epoch: u64,
    /// Where every rank listens: the root sends daemons the whole table,
    /// a daemon sends a rank that holds its last table only what changed.
    pub table: Table,
    /// Node of each rank.
    pub nodes: Vec<u32>,
    /// The ranks and nodes the recovery that led to this epoch lost.
    pub failed: FailureTopology,
    /// Injections that already fired (never fire again).
    pub fired: Vec<u32>,
    /// The newest checkpoint the ranks reported committed, if any (see
    /// [`frame::comm::RuntimeLink::note_committed`]).
    pub committed: Option<u64>,
    /// The rank released replaces a failed one while the others go on
    /// (a logged recovery).
    #[serde(default)]
    pub rejoin: bool,
    /// The helpers that recompute with this replacement: where each
    /// listens, part 1 first (empty without helpers).
    #[serde(default)]
    pub helpers: Vec<Endpoint>,
    /// The rank released replaces one of a node that died, on a spare
    /// node that takes the failed one's place (a logged recovery of a node
    /// failure).
    #[serde(default)]
    pub stand_in: Option<Box<frame::comm::StandIn>>,
    /// Every failed node a spare node stood in for in a logged recovery
    /// so far, and that spare (see [`frame::comm::RecoveryContext::stood_in`]).
    #[serde(default)]
    pub stood_in: std::collections::BTreeMap<u32, u32>,
}

/// Where each rank listens, as a release carries it. A job's table
/// lists every rank, and most recoveries change one entry: a daemon sends
/// the ranks that hold the table it sent them last only the changes, so
/// no survivor decodes the whole table again.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) enum Table {
    /// Rank `r` listens at entry `r`.
    Full(Vec<Endpoint>),
    /// The entries that changed since the table the daemon sent last
    /// (rank, where it listens now).
    Changed(Vec<(u32, Endpoint)>),
}

impl Table {
    /// The table after this update of `held` (the receiver's last);
    /// `None` when changes come without a table or name a rank past its
    /// end.
    pub(crate) fn apply(self, held: Option<&Arc<Vec<Endpoint>>>) -> Option<Arc<Vec<Endpoint>>> {
        match self {
            Table::Full(all) => Some(Arc::new(all)),
            Table::Changed(changes) if changes.is_empty() => held.cloned(),
            Table::Changed(changes) => {
                let mut table = held?.as_ref().clone();
                for (rank, endpoint) in changes {
                    *table.get_mut(rank as usize)? = endpoint;
                }
                Some(Arc::new(table))
            }
        }
    }

    /// The changes that turn `old` into `new` (`None` when they list
    /// different ranks).
    pub(crate) fn changes(old: &[Endpoint], new: &[Endpoint]) -> Option<Vec<(u32, Endpoint)>> {
        (old.len() == new.len()).then(|| {
            (old.iter().zip(new).enumerate())
                .filter(|(_, (o, n))| o != n)
                .map(|(rank, (_, n))| (rank as u32, n.clone()))
                .collect()
        })
    }
}

/// What a daemon tells the root.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) enum ToRoot {
    /// First message on the connection, with the ticket of the daemon's
    /// start (from its spec).
    /// With where the managers of other nodes reach this node's manager.
    Hello {
        node: u32,
        pid: u32,
        ticket: u64,
        #[serde(default)]
        manager: Option<Endpoint>,
    },
    /// A rank process was started (or a standby assigned) at this time.
    Spawned { rank: u32, epoch: u64, at_ns: u64 },
    /// A rank is rolled back or started and listening, waiting for `Go`.
    Ready {
        rank: u32,
        epoch: u64,
        endpoint: Endpoint,
    },
    /// A rank's resilient function returned in `epoch`.
    Done { rank: u32, epoch: u64 },
    /// A rank fired injection `injection` (it is about to die).
    Fired { injection: u32 },
    /// A process of the program ended, or was killed for missing its
    /// deadline, without ever joining the runtime: the program does not run
    /// the resilient function, so the job cannot go on.
    NeverJoined {
        /// The rank it was started as (`None` for a standby process).
        rank: Option<u32>,
        how: String,
    },
    /// A rank process died unexpectedly.
    Failed {
        rank: u32,
        /// Epoch in which this process was started (stale reports are ignored).
        incarnation: u64,
        how: String,
        at_ns: u64,
    },
    /// A rank gave up with an application error: the job must stop.
    Aborted { rank: u32, reason: String },
    /// A rank exited cleanly after `Finish`.
    Exited { rank: u32 },
    /// Rank `rank` cannot reach rank `peer` in `epoch`: the network lost
    /// it, while both may still be alive (see `root::control::partition`).
    Unreachable { rank: u32, epoch: u64, peer: u32 },
    /// Rank `rank` reached the end of the job in `epoch` and asks whether
    /// it may remove the job's checkpoints (answered by `EndConfirmed`).
    Ending { rank: u32, epoch: u64 },
    /// The daemon is alive; the slowest of its ranks reached this iteration.
    Heartbeat {
        progress: Option<u64>,
        /// Numbers the daemon's heartbeats; the root's lease names it.
        #[serde(default)]
        beat: u64,
    },
    /// A rank reported checkpoint `id` committed on every rank (`None`:
    /// the job is removing its checkpoints at its end).
    Committed { id: Option<u64> },
    /// A rank idled this long (wall and CPU time, milliseconds) during
    /// the last logged recovery.
    Idled {
        rank: u32,
        wall_ms: f64,
        cpu_ms: f64,
    },
    /// A rank cannot feed a logged recovery's replacement: the job must
    /// restart globally.
    Fallback {
        rank: u32,
        epoch: u64,
        reason: String,
    },
    /// Member `part` of the team recomputing for `rank` listens for the
    /// team's messages at `endpoint` (part 0 is the replacement).
    Teamed {
        rank: u32,
        epoch: u64,
        part: u32,
        endpoint: Endpoint,
    },
    /// Rank `rank` sent rank `to`'s replacement what it had lost.
    Replayed {
        rank: u32,
        to: u32,
        messages: u64,
        bytes: u64,
        log_bytes: u64,
    },
    /// A helper of `rank`'s replacement finished (wall and CPU time of
    /// its process, milliseconds, from its start as a helper).
    Helped {
        rank: u32,
        part: u32,
        wall_ms: f64,
        cpu_ms: f64,
    },
}

/// What a daemon tells one of its ranks.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) enum ToRank {
    /// The world barrier of an epoch passed.
    Go { go: Go },
    /// Roll back: a recovery into `epoch` started.
    Reinit { epoch: u64 },
    /// (To a standby process) become rank `rank`, joining `epoch`.
    Assign { rank: u32, epoch: u64 },
    /// (To a standby process) become helper `part` of the team of `parts`
    /// processes recomputing failed rank `rank` with its replacement.
    Help {
        rank: u32,
        epoch: u64,
        part: u32,
        parts: u32,
    },
    /// (To a helper) the team's members listen here, part 0 first: go.
    TeamGo { team: Vec<Endpoint> },
    /// Another rank's logged recovery started (`true`) or ended.
    Idle { on: bool },
    /// The job is over: exit.
    Finish,
    /// A message was written to the daemon (reply to a flush request).
    Flushed,
    /// The root's answer to `Ending` (see `ToDaemon::EndConfirmed`).
    EndConfirmed { refused: Option<String> },
    /// The rank may live on for `ms` milliseconds from now without
    /// another lease: past it, its daemon (or the daemon's root) may be
    /// gone or cut off, and the rank ends itself. Sent with every beat of
    /// the daemon, for the rest of the daemon's own lease.
    Lease { ms: u64 },
}

/// What a rank tells its daemon.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) enum FromRank {
    /// First message on the connection; `epoch` is the one it was started
    /// in. A standby process has no rank yet.
    Hello {
        rank: Option<u32>,
        pid: u32,
        epoch: u64,
    },
    /// Listening at `endpoint`, waiting for the `Go` of `epoch`.
    Ready { epoch: u64, endpoint: Endpoint },
    /// The resilient function returned in `epoch`.
    Done { epoch: u64 },
    /// The program reached the end in `epoch`: may it remove the job's
    /// checkpoints? (answered by `EndConfirmed`)
    Ending { epoch: u64 },
    /// About to die from injection `injection`; answer `Flushed` once forwarded.
    Fired { injection: u32 },
    /// Giving up with an application error.
    Abort { reason: String },
    /// The rank is alive (sent by its agent, whatever the program does);
    /// the program last called `fault_point` with this iteration.
    Alive { progress: Option<u64> },
    /// Checkpoint `id` committed on every rank (`None`: the job is removing
    /// its checkpoints at its end; answer `Flushed` once forwarded).
    Committed { id: Option<u64> },
    /// The network lost rank `peer` in `epoch`: its connection went
    /// unanswered (see `frame::comm::net::LostPeers`).
    Unreachable { epoch: u64, peer: u32 },
    /// This rank cannot feed a logged recovery's replacement (its log
    /// cannot replay what it must): a global restart is needed.
    Fallback { epoch: u64, reason: String },
    /// This rank idled this long while another rank's logged recovery ran.
    Idled { wall_ms: f64, cpu_ms: f64 },
    /// This rank sent rank `to`'s replacement what it had lost.
    Replayed {
        to: u32,
        messages: u64,
        bytes: u64,
        log_bytes: u64,
    },
    /// This replacement or helper listens for its team's messages here.
    Teamed {
        epoch: u64,
        part: u32,
        endpoint: Endpoint,
    },
    /// This helper finished its part (wall and CPU time since it began
    /// helping).
    Helped { wall_ms: f64, cpu_ms: f64 },
}

/// Longest a control message may wait for its peer to read.
const SEND_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// The codec of every control connection. Control messages are small (the
/// largest, the release of a barrier, lists every rank's address), and all
/// come from peers that passed the job's handshake; the cap bounds what a
/// broken one can make us allocate.
fn codec() -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder()
        .max_frame_length(16 << 20)
        .new_codec()
}

/// Sends JSON messages on a control connection.
pub(crate) struct Sender<W> {
    inner: FramedWrite<W, LengthDelimitedCodec>,
}

impl<W: AsyncWrite + Unpin> Sender<W> {
    pub(crate) fn new(w: W) -> Self {
        Self {
            inner: FramedWrite::new(w, codec()),
        }
    }

    /// Sends one message. A peer that does not drain its connection within
    /// [`SEND_TIMEOUT`] is treated as gone rather than stalling the sender.
    pub(crate) async fn send<T: Serialize>(&mut self, msg: &T) -> io::Result<()> {
        self.send_encoded(encode(msg)?).await
    }

    /// Sends one message [`encode`]d before: a message that goes to many
    /// peers (the release of a barrier lists every rank) is encoded once.
    pub(crate) async fn send_encoded(&mut self, bytes: Bytes) -> io::Result<()> {
        tokio::time::timeout(SEND_TIMEOUT, self.inner.send(bytes))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "peer stopped reading"))?
    }
}

/// A message as a control connection carries it (see [`Sender::send_encoded`]).
pub(crate) fn encode<T: Serialize>(msg: &T) -> io::Result<Bytes> {
    serde_json::to_vec(msg)
        .map(Bytes::from)
        .map_err(io::Error::other)
}

/// Receives JSON messages from a control connection.
pub(crate) struct Receiver<R> {
    inner: FramedRead<R, LengthDelimitedCodec>,
}

impl<R: AsyncRead + Unpin> Receiver<R> {
    pub(crate) fn new(r: R) -> Self {
        Self {
            inner: FramedRead::new(r, codec()),
        }
    }

    /// The next message, or `None` when the peer closed the connection.
    pub(crate) async fn next<T: DeserializeOwned>(&mut self) -> io::Result<Option<T>> {
        match self.inner.next().await {
            None => Ok(None),
            Some(frame) => serde_json::from_slice(&frame?)
                .map(Some)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e)),
        }
    }
}

pub(crate) use frame::metrics::now_ns;

#[cfg(test)]
mod tests;
