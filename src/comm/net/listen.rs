//! Accepting connections from peers and reading their frames into the hub.

use super::wire;
use super::{Endpoint, Envelope, Hub, Security};
use crate::auth::{self, Channel};
use futures_util::StreamExt;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::Semaphore;
use tokio_util::codec::FramedRead;

/// Where to listen.
#[derive(Clone, Debug)]
pub enum Bind {
    /// A Unix-domain socket at this path (replaced if it exists), mode 0600.
    Unix(PathBuf),
    /// TCP on this address, on a port chosen by the system.
    Tcp(IpAddr),
}

/// Queue budget is counted in units of this many bytes.
const UNIT: u64 = 1024;

/// Starts listening (on the current tokio runtime) and returns the address
/// peers can reach. Every accepted connection gets a task that runs the
/// job's handshake, then feeds the connection's frames into `hub` until it
/// closes or misbehaves.
pub async fn listen(bind: Bind, hub: Arc<Hub>, security: Arc<Security>) -> io::Result<Endpoint> {
    match bind {
        Bind::Unix(path) => {
            let listener = bind_private(&path)?;
            tokio::spawn(async move {
                let gate = auth::Gate::default();
                while let Ok((stream, _)) = listener.accept().await {
                    let pass = gate.admit();
                    tokio::spawn(serve(stream, pass, Arc::clone(&hub), Arc::clone(&security)));
                }
            });
            Ok(Endpoint::Unix(path))
        }
        Bind::Tcp(ip) => {
            let listener = tokio::net::TcpListener::bind(SocketAddr::new(ip, 0)).await?;
            let addr = listener.local_addr()?;
            tokio::spawn(async move {
                let gate = auth::Gate::default();
                while let Ok((stream, _)) = listener.accept().await {
                    let pass = gate.admit();
                    let _ = stream.set_nodelay(true);
                    if let Err(e) = super::lost::watch(&stream, security.lost_after) {
                        tracing::debug!(error = %e, "cannot bound a peer's silence");
                    }
                    tokio::spawn(serve(stream, pass, Arc::clone(&hub), Arc::clone(&security)));
                }
            });
            Ok(Endpoint::Tcp(addr))
        }
    }
}

/// Listens on a Unix socket at `path` that is never reachable under that
/// name with a mode other than 0600: it is bound under a temporary name,
/// made private, then renamed into place (replacing a leftover).
pub fn bind_private(path: &std::path::Path) -> io::Result<tokio::net::UnixListener> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let listener = tokio::net::UnixListener::bind(&tmp)?;
    let placed =
        std::fs::set_permissions(&tmp, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = placed {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(listener)
}

/// Authenticates one connection, then reads its frames.
async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    mut pass: auth::Pass,
    hub: Arc<Hub>,
    security: Arc<Security>,
) {
    let Some(proved) = pass
        .hold(auth::accept(&mut stream, &security.secret, Channel::Data))
        .await
    else {
        return;
    };
    drop(pass);
    if let Err(e) = proved {
        tracing::warn!(error = %e, "dropping a connection that failed the job's handshake");
        return;
    }
    read_frames(stream, hub, &security).await;
}

/// Decodes frames from one connection until it closes or misbehaves. At most
/// `max_queued` bytes of its messages wait in the hub; beyond that the
/// reader waits for the rank to consume them.
async fn read_frames<S: AsyncRead + Unpin>(stream: S, hub: Arc<Hub>, security: &Security) {
    let limits = security.limits;
    let max_payload = usize::try_from(limits.max_message).unwrap_or(usize::MAX);
    let units = (limits.max_queued / UNIT).clamp(1, u64::from(u32::MAX));
    let budget = Arc::new(Semaphore::new(units as usize));
    let mut frames =
        FramedRead::with_capacity(stream, wire::FrameDecoder::new(max_payload), 64 * 1024);
    // The sender, once a frame named it, and the epoch of its messages.
    let mut from = None;
    while let Some(next) = frames.next().await {
        let next = match next {
            Err(e) if super::lost::unanswered(&e) => {
                tracing::debug!(?from, error = %e, "a peer's connection went unanswered");
                if let Some((src, epoch)) = from {
                    hub.mark_lost(src, epoch);
                }
                return;
            }
            other => other,
        };
        let frame = match next.and_then(wire::decode) {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(error = %e, "dropping a connection that sent a bad frame");
                return;
            }
        };
        from = Some((frame.src as usize, frame.epoch));
        let need = (frame.payload.len() as u64 / UNIT + 1).min(units);
        let Ok(permit) = Arc::clone(&budget).acquire_many_owned(need as u32).await else {
            return;
        };
        hub.deliver(Envelope {
            epoch: frame.epoch,
            src: frame.src as usize,
            tag: frame.tag,
            seq: frame.seq,
            data: frame.payload,
            _budget: Some(permit),
        });
    }
}
