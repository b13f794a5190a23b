//! An outgoing connection from a rank to one peer: opened on the first
//! message to it, authenticated with the job's secret, and on TCP watched
//! for a peer the network lost (see `lost.rs`); and the connections a
//! process keeps from one communicator to the next ([`Links`]).

use super::{
    lost, wire, CommError, CommResult, Endpoint, NetComm, Peer, Rank, Security, PEER_GRACE,
};
use crate::auth::{self, Channel};
use std::collections::HashMap;
use std::io::{self, Write};
use std::sync::{Arc, Mutex};

/// An outgoing connection to one peer.
pub(super) enum Link {
    Unix(std::os::unix::net::UnixStream),
    Tcp(std::net::TcpStream),
}

impl Link {
    /// Connects and proves the job's secret (each attempt bounded by the
    /// handshake timeout), trying again after a pause while the listener
    /// drops the connection before the handshake is through.
    pub(super) fn connect(to: &Endpoint, security: &Security) -> io::Result<Self> {
        let mut pauses = auth::backoff();
        loop {
            match Self::connect_once(to, security) {
                Err(e) if auth::worth_retrying(&e) => match pauses.next() {
                    Some(pause) => std::thread::sleep(pause),
                    None => return Err(e),
                },
                other => return other,
            }
        }
    }

    fn connect_once(to: &Endpoint, security: &Security) -> io::Result<Self> {
        let (secret, limit) = (&security.secret, Some(auth::HANDSHAKE_TIMEOUT));
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
                lost::watch(&s, security.lost_after)?;
                s.set_read_timeout(limit)?;
                s.set_write_timeout(limit)?;
                auth::connect_blocking(&mut s, secret, Channel::Data)?;
                s.set_read_timeout(None)?;
                s.set_write_timeout(None)?;
                Ok(Link::Tcp(s))
            }
        }
    }

    pub(super) fn writer(&mut self) -> &mut dyn Write {
        match self {
            Link::Unix(s) => s,
            Link::Tcp(s) => s,
        }
    }
}

/// The connections a rank process keeps from one communicator to the
/// next. After a recovery, a survivor's new communicator takes over its
/// connections to the peers that still listen where they did (the
/// survivors: a replacement is a new process at a new address) and opens
/// new ones only to the replacements, instead of connecting and proving
/// the job's secret to every peer again. Messages carry their epoch, and
/// a hub drops those of past epochs, so a connection may serve several.
/// At most one connection per rank is kept.
#[derive(Default)]
pub struct Links {
    kept: Mutex<HashMap<Rank, (Endpoint, Link)>>,
}

impl Links {
    /// No connections yet.
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Rank, (Endpoint, Link)>> {
        self.kept.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The kept connection to `rank` if it still goes to `endpoint` (one
    /// to a former address is closed).
    fn take(&self, rank: Rank, endpoint: &Endpoint) -> Option<Link> {
        match self.lock().remove(&rank) {
            Some((to, link)) if &to == endpoint => Some(link),
            _ => None,
        }
    }

    fn keep(&self, rank: Rank, endpoint: Endpoint, link: Link) {
        self.lock().insert(rank, (endpoint, link));
    }
}

impl NetComm {
    /// Writes one frame to `dest` on its connection (opened on first use).
    pub(super) fn write_to(&self, dest: Rank, tag: u64, seq: u64, data: &[u8]) -> CommResult<()> {
        let mut peer = self.peer(dest);
        if peer.down {
            return Ok(());
        }
        let logging = self.journal.is_some();
        let failed = |e: io::Error| {
            tracing::debug!(dest, error = %e, "send failed");
            if lost::unanswered(&e) {
                self.report_lost(dest);
            }
            // Only a dead peer breaks its connection, and the runtime reacts
            // to every death with a recovery: wait for it, so that this rank
            // rolls back like the others instead of failing on its own.
            match self.hub.await_interrupt(self.epoch, PEER_GRACE) {
                Some(epoch) => CommError::Interrupted { epoch },
                None => CommError::PeerFailed { rank: dest },
            }
        };
        let send = |peer: &mut Peer| {
            match peer.link.as_mut() {
                Some(l) => Ok(l),
                None => Link::connect(&peer.endpoint, &self.security).map(|l| peer.link.insert(l)),
            }
            .and_then(|l| {
                wire::write_frame(l.writer(), self.epoch, tag, self.rank as u32, seq, data)
            })
        };
        let mut result = send(&mut peer);
        if peer.reused {
            // A kept connection the peer no longer reads: one new one.
            peer.reused = false;
            if result.is_err() {
                peer.link = None;
                result = send(&mut peer);
            }
        }
        match result {
            Ok(()) => Ok(()),
            Err(e) if logging => {
                // The message is in the log: the replacement gets it.
                tracing::debug!(dest, error = %e, "peer down, logging only");
                if lost::unanswered(&e) {
                    self.report_lost(dest);
                }
                peer.link = None;
                peer.down = true;
                Ok(())
            }
            Err(e) => {
                peer.link = None;
                Err(failed(e))
            }
        }
    }

    /// The same communicator, starting with the connections `links` kept
    /// from this process's previous communicator, and leaving its own
    /// there when dropped (see [`Links`]).
    pub fn with_links(mut self, links: Arc<Links>) -> Self {
        for (rank, peer) in self.peers.iter_mut().enumerate() {
            let peer = peer.get_mut().unwrap_or_else(|e| e.into_inner());
            peer.link = links.take(rank, &peer.endpoint);
            peer.reused = peer.link.is_some();
        }
        self.links = Some(links);
        self
    }
}

impl Drop for NetComm {
    fn drop(&mut self) {
        let Some(links) = self.links.take() else {
            return;
        };
        for (rank, peer) in self.peers.iter_mut().enumerate() {
            let peer = peer.get_mut().unwrap_or_else(|e| e.into_inner());
            if let (Some(link), false) = (peer.link.take(), peer.down) {
                links.keep(rank, peer.endpoint.clone(), link);
            }
        }
    }
}
