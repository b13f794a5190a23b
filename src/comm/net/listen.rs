//! Accepting connections from peers and reading their frames into the hub.

use super::wire;
use super::{Endpoint, Envelope, Hub};
use futures_util::StreamExt;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use tokio::io::AsyncRead;
use tokio_util::codec::FramedRead;

/// Where to listen.
#[derive(Clone, Debug)]
pub enum Bind {
    /// A Unix-domain socket at this path (replaced if it exists).
    Unix(PathBuf),
    /// TCP on this address, on a port chosen by the system.
    Tcp(IpAddr),
}

/// Starts listening (on the current tokio runtime) and returns the address
/// peers can reach. Every accepted connection gets a task that feeds its
/// frames into `hub` until the connection closes.
pub async fn listen(bind: Bind, hub: Arc<Hub>) -> io::Result<Endpoint> {
    match bind {
        Bind::Unix(path) => {
            let _ = std::fs::remove_file(&path);
            let listener = tokio::net::UnixListener::bind(&path)?;
            tokio::spawn(async move {
                while let Ok((stream, _)) = listener.accept().await {
                    tokio::spawn(read_frames(stream, Arc::clone(&hub)));
                }
            });
            Ok(Endpoint::Unix(path))
        }
        Bind::Tcp(ip) => {
            let listener = tokio::net::TcpListener::bind(SocketAddr::new(ip, 0)).await?;
            let addr = listener.local_addr()?;
            tokio::spawn(async move {
                while let Ok((stream, _)) = listener.accept().await {
                    let _ = stream.set_nodelay(true);
                    tokio::spawn(read_frames(stream, Arc::clone(&hub)));
                }
            });
            Ok(Endpoint::Tcp(addr))
        }
    }
}

/// Decodes frames from one connection until it closes or misbehaves.
async fn read_frames<S: AsyncRead + Unpin>(stream: S, hub: Arc<Hub>) {
    let mut frames = FramedRead::with_capacity(stream, wire::FrameDecoder::new(), 64 * 1024);
    while let Some(next) = frames.next().await {
        let frame = match next.and_then(wire::decode) {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(error = %e, "dropping a connection that sent a bad frame");
                return;
            }
        };
        hub.deliver(Envelope {
            epoch: frame.epoch,
            src: frame.src as usize,
            tag: frame.tag,
            data: frame.payload,
        });
    }
}
