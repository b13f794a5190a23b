//! Localised recovery over sockets: the replacement of a failed rank, restored
//! from its checkpoint while the others go on, asks every survivor for the
//! messages it had been sent since that checkpoint; each survivor serves the
//! request from its log at its next call (a blocked receive wakes up for
//! it) and from then on reaches the rank at the replacement's address.
//! What a log cannot replay goes to the runtime's fallback, a global
//! recovery.

use super::{CommError, CommResult, Endpoint, MessageCounts, NetComm, Unreplayable, PEER_GRACE};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The tag of a replacement's request (above every tag a program or a
/// collective uses); the hub keeps such requests apart from messages.
pub(super) const REQUEST_TAG: u64 = u64::MAX;

/// A replacement's request to one survivor.
#[derive(Serialize, Deserialize)]
struct Request {
    /// The number of the last message from that survivor it had received
    /// at its checkpoint.
    after: u64,
    /// Where the replacement listens.
    endpoint: Endpoint,
    /// A replacement on a spare node: the failed node it stands in for,
    /// and where that node's manager listens now.
    #[serde(default)]
    manager: Option<(u32, Endpoint)>,
}

/// What a survivor sent a replacement from its log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Replay {
    /// The replacement's rank.
    pub to: super::Rank,
    /// Messages sent again.
    pub messages: usize,
    /// Their payload, bytes.
    pub bytes: u64,
    /// What the log held then, bytes (payload and bookkeeping).
    pub log_bytes: u64,
}

/// What a communicator calls after each replay (the runtime's record of
/// who sent logs).
pub type ReplayNotes = Arc<dyn Fn(&Replay) + Send + Sync>;

/// What a communicator calls when a replacement cannot be fed its messages
/// again, with the reason: the runtime's fallback to a global recovery,
/// whose interrupt the communicator then waits for.
pub type Fallback = Arc<dyn Fn(&str) + Send + Sync>;

impl NetComm {
    /// The same communicator, knowing where its own rank listens (a
    /// replacement sends it with its requests).
    pub fn with_own_endpoint(mut self, endpoint: Endpoint) -> Self {
        self.endpoint = Some(endpoint);
        self
    }

    /// The same communicator, calling `fallback` when a replacement's
    /// messages cannot be replayed.
    pub fn with_fallback(mut self, fallback: Fallback) -> Self {
        self.fallback = Some(fallback);
        self
    }

    /// The same communicator, calling `notes` after each replay.
    pub fn with_replay_notes(mut self, notes: ReplayNotes) -> Self {
        self.replay_notes = Some(notes);
        self
    }

    /// Asks every other rank for the messages after those `counts` says
    /// this rank had received (a replacement restored from a checkpoint).
    pub(super) fn request_replays(&self, counts: &MessageCounts) {
        let Some(endpoint) = &self.endpoint else {
            tracing::warn!("a replacement without its own address cannot ask for its messages");
            return;
        };
        let manager = self.recovery.stand_in.as_ref().and_then(|s| {
            let at = s.managers.get(&s.node)?;
            Some((s.node, at.clone()))
        });
        for dest in (0..self.peers.len()).filter(|d| *d != self.rank) {
            let request = Request {
                after: counts.received.get(dest).copied().unwrap_or(0),
                endpoint: endpoint.clone(),
                manager: manager.clone(),
            };
            let body = serde_json::to_vec(&request).unwrap_or_default();
            if let Err(e) = self.write_to(dest, REQUEST_TAG, 0, &body) {
                tracing::warn!(dest, error = %e, "could not ask a rank for its messages");
            }
        }
    }

    /// Serves the replacements' requests that arrived: from now on their
    /// rank is reached at the replacement, which is sent the logged
    /// messages it asked for.
    pub(super) fn serve_requests(&self) -> CommResult<()> {
        for (src, body) in self.hub.take_requests() {
            if src >= self.peers.len() || src == self.rank {
                continue;
            }
            let Ok(request) = serde_json::from_slice::<Request>(&body) else {
                tracing::warn!(src, "dropping a request that does not parse");
                continue;
            };
            self.replace_peer(src, request.endpoint)?;
            if let Some((node, at)) = request.manager {
                let mut moved = self.moved.lock().unwrap_or_else(|p| p.into_inner());
                moved.insert(node, at);
            }
            match self.replay_to(src, request.after)? {
                Ok((messages, bytes)) => {
                    let replay = Replay {
                        to: src,
                        messages,
                        bytes,
                        log_bytes: self.journal_bytes(),
                    };
                    tracing::info!(
                        rank = src,
                        messages,
                        bytes,
                        log_bytes = replay.log_bytes,
                        "replayed to a replacement"
                    );
                    if let Some(notes) = &self.replay_notes {
                        notes(&replay);
                    }
                }
                Err(why) => return Err(self.escalate(src, why)),
            }
        }
        Ok(())
    }

    /// Waits up to `limit` for a replacement's request and serves it: what
    /// a rank whose program finished does until the job ends, so that a
    /// replacement still recomputing gets its messages.
    pub fn serve_requests_within(&self, limit: std::time::Duration) -> CommResult<()> {
        self.hub.await_request(self.epoch, limit);
        self.serve_requests()
    }

    /// Hands a replay that cannot be done to the runtime and waits for the
    /// global recovery it starts.
    fn escalate(&self, rank: usize, why: Unreplayable) -> CommError {
        let reason = format!("rank {rank}'s replacement cannot be sent its messages again: {why}");
        self.give_up(&reason).unwrap_or(CommError::Broken(reason))
    }

    /// Asks the runtime for a global recovery and waits for it to begin:
    /// the error to fail with, or `None` without a runtime's fallback.
    pub(super) fn give_up(&self, reason: &str) -> Option<CommError> {
        tracing::warn!("{reason}");
        let fallback = self.fallback.as_ref()?;
        fallback(reason);
        Some(match self.hub.await_interrupt(self.epoch, PEER_GRACE) {
            Some(epoch) => CommError::Interrupted { epoch },
            None => CommError::Broken(reason.to_string()),
        })
    }
}
