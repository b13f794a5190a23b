//! A rank's sender-based message log, for localised recovery: a copy of
//! every message it sent since the last checkpoint that committed on
//! every rank, per destination and in order, so that a replacement of a
//! failed rank can be fed again what the survivors had sent it, without
//! their rolling back.
//!
//! Messages to each destination carry sequence numbers that run through
//! the whole epoch (a receiver drops a number it already has: the
//! messages a recomputing replacement sends again). The log keeps the
//! messages of the current *window*: those sent since the rank wrote its
//! part of the last checkpoint that committed (its counts were *marked*
//! then, [`Journal::mark`]); older ones are dropped when the next
//! checkpoint commits, and the commit's own messages stay in the window, so
//! that a replacement restored from the checkpoint can go through the
//! commit again. It holds at most a
//! configured number of bytes, each message counted with its bookkeeping
//! ([`ENTRY_COST`]), so that many empty messages fill it too; a window
//! that outgrows it cannot be replayed, and says so. Pure bookkeeping: sending is the
//! communicator's.

use bytes::Bytes;
use std::collections::VecDeque;

/// Bytes each logged message counts for besides its payload.
pub(crate) const ENTRY_COST: u64 = std::mem::size_of::<Entry>() as u64;

/// One logged message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    /// Its sequence number towards its destination.
    pub seq: u64,
    /// Its tag.
    pub tag: u64,
    /// Its payload.
    pub data: Bytes,
}

/// Why a window's messages to a destination cannot be replayed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unreplayable {
    /// The window's messages outgrew the log's limit.
    #[error(
        "the messages sent since checkpoint {window} outgrew the log's limit of {limit} bytes"
    )]
    Overflowed {
        /// The checkpoint the window started at (0: the epoch's start).
        window: u64,
        /// The limit, bytes.
        limit: u64,
    },
    /// The replay would have to start before the window: a message sent
    /// before the checkpoint was received after it.
    #[error("rank {dest} needs the messages after number {after}, but the log starts after number {kept_after} (checkpoint {window}): a message crossed the checkpoint")]
    BeforeWindow {
        /// The destination.
        dest: usize,
        /// The last message it has.
        after: u64,
        /// The last message before the window.
        kept_after: u64,
        /// The checkpoint the window started at.
        window: u64,
    },
}

#[derive(Clone, Debug, Default)]
struct Channel {
    /// Number of the last message sent (0: none yet this epoch).
    sent: u64,
    /// Number of the last message before the window.
    before_window: u64,
    kept: VecDeque<Entry>,
}

/// The log of one rank's messages to every other rank.
#[derive(Debug)]
pub(crate) struct Journal {
    limit: u64,
    held: u64,
    window: u64,
    overflowed: bool,
    channels: Vec<Channel>,
    /// The numbers sent to each rank when the checkpoint being written
    /// took its counts (the next window starts there).
    marked: Option<Vec<u64>>,
}

impl Journal {
    /// An empty log for a job of `size` ranks holding at most `limit`
    /// bytes of payload.
    pub(crate) fn new(size: usize, limit: u64) -> Self {
        Self {
            limit,
            held: 0,
            window: 0,
            overflowed: false,
            channels: vec![Channel::default(); size],
            marked: None,
        }
    }

    /// Logs a message to `dest` and returns its sequence number (0 for a
    /// destination outside the job, which the communicator refuses first).
    pub(crate) fn record(&mut self, dest: usize, tag: u64, data: &[u8]) -> u64 {
        let Some(c) = self.channels.get_mut(dest) else {
            return 0;
        };
        c.sent += 1;
        let seq = c.sent;
        let len = data.len() as u64 + ENTRY_COST;
        if !self.overflowed && self.held.saturating_add(len) <= self.limit {
            self.held += len;
            c.kept.push_back(Entry {
                seq,
                tag,
                data: Bytes::copy_from_slice(data),
            });
        } else if !self.overflowed {
            // Past the limit the window cannot be replayed: free it all.
            self.overflowed = true;
            self.held = 0;
            for c in &mut self.channels {
                c.kept.clear();
            }
        }
        seq
    }

    /// Marks where the checkpoint being written stands: the window its
    /// commit opens starts here.
    pub(crate) fn mark(&mut self) {
        self.marked = Some(self.sent());
    }

    /// Starts a new window at checkpoint `id` (it committed on every
    /// rank): the messages sent before its mark (or, unmarked, before
    /// now) are no longer needed.
    pub(crate) fn open_window(&mut self, id: u64) {
        let marked = self.marked.take().unwrap_or_else(|| self.sent());
        self.window = id;
        // The messages after the mark went with an overflowing window.
        let lost = self.overflowed && self.channels.iter().zip(&marked).any(|(c, m)| c.sent > *m);
        self.overflowed = lost;
        self.held = 0;
        for (c, m) in self.channels.iter_mut().zip(marked) {
            c.before_window = m;
            c.kept.retain(|e| e.seq > m);
            self.held += c
                .kept
                .iter()
                .map(|e| e.data.len() as u64 + ENTRY_COST)
                .sum::<u64>();
        }
    }

    /// The messages to `dest` numbered after `after`, in order (payloads
    /// shared, not copied).
    pub(crate) fn replay(&self, dest: usize, after: u64) -> Result<Vec<Entry>, Unreplayable> {
        if self.overflowed {
            return Err(Unreplayable::Overflowed {
                window: self.window,
                limit: self.limit,
            });
        }
        let Some(c) = self.channels.get(dest) else {
            return Ok(Vec::new());
        };
        if after < c.before_window {
            return Err(Unreplayable::BeforeWindow {
                dest,
                after,
                kept_after: c.before_window,
                window: self.window,
            });
        }
        Ok(c.kept.iter().filter(|e| e.seq > after).cloned().collect())
    }

    /// The checkpoint the window started at (0: the epoch's start).
    pub(crate) fn window(&self) -> u64 {
        self.window
    }

    /// Bytes held (payloads and their bookkeeping).
    pub(crate) fn held(&self) -> u64 {
        self.held
    }

    /// The number of the last message sent to each rank.
    pub(crate) fn sent(&self) -> Vec<u64> {
        self.channels.iter().map(|c| c.sent).collect()
    }

    /// Continues numbering after `sent` (a replacement restored from
    /// checkpoint `window`, which recorded them), with an empty window.
    pub(crate) fn resume(&mut self, window: u64, sent: &[u64]) {
        self.window = window;
        for (c, s) in self.channels.iter_mut().zip(sent) {
            c.sent = *s;
            c.before_window = *s;
            c.kept.clear();
        }
        self.held = 0;
        self.overflowed = false;
        self.marked = None;
    }
}

#[cfg(test)]
mod tests;
