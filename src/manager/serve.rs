//! The manager's listener: accepts connections, checks the job's secret,
//! and answers requests. Slow work (queueing under the `wait` policy,
//! draining, writing received copies) runs on blocking threads, so one
//! connection never holds up another.

use super::proto::{self, Put, Reply, Request, MAX_COPY};
use super::Shared;
use crate::auth::{self, Channel};
use crate::comm::net::{bind_private, Bind, Endpoint};
use crate::level::{CopyStore, Level};
use bytes::BytesMut;
use futures_util::{SinkExt, StreamExt};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::codec::Framed;

/// Starts the listener thread; returns the address, the stop switch and the thread.
pub(super) fn start(
    shared: Arc<Shared>,
) -> std::io::Result<(
    Endpoint,
    tokio::sync::oneshot::Sender<()>,
    std::thread::JoinHandle<()>,
)> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let bind = shared.opts.bind.clone();
    let (endpoint, unix, tcp) = rt.block_on(async {
        match bind {
            Bind::Unix(path) => {
                let l = bind_private(&path)?;
                std::io::Result::Ok((Endpoint::Unix(path), Some(l), None))
            }
            Bind::Tcp(ip) => {
                let l = tokio::net::TcpListener::bind(SocketAddr::new(ip, 0)).await?;
                Ok((Endpoint::Tcp(l.local_addr()?), None, Some(l)))
            }
        }
    })?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("frame-manager-io".into())
        .spawn(move || {
            rt.block_on(async move {
                let gate = auth::Gate::default();
                let accept = async {
                    loop {
                        let shared = Arc::clone(&shared);
                        if let Some(l) = &unix {
                            let Ok((s, _)) = l.accept().await else {
                                continue;
                            };
                            let Some(pass) = gate.admit() else { continue };
                            tokio::spawn(connection(s, pass, shared));
                        } else if let Some(l) = &tcp {
                            let Ok((s, _)) = l.accept().await else {
                                continue;
                            };
                            let Some(pass) = gate.admit() else { continue };
                            let _ = s.set_nodelay(true);
                            tokio::spawn(connection(s, pass, shared));
                        }
                    }
                };
                tokio::select! {
                    _ = accept => {}
                    _ = stopped => {}
                }
            });
        })?;
    Ok((endpoint, stop, thread))
}

/// Bytes being received.
struct Incoming {
    job_id: String,
    what: Put,
    len: u64,
    bytes: Vec<u8>,
}

/// How many bytes a `Put` announces, if acceptable.
fn announced(what: &Put) -> Result<u64, String> {
    let len = match what {
        Put::File { level, meta } if *level == Level::L2 => meta.file_len,
        Put::File { level, .. } => {
            return Err(format!("no copies are kept at level {}", level.number()))
        }
        Put::Term(t) => t.group.piece,
    };
    if len > MAX_COPY {
        return Err(format!("refusing {len} bytes"));
    }
    Ok(len)
}

/// Serves one connection until it closes or misbehaves.
async fn connection<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    pass: tokio::sync::OwnedSemaphorePermit,
    shared: Arc<Shared>,
) {
    let proved = auth::accept(&mut stream, &shared.opts.secret, Channel::Manager).await;
    drop(pass);
    if let Err(e) = proved {
        tracing::warn!(error = %e, "manager: dropping a connection that failed the job's handshake");
        return;
    }
    let mut conn = Framed::new(stream, proto::codec());
    let mut incoming: Option<Incoming> = None;
    while let Some(frame) = conn.next().await {
        let Ok(frame): Result<BytesMut, _> = frame else {
            return;
        };
        let Ok((req, payload)) = proto::split::<Request>(frame) else {
            tracing::warn!("manager: dropping a connection that sent a bad frame");
            return;
        };
        let reply = match req {
            Request::Put { job_id, what } => match announced(&what) {
                Ok(len) => {
                    incoming = Some(Incoming {
                        job_id,
                        what,
                        len,
                        bytes: Vec::new(),
                    });
                    None
                }
                Err(e) => Some(Reply::Error(e)),
            },
            Request::Data => match incoming.as_mut() {
                Some(inc) if (inc.bytes.len() + payload.len()) as u64 <= inc.len => {
                    inc.bytes.extend_from_slice(&payload);
                    None
                }
                _ => {
                    tracing::warn!(
                        "manager: dropping a connection that sent more data than announced"
                    );
                    return;
                }
            },
            Request::End => {
                let Some(inc) = incoming.take() else {
                    return;
                };
                Some(store(&shared, inc).await)
            }
            other => Some(answer(&shared, other).await),
        };
        if let Some(reply) = reply {
            if conn.send(proto::join(&reply, &[])).await.is_err() {
                return;
            }
        }
    }
}

/// Keeps what a `Put` brought: a file copy is written at once; a parity
/// term is added to its shard (written once complete).
async fn store(shared: &Arc<Shared>, inc: Incoming) -> Reply {
    if inc.bytes.len() as u64 != inc.len {
        return Reply::Error(format!("got {} of {} bytes", inc.bytes.len(), inc.len));
    }
    let shared = Arc::clone(shared);
    let local = shared.opts.local_dir.clone();
    let done = tokio::task::spawn_blocking(move || match inc.what {
        Put::File { level, meta } => CopyStore::open(&local, &inc.job_id, level, shared.who())
            .and_then(|s| s.put(&meta, &inc.bytes))
            .map_err(|e| e.to_string()),
        Put::Term(term) => shared.add_term(&inc.job_id, &term, &inc.bytes),
    })
    .await;
    match done {
        Ok(Ok(())) => Reply::Ok,
        Ok(Err(e)) => Reply::Error(e),
        Err(e) => Reply::Error(e.to_string()),
    }
}

/// Answers a request other than a copy.
async fn answer(shared: &Arc<Shared>, req: Request) -> Reply {
    let shared = Arc::clone(shared);
    let done = tokio::task::spawn_blocking(move || match req {
        Request::Submit(task) => shared.submit(task),
        Request::Status { job_id, keys } => shared.status(&job_id, &keys),
        Request::Commit { commit } => shared.chore(super::Work::Commit(commit)),
        Request::Remove { order } => shared.chore(super::Work::Remove(order)),
        Request::Drain => shared.drain(),
        Request::Layout { job_id, layout } => match shared.add_layout(&job_id, &layout) {
            Ok(()) => Reply::Ok,
            Err(e) => Reply::Error(e),
        },
        Request::Put { .. } | Request::Data | Request::End => {
            Reply::Error("unexpected data frame".into())
        }
    })
    .await;
    done.unwrap_or_else(|e| Reply::Error(e.to_string()))
}
