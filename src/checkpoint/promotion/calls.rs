//! The node's manager as the lowest rank of a node reaches it: finding it
//! (the one a link names, the runtime's, or an inline one started here),
//! calling it, connecting again to one the daemon restarted, and giving
//! up on a call when the job starts a recovery, so that the rank rolls
//! back with the others instead of waiting out a busy manager.

use super::Promotions;
use crate::auth::Secret;
use crate::comm::net::Endpoint;
use crate::comm::{CommError, RecoveryWatch};
use crate::config::{Config, ManagerMode};
use crate::error::Error;
use crate::manager::inline::{self, Listen};
use crate::manager::{Client, Link, Manager, Reply, Request};
use crate::node::NodePlace;
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a rank waits for its node's runtime manager to accept.
const CONNECT_WAIT: Duration = Duration::from_secs(10);

/// The runtime's manager of this node, when the program runs under
/// `frame run` with its checkpoints in the node's directory and the
/// configuration lets it (`manager.mode = "auto"`).
fn runtime_manager(cfg: &Config, place: &NodePlace) -> Option<Endpoint> {
    if cfg.manager.mode != ManagerMode::Auto {
        return None;
    }
    let node = place.runtime.as_ref()?;
    let socket = node.manager.as_ref()?;
    (node.dir == cfg.storage.local_dir).then(|| Endpoint::Unix(socket.clone()))
}

/// Connects to the node's manager: the one `link` names, the runtime's
/// (waiting a moment for either, as it may be starting or restarting,
/// unless `watch` says a recovery started), or an inline one started here.
pub(super) fn connect_manager(
    cfg: &Config,
    place: &NodePlace,
    secret: &Secret,
    link: Option<&Link>,
    watch: &RecoveryWatch,
) -> io::Result<(Option<Arc<Manager>>, Client)> {
    if let Some(link) = link {
        let c = connect_waiting(&link.endpoint, secret, CONNECT_WAIT, watch)?;
        return Ok((None, c));
    }
    if let Some(endpoint) = runtime_manager(cfg, place) {
        return Ok((
            None,
            connect_waiting(&endpoint, secret, CONNECT_WAIT, watch)?,
        ));
    }
    let listen = match cfg.manager.address.parse() {
        Ok(ip) => Listen::Tcp(ip),
        Err(_) => Listen::Local,
    };
    let m = inline::ensure(
        &cfg.job.id,
        place.id,
        &cfg.storage.local_dir,
        &listen,
        secret,
        cfg.manager.queue as usize,
        cfg.manager.when_full,
    )?;
    let c = Client::connect(m.endpoint(), secret)?;
    Ok((Some(m), c))
}

/// Connects to `endpoint`, trying again until `wait` has passed (a daemon
/// restarting its manager rebinds the socket within milliseconds) or
/// `watch` says a recovery started.
fn connect_waiting(
    endpoint: &Endpoint,
    secret: &Secret,
    wait: Duration,
    watch: &RecoveryWatch,
) -> io::Result<Client> {
    let deadline = Instant::now() + wait;
    let mut pause = Duration::from_millis(5);
    loop {
        match Client::connect(endpoint, secret) {
            Ok(c) => return Ok(c),
            Err(e) if Instant::now() >= deadline => return Err(e),
            Err(e) if watch.started().is_some() => {
                return Err(io::Error::new(io::ErrorKind::Interrupted, e.to_string()))
            }
            Err(_) => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(100));
            }
        }
    }
}

impl Promotions {
    /// Sends `req` to the node's manager (lowest rank of each node only;
    /// `None` elsewhere). A broken connection (the daemon restarted its
    /// manager) is made again, waiting up to [`CONNECT_WAIT`] for the new
    /// manager; a manager that stayed away that long is tried only once
    /// per call afterwards, so a node without one does not slow its ranks.
    ///
    /// A recovery started before or during the call ends it with an error
    /// of kind [`Interrupted`](io::ErrorKind::Interrupted) (see
    /// [`interruption`](Self::interruption)). After any failed call the
    /// connection is not used again (a late reply on it would be taken
    /// for the next request's): the next call connects anew.
    pub(super) fn call(&mut self, req: &Request) -> Option<io::Result<Reply>> {
        let watch = self.watch.clone();
        let stop = || watch.started().is_some();
        let client = self.client.as_mut()?;
        if !self.stale {
            match client.call_unless(req, &stop) {
                Ok(reply) => {
                    self.manager_away = false;
                    return Some(Ok(reply));
                }
                // The reply may still come on this connection: it must
                // never be read as the answer to a later request.
                Err(e) => {
                    self.stale = true;
                    if e.kind() == io::ErrorKind::Interrupted {
                        return Some(Err(e));
                    }
                }
            }
        }
        if stop() {
            return Some(Err(io::Error::new(
                io::ErrorKind::Interrupted,
                "a recovery started: the node's manager was not called",
            )));
        }
        let endpoint = client.endpoint().clone();
        let wait = if self.manager_away {
            Duration::ZERO
        } else {
            CONNECT_WAIT
        };
        let again = connect_waiting(&endpoint, &self.secret, wait, &watch).and_then(|mut c| {
            let reply = c.call_unless(req, &stop);
            self.client = Some(c);
            reply
        });
        match &again {
            Ok(_) => (self.manager_away, self.stale) = (false, false),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => self.manager_away = true,
        }
        Some(again)
    }

    /// The error a rank rolls back with when `e`, a call's, says the call
    /// was given up for a recovery.
    pub(super) fn interruption(&self, e: &io::Error) -> Option<Error> {
        if e.kind() != io::ErrorKind::Interrupted {
            return None;
        }
        let epoch = self.watch.started()?;
        Some(Error::Comm(CommError::Interrupted { epoch }))
    }
}
