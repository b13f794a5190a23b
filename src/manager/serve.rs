//! The manager's listener: accepts connections, checks the job's secret,
//! and answers requests. Slow work (queueing under the `wait` policy,
//! draining, writing received copies) runs on blocking threads, so one
//! connection never holds up another.

use super::proto::{self, Reply, Request, MAX_COPY};
use super::Shared;
use crate::auth::{self, Channel};
use crate::comm::net::{bind_private, Bind, Endpoint};
use crate::format::Metadata;
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

/// A copy being received.
struct Incoming {
    job_id: String,
    level: Level,
    meta: Box<Metadata>,
    bytes: Vec<u8>,
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
            Request::Copy {
                job_id,
                level,
                meta,
            } => {
                if meta.file_len > MAX_COPY || !matches!(level, Level::L2 | Level::L3) {
                    Some(Reply::Error(format!(
                        "refusing a level-{} copy of {} bytes",
                        level.number(),
                        meta.file_len
                    )))
                } else {
                    incoming = Some(Incoming {
                        job_id,
                        level,
                        meta,
                        bytes: Vec::new(),
                    });
                    None
                }
            }
            Request::Data => match incoming.as_mut() {
                Some(inc) if (inc.bytes.len() + payload.len()) as u64 <= inc.meta.file_len => {
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
                Some(store_copy(&shared, inc).await)
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

/// Writes a received copy into the node's level directory.
async fn store_copy(shared: &Arc<Shared>, inc: Incoming) -> Reply {
    if inc.bytes.len() as u64 != inc.meta.file_len {
        return Reply::Error(format!(
            "copy of rank {}'s file ended after {} of {} bytes",
            inc.meta.rank,
            inc.bytes.len(),
            inc.meta.file_len
        ));
    }
    let local = shared.opts.local_dir.clone();
    let done = tokio::task::spawn_blocking(move || {
        CopyStore::open(&local, &inc.job_id, inc.level, inc.meta.rank)
            .and_then(|s| s.put(&inc.meta, &inc.bytes))
    })
    .await;
    match done {
        Ok(Ok(())) => Reply::Ok,
        Ok(Err(e)) => Reply::Error(e.to_string()),
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
        Request::Copy { .. } | Request::Data | Request::End => {
            Reply::Error("unexpected copy frame".into())
        }
    })
    .await;
    done.unwrap_or_else(|e| Reply::Error(e.to_string()))
}
