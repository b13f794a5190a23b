//! Telling a slow node from a dead one, and the leases that keep a node
//! the root gave up on from running on.
//!
//! Each node's reader task notes every message the moment it arrives
//! ([`Liveness::heard`]), before the message waits in the control loop's
//! queue, so a busy loop never mistakes queued heartbeats for silence; and
//! silence is counted from the node's hello, never from its launch.
//!
//! **Slow is not dead.** A node counts as silent past a threshold that
//! follows how its messages arrive: [`MULTIPLE`] times the longest of its
//! last [`HISTORY`] gaps (a minute of heartbeats at the default period, and
//! longer the slower they come), never below the heartbeat timeout
//! (`--heartbeat-timeout`, `floor`) and never above [`CEILING`] times it,
//! which bounds how long a real silence takes to detect. On a loaded
//! machine the gaps grow, and so does the patience; one long stall keeps
//! it patient for the next [`HISTORY`] messages. Until the node has sent
//! [`SETTLING`] messages after the release of a world barrier
//! ([`Liveness::settle`]: the start, and each recovery) it gets the
//! ceiling: starting a thousand processes, or releasing them (each reads
//! every rank's address and connects to its peers), starves everyone, the
//! root among them, and what came before says nothing of that rhythm.
//!
//! **Leases.** Every heartbeat the root hears renews the node's lease: the
//! daemon may run its ranks until the lease ends, counted from when it
//! *sent* that heartbeat (by its own clock, so a late delivery never
//! stretches it), and then stops them by itself. The lease granted is the
//! threshold less a margin of a quarter of the floor; the root declares
//! the node dead only when the threshold has passed *and* the margin since
//! the end of every lease it granted. So at no instant do the old
//! incarnation of a rank and its replacement both run: by the time the
//! root starts the replacement, the node's daemon (which looks at its
//! lease with every heartbeat) stopped the old one a quarter of a
//! heartbeat timeout before, less one heartbeat period; and a daemon
//! stalled for half the heartbeat timeout still holds its lease.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The threshold is this many times the longest recent gap.
pub(super) const MULTIPLE: u32 = 4;
/// The threshold never exceeds this many heartbeat timeouts.
pub(super) const CEILING: u32 = 3;
/// How many recent gaps between messages the threshold looks at.
pub(super) const HISTORY: u64 = 256;
/// How many messages after a release a node gets the ceiling for.
pub(super) const SETTLING: u64 = 32;

/// What the root knows of one node's messages (shared by its reader task
/// and the control loop).
pub(super) struct Liveness {
    floor: Duration,
    heard: Mutex<Heard>,
}

struct Heard {
    last: Instant,
    gaps: Longest,
    /// No lease lasts past this (the end of the latest one granted).
    leased_until: Instant,
    renewing: bool,
    /// Once this many messages came (counted by `gaps`), the threshold
    /// follows the gaps; before, or with none, it is the ceiling.
    settled_at: Option<u64>,
}

/// The longest of the last [`HISTORY`] gaps, kept as the gaps that may
/// still become the longest (each longer than every later one), so each
/// message costs O(1) on average.
#[derive(Default)]
struct Longest {
    count: u64,
    /// (number, gap), gaps decreasing.
    candidates: VecDeque<(u64, Duration)>,
}

impl Longest {
    fn push(&mut self, gap: Duration) {
        self.count += 1;
        while self.candidates.back().is_some_and(|(_, g)| *g <= gap) {
            self.candidates.pop_back();
        }
        self.candidates.push_back((self.count, gap));
        while self
            .candidates
            .front()
            .is_some_and(|(n, _)| n + HISTORY <= self.count)
        {
            self.candidates.pop_front();
        }
    }

    fn longest(&self) -> Option<Duration> {
        self.candidates.front().map(|(_, g)| *g)
    }
}

/// A node silent past its threshold and its leases.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Silence {
    /// How long nothing has come from it.
    pub(super) silent: Duration,
    /// The threshold it passed.
    pub(super) threshold: Duration,
}

/// The silence a node may keep before it counts as dead, for the recent
/// `gaps` between its messages and a heartbeat timeout `floor`.
pub(super) fn threshold(gaps: impl IntoIterator<Item = Duration>, floor: Duration) -> Duration {
    let longest = gaps.into_iter().max().unwrap_or_default();
    (longest * MULTIPLE).clamp(floor, floor * CEILING)
}

/// The margin between the end of a node's lease and its death.
pub(super) fn margin(floor: Duration) -> Duration {
    floor / 4
}

/// The lease a daemon holds from its hello until the root first renews it
/// (the start's: the ceiling's).
pub(super) fn first_lease(floor: Duration) -> Duration {
    floor * CEILING - margin(floor)
}

/// The heartbeat timeout's least value per process of the job that shares
/// a core of the root's machine (see [`crowded_floor`]).
pub(super) const PER_PROCESS: Duration = Duration::from_millis(20);

/// The heartbeat timeout of a job whose virtual nodes run `processes`
/// processes (ranks, standbys, daemons, managers) on the root's `cores`:
/// the one `given`, or, when each core runs so many of them that a live
/// process may wait seconds for its turn, [`PER_PROCESS`] for each
/// process a core runs (1024 ranks on two cores: 14 s). A machine that
/// crowded stalls every process of the job for seconds at a time, the
/// root and the daemons among them, and its leases must outlast that.
pub(in crate::root) fn crowded_floor(given: Duration, processes: usize, cores: usize) -> Duration {
    let per_core = processes.div_ceil(cores.max(1));
    given.max(PER_PROCESS * u32::try_from(per_core).unwrap_or(u32::MAX))
}

/// How often a rank says it is alive to its daemon, and the daemon passes
/// its lease on to its ranks: eight times in the shorter of the rank
/// timeout and the heartbeat timeout (`floor`), never more often than the
/// daemons' own heartbeat. A node runs many ranks, and each message wakes
/// one of them: at 200 ms, 1024 ranks on two cores spent most of the
/// machine saying they were alive.
pub(super) fn rank_heartbeat(
    heartbeat: Duration,
    floor: Duration,
    rank_timeout: Duration,
) -> Duration {
    heartbeat.max(floor.min(rank_timeout) / 8)
}

impl Liveness {
    /// A node whose hello arrived at `now`, with heartbeat timeout `floor`.
    pub(super) fn new(floor: Duration, now: Instant) -> Self {
        Self {
            floor,
            heard: Mutex::new(Heard {
                last: now,
                gaps: Longest::default(),
                leased_until: now + first_lease(floor),
                renewing: true,
                settled_at: None,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Heard> {
        self.heard.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The node's threshold now: the ceiling until it settled.
    fn threshold_of(&self, h: &Heard) -> Duration {
        match h.settled_at {
            Some(n) if h.gaps.count >= n => threshold(h.gaps.longest(), self.floor),
            _ => self.floor * CEILING,
        }
    }

    /// The world barrier was released (every rank joined, at the start or
    /// after a recovery): after [`SETTLING`] more messages, the threshold
    /// follows the gaps between the node's messages.
    pub(super) fn settle(&self) {
        let mut h = self.lock();
        // The threshold of the message after the last of them follows the gaps.
        h.settled_at = Some(h.gaps.count + SETTLING + 1);
    }

    /// A message arrived at `now`. For a heartbeat (`renew`) of a node
    /// still renewed, the lease to grant: the daemon may run this long
    /// after it sent the heartbeat.
    pub(super) fn heard(&self, now: Instant, renew: bool) -> Option<Duration> {
        let mut h = self.lock();
        let gap = now.saturating_duration_since(h.last);
        h.last = h.last.max(now);
        h.gaps.push(gap);
        if !(renew && h.renewing) {
            return None;
        }
        let lease = self.threshold_of(&h) - margin(self.floor);
        // It was sent before it arrived: the lease ends sooner than this.
        h.leased_until = h.leased_until.max(now + lease);
        Some(lease)
    }

    /// The root gave the node up: no lease is renewed any more.
    pub(super) fn stop_renewing(&self) {
        self.lock().renewing = false;
    }

    /// Whether every lease the node was granted ended, and the margin
    /// after it passed, at `now`.
    pub(super) fn leases_over(&self, now: Instant) -> bool {
        now >= self.lock().leased_until + margin(self.floor)
    }

    /// Whether the node must count as dead at `now`: silent past its
    /// threshold, and past the margin after every lease it was granted.
    pub(super) fn silence(&self, now: Instant) -> Option<Silence> {
        let h = self.lock();
        let silent = now.saturating_duration_since(h.last);
        let threshold = self.threshold_of(&h);
        let leases_over = now >= h.leased_until + margin(self.floor);
        (silent > threshold && leases_over).then_some(Silence { silent, threshold })
    }
}

#[cfg(test)]
mod tests;
