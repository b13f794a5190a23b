//! [`Hub`]: a rank process's mailbox. Its readers drop each message
//! they decode into it; the communicators of the process take them out by
//! sender and tag, and a recovery the runtime starts interrupts them. A
//! replacement's request to be sent its messages again (see `rejoin.rs`)
//! waits apart, one per sender, until a communicator serves it.

use super::{Bytes, Rank};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long a receive polls for a message before it sleeps. Waking a
/// sleeping thread costs tens of microseconds on virtual machines; a message
/// that arrives while the receiver still polls is picked up at once.
const POLL: Duration = Duration::from_micros(30);

/// The most senders of numbered messages a hub keeps track of: far
/// more ranks than a job may have, few enough that no peer can make the
/// hub hold much.
const MAX_SENDERS: usize = 1 << 20;

/// A message waiting in the hub.
pub(super) struct Envelope {
    pub(super) epoch: u64,
    pub(super) src: Rank,
    pub(super) tag: u64,
    /// Its number from `src` in `epoch` (0: the sender does not log).
    pub(super) seq: u64,
    pub(super) data: Bytes,
    /// The connection's queue budget this message holds until received.
    pub(super) _budget: Option<tokio::sync::OwnedSemaphorePermit>,
}

pub(super) struct HubState {
    /// Messages of epochs below this are discarded.
    pub(super) epoch: u64,
    /// Set when the runtime starts a recovery into this (newer) epoch.
    pub(super) interrupt: Option<u64>,
    pub(super) queue: VecDeque<Envelope>,
    /// Per sender: the epoch and number of the last numbered message
    /// taken in (a number at or below it is a duplicate). A map of at
    /// most [`MAX_SENDERS`], not a vector indexed by the rank a frame
    /// states: no peer's number makes the hub allocate much.
    pub(super) seen: HashMap<Rank, (u64, u64)>,
    /// Replacements' requests for their messages, by sender (the newest
    /// of each), at most [`MAX_SENDERS`].
    pub(super) requests: HashMap<Rank, Bytes>,
    /// Senders whose connection the network lost, with the epoch of the
    /// messages it carried (see `lost.rs`), at most [`MAX_SENDERS`].
    pub(super) lost: HashSet<(Rank, u64)>,
}

/// A rank process's mailbox, shared by its communicators and its readers.
pub struct Hub {
    state: Mutex<HubState>,
    pub(super) ready: Condvar,
    /// Bumped on every delivery and interrupt (read without the lock while polling).
    changes: AtomicU64,
    /// Whether a receive polls before it sleeps (see [`Hub::poll_before_sleeping`]).
    polls: AtomicBool,
    /// Receives that went to sleep (lets tests interrupt a sleeping receive).
    #[cfg(test)]
    pub(super) sleepers: AtomicU64,
}

impl Hub {
    /// An empty hub at epoch 0.
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(HubState {
                epoch: 0,
                interrupt: None,
                queue: VecDeque::new(),
                seen: HashMap::new(),
                requests: HashMap::new(),
                lost: HashSet::new(),
            }),
            ready: Condvar::new(),
            changes: AtomicU64::new(0),
            polls: AtomicBool::new(true),
            #[cfg(test)]
            sleepers: AtomicU64::new(0),
        })
    }

    /// Whether a receive polls briefly before it sleeps (the default).
    /// Polling saves a wake-up when each rank has a core; when more ranks
    /// than cores share the machine, it spends the time another rank
    /// needs to send the message awaited, so the runtime turns it off.
    pub fn poll_before_sleeping(&self, on: bool) {
        self.polls.store(on, Ordering::Relaxed);
    }

    /// Waits until something changes in the hub: polls briefly (see
    /// [`Hub::poll_before_sleeping`]), then sleeps.
    pub(super) fn wait<'a>(&'a self, s: MutexGuard<'a, HubState>) -> MutexGuard<'a, HubState> {
        let seen = self.changes.load(Ordering::Acquire);
        drop(s);
        if self.polls.load(Ordering::Relaxed) {
            let start = Instant::now();
            while self.changes.load(Ordering::Acquire) == seen && start.elapsed() < POLL {
                std::hint::spin_loop();
            }
        }
        let s = self.lock();
        if self.changes.load(Ordering::Acquire) != seen {
            return s;
        }
        #[cfg(test)]
        self.sleepers.fetch_add(1, Ordering::AcqRel);
        self.ready.wait(s).unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, HubState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Accepts a message from a reader; messages of past epochs, and
    /// numbered messages already taken in, are dropped.
    pub(super) fn deliver(&self, env: Envelope) {
        let mut s = self.lock();
        if env.tag == super::rejoin::REQUEST_TAG {
            let room = s.requests.len() < MAX_SENDERS || s.requests.contains_key(&env.src);
            if env.epoch == s.epoch && room {
                s.requests.insert(env.src, env.data);
                self.changes.fetch_add(1, Ordering::Release);
                drop(s);
                self.ready.notify_all();
            }
            return;
        }
        if env.seq != 0 {
            if s.seen.len() >= MAX_SENDERS && !s.seen.contains_key(&env.src) {
                tracing::warn!(
                    src = env.src,
                    "dropping a numbered message from one sender too many"
                );
                return;
            }
            let last = s.seen.entry(env.src).or_insert((env.epoch, 0));
            if last.0 == env.epoch && env.seq <= last.1 {
                return;
            }
            *last = (env.epoch, env.seq);
        }
        if env.epoch >= s.epoch {
            s.queue.push_back(env);
            self.changes.fetch_add(1, Ordering::Release);
            drop(s);
            self.ready.notify_all();
        }
    }

    /// The connection from `src`, which carried messages of `epoch`, went
    /// unanswered (see `lost.rs`): receives waiting on it wake up.
    pub(super) fn mark_lost(&self, src: Rank, epoch: u64) {
        let mut s = self.lock();
        if epoch < s.epoch || s.lost.len() >= MAX_SENDERS {
            return;
        }
        s.lost.insert((src, epoch));
        self.changes.fetch_add(1, Ordering::Release);
        drop(s);
        self.ready.notify_all();
    }

    /// Starts a recovery into `epoch`: calls on communicators of older epochs
    /// fail with [`CommError::Interrupted`](crate::comm::CommError::Interrupted) from now on.
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
    pub(super) fn await_interrupt(&self, epoch: u64, grace: Duration) -> Option<u64> {
        let s = self.lock();
        let (s, _) = self
            .ready
            .wait_timeout_while(s, grace, |s| s.interrupt.is_none_or(|e| e <= epoch))
            .unwrap_or_else(|e| e.into_inner());
        s.interrupt.filter(|e| *e > epoch)
    }

    /// Takes the replacements' requests waiting to be served.
    pub(super) fn take_requests(&self) -> Vec<(Rank, Bytes)> {
        let mut s = self.lock();
        if s.requests.is_empty() {
            return Vec::new();
        }
        let mut all: Vec<(Rank, Bytes)> = s.requests.drain().collect();
        all.sort_by_key(|(src, _)| *src);
        all
    }

    /// Waits up to `limit` for a request, or a recovery into an epoch
    /// newer than `epoch`.
    pub(super) fn await_request(&self, epoch: u64, limit: Duration) {
        let s = self.lock();
        let _ = self
            .ready
            .wait_timeout_while(s, limit, |s| {
                s.requests.is_empty() && s.interrupt.is_none_or(|e| e <= epoch)
            })
            .unwrap_or_else(|e| e.into_inner());
    }

    /// Bytes of messages waiting to be received.
    #[cfg(test)]
    pub(super) fn queued_bytes(&self) -> usize {
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
        if epoch > s.epoch {
            // Requests belong to the epoch they were made in.
            s.requests.clear();
        }
        s.epoch = s.epoch.max(epoch);
        let floor = s.epoch;
        s.queue.retain(|m| m.epoch >= floor);
        s.lost.retain(|&(_, e)| e >= floor);
        if s.interrupt.is_some_and(|e| e <= floor) {
            s.interrupt = None;
        }
    }
}
