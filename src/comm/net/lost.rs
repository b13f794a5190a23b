//! Peers the network lost: a rank on another host that stays alive but
//! that this rank can no longer reach (a cut cable, a failed switch port,
//! two hosts that lost each other while both still reach the runtime).
//!
//! A dead peer breaks its connections at once (its host answers with a
//! reset); a lost one answers nothing at all. So every TCP connection
//! between ranks (outgoing, and accepted by the listener) fails when a
//! peer leaves bytes sent to it, or keepalive probes on an idle
//! connection, unanswered for [`Security::lost_after`](super::Security):
//! the writer's call fails, and the reader of a connection from the peer
//! marks it lost in the hub for the epoch of its messages. A communicator
//! whose send fails that way, or whose receive waits on a peer marked
//! lost, tells the runtime once ([`LostPeers`]) and then waits for the
//! recovery like a rank whose peer died: the runtime, which still reaches
//! both sides, decides which of them to give up.

use super::Rank;
use rustix::net::sockopt;
use std::io;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::Duration;

/// Where a communicator reports a peer the network lost (the runtime's
/// root, through the rank's daemon).
pub type LostPeers = Arc<dyn Fn(Rank) + Send + Sync>;

/// Makes the TCP connection `s` fail once its peer leaves bytes, or
/// keepalive probes while it is idle, unanswered for `after`.
pub(super) fn watch<S: AsFd>(s: &S, after: Duration) -> io::Result<()> {
    let ms = u32::try_from(after.as_millis()).unwrap_or(u32::MAX).max(1);
    sockopt::set_tcp_user_timeout(s, ms)?;
    sockopt::set_socket_keepalive(s, true)?;
    // Probes start after a quarter of the bound of idleness, so an idle
    // connection is judged within about 1.25 times it.
    let probe = (after / 4).max(Duration::from_secs(1));
    sockopt::set_tcp_keepidle(s, probe)?;
    sockopt::set_tcp_keepintvl(s, probe)?;
    Ok(())
}

/// Whether `e` says the peer's host did not answer (rather than that the
/// peer process is gone, which its host reports at once).
pub(super) fn unanswered(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::TimedOut
            | io::ErrorKind::HostUnreachable
            | io::ErrorKind::NetworkUnreachable
    )
}

#[cfg(test)]
mod tests;
