//! An outgoing connection from a rank to one peer: opened on the first
//! message to it, authenticated with the job's secret, and on TCP watched
//! for a peer the network lost (see `lost.rs`).

use super::{lost, Endpoint, Security};
use crate::auth::{self, Channel};
use std::io::{self, Write};

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
