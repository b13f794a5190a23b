//! Promotion to levels 2 to 4 as the ranks see them: when a checkpoint is promoted, who
//! asks the node's manager, and when a level counts as committed.
//!
//! All decisions here are collective and identical on every rank: the
//! schedule counts checkpoints (or agrees on elapsed time), the set of
//! promotions in flight is the same everywhere, and a promotion commits at a
//! level only when every node's manager reports it durable (one all-reduce
//! of their answers, taken at the next checkpoint). Only the lowest rank of
//! each node talks to the manager.

use crate::auth::Secret;
use crate::comm::net::Endpoint;
use crate::comm::{agree_on_problems, Comm, ReduceOp};
use crate::config::{Config, Interval};
use crate::error::{problems, Error, Result};
use crate::level::{L4Write, Level};
use crate::manager::{Client, Link, Manager, Reply, Request, Task};
use crate::node::NodePlace;
use crate::scheme;
use crate::topology::Topology;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

mod calls;
mod settle;
pub(crate) mod state;

/// The levels above 1, in order.
pub(crate) const HIGHER: [Level; 3] = [Level::L2, Level::L3, Level::L4];

/// A promotion not yet known to have committed or failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct InFlight {
    id: u64,
    stamp: u64,
    level: Level,
}

/// The ranks' side of levels 2 to 4.
pub(crate) struct Promotions {
    cfg: Config,
    rank: u32,
    leader: bool,
    placement: Vec<u32>,
    peers: BTreeMap<u32, Endpoint>,
    /// The node's manager, on the node's lowest rank.
    client: Option<Client>,
    /// The job's secret (to reconnect to a restarted manager).
    secret: Secret,
    /// The manager could not be reached again within a few seconds (see
    /// `calls.rs`).
    manager_away: bool,
    /// The last call to the manager failed (or was given up for a
    /// recovery): its connection is not used again, the next call makes
    /// a new one.
    stale: bool,
    /// Says when a recovery started, so that a call to the manager stops
    /// waiting for it.
    watch: crate::comm::RecoveryWatch,
    /// Keeps an inline manager running while this rank uses it.
    _manager: Option<Arc<Manager>>,
    /// Checkpoints since each level's last promotion.
    counts: [u64; 3],
    /// When each level was last promoted.
    since: [Instant; 3],
    in_flight: Vec<InFlight>,
    /// The newest checkpoint committed at each level, as far as known.
    newest_committed: BTreeMap<Level, u64>,
    /// For levels whose interval is automatic: promote every this many
    /// checkpoints (set by [`Promotions::set_auto`]).
    auto_every: [u64; 3],
    /// The round of the last level-3 promotion asked (see
    /// [`Task::round`]).
    round: u64,
    /// The run and epoch of the ranks, under a runtime (see
    /// [`Task::fence`]).
    pub(super) fence: Option<crate::level::Fence>,
    /// The managers' answers sampled before the checkpoint being written
    /// (see [`Promotions::sample_status`]).
    sample: Option<state::Sample>,
    /// A replacement goes through a commit again (localised recovery):
    /// its promotions were asked of the managers already.
    replaying: bool,
}

/// Whether any level above 1 is configured.
pub(crate) fn enabled(cfg: &Config) -> bool {
    HIGHER.iter().any(|l| !cfg.level_interval(*l).is_zero())
}

/// The job's secret: the runtime's, or one made by rank 0 and sent to all.
fn job_secret(comm: &dyn Comm, place: &NodePlace) -> Result<Secret> {
    if let Some(node) = &place.runtime {
        return Ok(node.secret.clone());
    }
    let mut hex = if comm.rank() == 0 {
        Secret::generate()
            .map(|s| s.to_hex().into_bytes())
            .unwrap_or_default()
    } else {
        Vec::new()
    };
    comm.broadcast(&mut hex, 0)?;
    Secret::from_hex(&String::from_utf8_lossy(&hex)).ok_or_else(|| Error::Init {
        problems: problems(vec![(0, "could not make the job's secret".into())]),
    })
}

fn index(level: Level) -> usize {
    level.number() as usize - 2
}

/// The run and epoch a communicator's writes belong to, under a runtime
/// that launched its run (none otherwise).
pub(super) fn fence_of(comm: &dyn Comm) -> Option<crate::level::Fence> {
    let f = comm.link().recovery();
    (f.launch > 0).then_some(crate::level::Fence {
        launch: f.launch,
        epoch: f.epoch,
    })
}

impl Promotions {
    /// Finds every rank's node, starts (or finds, or with `link` connects
    /// to) each node's manager and tells every rank where they are.
    /// Collective; `link` is given on every rank or on none.
    pub(crate) fn init(cfg: &Config, comm: &dyn Comm, link: Option<&Link>) -> Result<Self> {
        // Managers are reached over sockets: a dead one is an error here.
        crate::comm::net::quiet_broken_pipes();
        let place = crate::comm::place(comm);
        let secret = match link {
            Some(l) => l.secret.clone(),
            None => job_secret(comm, &place)?,
        };
        // Every rank's node, and its wall clock in microseconds: level 3's
        // rounds start above the highest (see `promote`).
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64);
        let (placement, first_round) = placement_and_clock(comm, now)?;
        let rank = comm.rank() as u32;
        let node = comm.node();
        let leader = placement.iter().position(|n| *n == node) == Some(rank as usize);
        let mut manager = None;
        let mut client = None;
        let mut local: Option<String> = None;
        // A level that cannot be used is the program's error now, not a
        // failed promotion in the metrics file later.
        if leader && !cfg.l4.interval.is_zero() {
            if let Err(e) =
                crate::level::GlobalStore::check_usable(&cfg.storage.global_dir, &cfg.job.id)
            {
                local = Some(format!("level 4 cannot use storage.global_dir: {e}"));
            }
        }
        // Under a runtime, the job's run and epoch fence its level-4
        // directory: the recovered ranks move it forward before anything
        // of the new epoch is written (see `level::global::fence`).
        // The agreement below keeps every rank from writing before it.
        let fence = fence_of(comm);
        if let (0, None, false, Some(f)) = (rank, &local, cfg.l4.interval.is_zero(), fence) {
            let moved = crate::level::GlobalStore::open(
                &cfg.storage.global_dir,
                &cfg.job.id,
                crate::safefs::crash::ANYONE,
            )
            .and_then(|s| s.advance_fence(f));
            if let Err(e) = moved {
                local = Some(format!("level 4: {e}"));
            }
        }
        let watch = comm.link().recovery_watch();
        if leader && local.is_none() {
            match calls::connect_manager(cfg, &place, &secret, link, &watch) {
                Ok((m, c)) => {
                    manager = m;
                    client = Some(c);
                }
                Err(e) => local = Some(format!("cannot reach the manager of node {node}: {e}")),
            }
        }
        let trouble = agree_on_problems(comm, local.as_deref())?;
        if !trouble.is_empty() {
            return Err(Error::Init {
                problems: problems(trouble),
            });
        }
        // Other nodes reach the manager where the runtime says they do (its
        // TCP port when the job spans hosts), else where this rank did.
        let peer = place
            .runtime
            .as_ref()
            .and_then(|r| r.manager_peer)
            .map(Endpoint::Tcp);
        let mine = match (&client, peer) {
            (Some(_), Some(e)) => serde_json::to_vec(&e).unwrap_or_default(),
            (Some(c), None) => serde_json::to_vec(c.endpoint()).unwrap_or_default(),
            (None, _) => Vec::new(),
        };
        let mut peers = BTreeMap::new();
        for (r, bytes) in comm.all_gather(&mine)?.iter().enumerate() {
            if let Ok(e) = serde_json::from_slice::<Endpoint>(bytes) {
                peers.insert(placement[r], e);
            }
        }
        let now = Instant::now();
        Ok(Self {
            cfg: cfg.clone(),
            rank,
            leader,
            placement,
            peers,
            client,
            secret,
            manager_away: false,
            stale: false,
            watch,
            auto_every: [1; 3],
            round: first_round,
            fence,
            replaying: false,
            _manager: manager,
            counts: [0; 3],
            since: [now; 3],
            in_flight: Vec::new(),
            newest_committed: BTreeMap::new(),
            sample: None,
        })
    }

    /// The topology of the current placement.
    pub(crate) fn topology(&self) -> Option<Topology> {
        Topology::new(self.placement.clone()).ok()
    }

    /// Whether this rank is the lowest of its node (the one that talks to
    /// the node's manager).
    pub(crate) fn is_leader(&self) -> bool {
        self.leader
    }

    /// After checkpoint `id` committed at level 1: learns which earlier
    /// promotions committed, then promotes `id` to the levels that are due
    /// (or to `forced`). Collective.
    ///
    /// `blob_len` is the length of this rank's record and file (level 3
    /// sizes its pieces from every node's total). Returns the levels asked.
    pub(crate) fn after_commit(
        &mut self,
        comm: &dyn Comm,
        id: u64,
        stamp: u64,
        blob_len: u64,
        forced: Option<Level>,
    ) -> Result<Vec<Level>> {
        self.settle(comm)?;
        let due = self.due(comm, forced)?;
        self.promote(comm, id, stamp, blob_len, &due)?;
        Ok(due)
    }

    /// Whether a replacement is going through a commit again (see
    /// `rejoin.rs`): its promotions are counted, not asked again.
    pub(crate) fn set_replaying(&mut self, on: bool) {
        self.replaying = on;
    }

    /// The newest checkpoint `level` committed in this run (0 for none).
    pub(crate) fn newest_committed(&self, level: Level) -> u64 {
        self.newest_committed.get(&level).copied().unwrap_or(0)
    }

    /// Sets how often the automatic levels are promoted.
    pub(crate) fn set_auto(&mut self, every: &[(Level, u64)]) {
        for (level, k) in every {
            if *level != Level::L1 {
                self.auto_every[index(*level)] = (*k).max(1);
            }
        }
    }

    /// Whether the next commit may promote its checkpoint above level 1
    /// ([`due`](Self::due) may name a level): one is forced, the count of
    /// checkpoints of one reaches its interval with this one, or one is
    /// timed by the clock (which the ranks agree on only at the commit).
    /// Changes nothing.
    pub(crate) fn may_promote(&self, forced: Option<Level>) -> bool {
        forced.is_some()
            || HIGHER.iter().any(|&level| {
                let i = index(level);
                match self.cfg.level_interval(level) {
                    Interval::Calls(0) => false,
                    Interval::Calls(n) => self.counts[i] + 1 >= n,
                    Interval::Every(_) => true,
                    Interval::Auto => self.counts[i] + 1 >= self.auto_every[i],
                }
            })
    }

    /// Which levels are due now (and restarts their counts).
    fn due(&mut self, comm: &dyn Comm, forced: Option<Level>) -> Result<Vec<Level>> {
        let timed = HIGHER
            .iter()
            .any(|l| matches!(self.cfg.level_interval(*l), Interval::Every(_)));
        let mut elapsed = [0u64; 3];
        if timed {
            for (i, e) in elapsed.iter_mut().enumerate() {
                *e = self.since[i].elapsed().as_micros() as u64;
            }
            comm.all_reduce_u64(&mut elapsed, ReduceOp::Max)?;
        }
        let mut due = Vec::new();
        for level in HIGHER {
            let i = index(level);
            self.counts[i] += 1;
            let now = match self.cfg.level_interval(level) {
                _ if forced == Some(level) => true,
                Interval::Calls(0) => false,
                Interval::Calls(n) => self.counts[i] >= n,
                Interval::Every(d) => elapsed[i] >= d.as_micros() as u64,
                Interval::Auto => self.counts[i] >= self.auto_every[i],
            };
            if now {
                self.counts[i] = 0;
                self.since[i] = Instant::now();
                due.push(level);
            }
        }
        Ok(due)
    }

    /// Asks the node's manager to promote `id` to `levels` (lowest rank of
    /// each node), and counts the promotions in flight (every rank).
    /// Collective when `levels` holds level 3 (the nodes' blob lengths are
    /// gathered).
    pub(crate) fn promote(
        &mut self,
        comm: &dyn Comm,
        id: u64,
        stamp: u64,
        blob_len: u64,
        levels: &[Level],
    ) -> Result<()> {
        if levels.is_empty() {
            return Ok(());
        }
        let mut blob_lens = BTreeMap::new();
        if levels.contains(&Level::L3) {
            // Every rank's blob length. The round is the next one: the
            // first above every rank's clock when these promotions were
            // set up (a promotion after a recovery, asked by checkpointers
            // made anew, some in new processes, has a higher round than
            // any before it, as long as no clock stepped back by more
            // than the time between the two; if one did, the managers
            // refuse the newer round as superseded and the level keeps
            // its previous checkpoint), then one more each time: the same
            // on every rank, and on a replacement that goes through a
            // commit again.
            for (r, b) in comm.all_gather(&blob_len.to_le_bytes())?.iter().enumerate() {
                let len =
                    (b.get(..8).and_then(|w| w.try_into().ok())).map_or(0, u64::from_le_bytes);
                *blob_lens.entry(self.placement[r]).or_insert(0) += len;
            }
            self.round += 1;
        }
        for &level in levels {
            self.in_flight.push(InFlight { id, stamp, level });
        }
        // A node's manager that moved to a spare node (a logged recovery
        // of a node failure) is reached there.
        self.peers.extend(comm.link().moved_managers());
        let Some(topology) = self.topology() else {
            return Ok(());
        };
        // A replacement going through a commit again counts what was asked
        // then, and asks nothing: its manager has the task already (or
        // lost it with its node, and then the level does not commit it).
        if self.client.is_none() || self.replaying {
            return Ok(());
        }
        let task = Task {
            job_id: self.cfg.job.id.clone(),
            id,
            stamp,
            round: self.round,
            levels: (levels.iter())
                .filter_map(|l| scheme::configured(&self.cfg, *l).map(|r| (*l, r)))
                .collect(),
            node: topology.node_of(self.rank).unwrap_or(0),
            topology,
            peers: self.peers.clone(),
            global_dir: self.cfg.storage.global_dir.clone(),
            l4: l4_write(&self.cfg.l4),
            blob_lens,
            metrics: self.cfg.metrics_file().map(|p| p.to_path_buf()),
            fence: self.fence,
        };
        match self
            .call(&Request::Submit(Box::new(task)))
            .unwrap_or(Ok(Reply::Accepted))
        {
            Ok(Reply::Accepted) => {}
            Ok(Reply::Skipped(why)) => {
                tracing::warn!(checkpoint = id, reason = %why, "promotion skipped")
            }
            Ok(other) => tracing::warn!(checkpoint = id, reply = ?other, "promotion refused"),
            Err(e) => {
                if let Some(stop) = self.interruption(&e) {
                    return Err(stop);
                }
                tracing::warn!(checkpoint = id, error = %e, "the node's manager is unreachable")
            }
        }
        Ok(())
    }
}

/// How level 4 stores a rank's file, as `l4` configures it.
fn l4_write(l4: &crate::config::GlobalConfig) -> L4Write {
    let bytes = |b: bytesize::ByteSize| usize::try_from(b.as_u64()).unwrap_or(usize::MAX);
    if l4.differential {
        L4Write::Differential {
            block: bytes(l4.block_size),
            full_every: l4.full_every,
        }
    } else {
        L4Write::Full {
            chunk: bytes(l4.chunk_size),
        }
    }
}

/// Every rank's node, and the highest of the ranks' clocks (`now`, in
/// microseconds). A runtime that placed the ranks says where (see
/// [`RecoveryContext::placement`](crate::comm::RecoveryContext::placement)): then one
/// reduction of a number finds the clock. Otherwise every rank's node and
/// clock are gathered from every rank (a number per rank, to every rank).
fn placement_and_clock(comm: &dyn Comm, now: u64) -> Result<(Vec<u32>, u64)> {
    // Every rank of the epoch was released with the same placement, so
    // every rank takes the same branch.
    let placed = comm.link().recovery().placement;
    if placed.len() == comm.size() {
        let mut clock = [now];
        comm.all_reduce_u64(&mut clock, ReduceOp::Max)?;
        return Ok((placed, clock[0]));
    }
    let mut mine = comm.node().to_le_bytes().to_vec();
    mine.extend_from_slice(&now.to_le_bytes());
    let gathered = comm.all_gather(&mine)?;
    let word = |b: &[u8], at: usize, len: usize| -> u64 {
        let mut w = [0u8; 8];
        if let Some(bytes) = b.get(at..at + len) {
            w[..len].copy_from_slice(bytes);
        }
        u64::from_le_bytes(w)
    };
    let placement: Vec<u32> = gathered.iter().map(|b| word(b, 0, 4) as u32).collect();
    let first_round = gathered.iter().map(|b| word(b, 4, 8)).max().unwrap_or(0);
    Ok((placement, first_round))
}

#[cfg(test)]
mod tests;
