//! The daemon's lease from the root: how long it may keep its node's
//! processes running without hearing from the root.
//!
//! Each heartbeat is numbered and its sending time kept; the root answers
//! a heartbeat it heard with a lease counted from that sending time (see
//! `root::control::liveness`). When the lease runs out (the root is gone,
//! cut off, or gave the node up) the daemon stops its ranks, standbys and
//! manager and exits by itself, before the root may start their
//! replacements elsewhere.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Heartbeats remembered (a lease names one of them).
const SENT: usize = 512;

pub(super) struct Lease {
    next: u64,
    sent: VecDeque<(u64, Instant)>,
    until: Instant,
    /// When the root was last heard from (a lease or any order).
    heard: Instant,
}

impl Lease {
    /// The lease of a daemon that said hello at `now`: `first` long.
    pub(super) fn new(first: Duration, now: Instant) -> Self {
        Self {
            next: 1,
            sent: VecDeque::new(),
            until: now + first,
            heard: now,
        }
    }

    /// Numbers a heartbeat sent at `now`.
    pub(super) fn beat(&mut self, now: Instant) -> u64 {
        let n = self.next;
        self.next += 1;
        if self.sent.len() == SENT {
            self.sent.pop_front();
        }
        self.sent.push_back((n, now));
        n
    }

    /// The root granted `ms` milliseconds from heartbeat `beat`, heard at
    /// `now`. A lease naming a heartbeat this daemon did not send (or no
    /// longer remembers) grants nothing.
    pub(super) fn renew(&mut self, beat: u64, ms: u64, now: Instant) {
        self.heard = now;
        if let Some((_, sent)) = self.sent.iter().find(|(n, _)| *n == beat) {
            self.until = self.until.max(*sent + Duration::from_millis(ms));
        }
    }

    /// How long the lease still runs at `now`.
    pub(super) fn left(&self, now: Instant) -> Duration {
        self.until.saturating_duration_since(now)
    }

    /// `None` while the lease runs; once it ran out, how long the root
    /// has not been heard from.
    pub(super) fn expired(&self, now: Instant) -> Option<Duration> {
        (now >= self.until).then(|| now.saturating_duration_since(self.heard))
    }
}

#[cfg(test)]
mod tests;
