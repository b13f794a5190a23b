//! The manager's listener: accepts connections, checks the job's secret,
//! and answers requests. Slow work (queueing under the `wait` policy,
//! draining, writing received copies piece by piece) runs on blocking threads, so one
//! connection never holds up another.

use super::fences::Stale;
use super::parity::ParityError;
use super::proto::{self, Put, Reply, Request, Term, MAX_COPY};
use super::Shared;
use crate::auth::{self, Channel};
use crate::comm::net::{bind_private, Bind, Endpoint};
use crate::level::{CopyStore, IncomingCopy, Level, StorageError};
use bytes::{Bytes, BytesMut};
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
    let peers = shared.opts.peer_listener.clone();
    let (endpoint, unix, tcp, peers) = rt.block_on(async {
        let peers = match peers {
            Some(l) => {
                let l = l.try_clone()?;
                l.set_nonblocking(true)?;
                Some(tokio::net::TcpListener::from_std(l)?)
            }
            None => None,
        };
        match bind {
            Bind::Unix(path) => {
                let l = bind_private(&path)?;
                std::io::Result::Ok((Endpoint::Unix(path), Some(l), None, peers))
            }
            Bind::Tcp(ip) => {
                let l = tokio::net::TcpListener::bind(SocketAddr::new(ip, 0)).await?;
                Ok((Endpoint::Tcp(l.local_addr()?), None, Some(l), peers))
            }
        }
    })?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("frame-manager-io".into())
        .spawn(move || {
            rt.block_on(async move {
                // One gate for every listener: pending handshakes are capped
                // for the manager as a whole.
                let gate = auth::Gate::default();
                tokio::select! {
                    _ = accept_unix(unix.as_ref(), &gate, &shared) => {}
                    _ = accept_tcp(tcp.as_ref(), &gate, &shared) => {}
                    _ = accept_tcp(peers.as_ref(), &gate, &shared) => {}
                    _ = stopped => {}
                }
            });
        })?;
    Ok((endpoint, stop, thread))
}

/// Serves the connections of a Unix listener, if there is one.
async fn accept_unix(
    listener: Option<&tokio::net::UnixListener>,
    gate: &auth::Gate,
    shared: &Arc<Shared>,
) {
    let Some(l) = listener else {
        return std::future::pending().await;
    };
    loop {
        if let Ok((s, _)) = l.accept().await {
            tokio::spawn(connection(s, gate.admit(), Arc::clone(shared)));
        }
    }
}

/// Serves the connections of a TCP listener, if there is one.
async fn accept_tcp(
    listener: Option<&tokio::net::TcpListener>,
    gate: &auth::Gate,
    shared: &Arc<Shared>,
) {
    let Some(l) = listener else {
        return std::future::pending().await;
    };
    loop {
        if let Ok((s, _)) = l.accept().await {
            let _ = s.set_nodelay(true);
            tokio::spawn(connection(s, gate.admit(), Arc::clone(shared)));
        }
    }
}

/// Why the manager refuses, or fails to keep, what a peer sends: the text
/// of its answer.
#[derive(Debug, thiserror::Error)]
enum Refusal {
    /// A copy of an epoch the job has left.
    #[error(transparent)]
    Stale(#[from] Stale),
    /// A copy larger than any the manager takes.
    #[error("refusing a copy of {0} bytes")]
    TooLarge(u64),
    /// A copy for a level that keeps none.
    #[error("no copies are kept at level {0}")]
    NoCopiesAt(u8),
    /// Parity terms at an offset where no window starts.
    #[error("no window of a {piece}-byte shard starts at {offset}")]
    NoWindow {
        /// The shard's length.
        piece: u64,
        /// The offset given.
        offset: u64,
    },
    /// The copy could not be stored.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// The parity terms could not be added.
    #[error(transparent)]
    Parity(#[from] ParityError),
    /// The copy ended before its announced length.
    #[error("{0} bytes short")]
    Short(u64),
    /// The copy was refused or lost before it ended.
    #[error("the copy was not received")]
    NotReceived,
    /// A window of terms ended before its length.
    #[error("got {got} of {len} bytes")]
    Incomplete {
        /// Bytes received.
        got: u64,
        /// Bytes announced.
        len: u64,
    },
    /// The blocking task doing the work failed.
    #[error("a manager task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
}

/// What a connection is receiving.
enum Incoming {
    /// A copy of a rank's file, written piece by piece as it arrives
    /// (`None` while a piece is being written, or after a failure).
    File {
        copy: Option<Box<IncomingCopy>>,
        left: u64,
        failed: Option<Refusal>,
    },
    /// A window of parity terms (at most [`WINDOW`](proto::WINDOW) bytes), summed once
    /// whole: the pieces as they arrived (one, from frame's own managers).
    Term {
        job_id: String,
        term: Box<Term>,
        len: u64,
        pieces: Vec<Bytes>,
    },
}

/// Starts receiving what a `Put` announces.
async fn begin(shared: &Arc<Shared>, job_id: String, what: Put) -> Result<Incoming, Refusal> {
    match what {
        Put::File { level, meta } if level == Level::L2 => {
            if meta.file_len > MAX_COPY {
                return Err(Refusal::TooLarge(meta.file_len));
            }
            let local = shared.opts.local_dir.clone();
            let who = shared.who();
            let left = meta.file_len;
            let copy = tokio::task::spawn_blocking(move || {
                CopyStore::open(&local, &job_id, level, who).and_then(|s| s.begin_put(&meta))
            })
            .await??;
            Ok(Incoming::File {
                copy: Some(Box::new(copy)),
                left,
                failed: None,
            })
        }
        Put::File { level, .. } => Err(Refusal::NoCopiesAt(level.number())),
        Put::Term(term) => {
            let len =
                proto::window_len(term.group.piece, term.offset).ok_or(Refusal::NoWindow {
                    piece: term.group.piece,
                    offset: term.offset,
                })?;
            Ok(Incoming::Term {
                job_id,
                term,
                len,
                pieces: Vec::new(),
            })
        }
    }
}

/// Takes the next piece of what is being received; `false` if the peer
/// sent more than it announced.
async fn piece(inc: &mut Incoming, payload: Bytes) -> bool {
    match inc {
        Incoming::File { copy, left, failed } => {
            let n = payload.len() as u64;
            if n > *left {
                return false;
            }
            *left -= n;
            let Some(mut c) = copy.take() else {
                return true;
            };
            let wrote = tokio::task::spawn_blocking(move || c.write(&payload).map(|()| c)).await;
            match wrote {
                Ok(Ok(c)) => *copy = Some(c),
                Ok(Err(e)) => *failed = Some(e.into()),
                Err(e) => *failed = Some(e.into()),
            }
            true
        }
        Incoming::Term { len, pieces, .. } => {
            let had: usize = pieces.iter().map(Bytes::len).sum();
            if (had + payload.len()) as u64 > *len {
                return false;
            }
            pieces.push(payload);
            true
        }
    }
}

/// Serves one connection until it closes or misbehaves.
async fn connection<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    mut pass: auth::Pass,
    shared: Arc<Shared>,
) {
    let Some(proved) = pass
        .hold(auth::accept(
            &mut stream,
            &shared.opts.secret,
            Channel::Manager,
        ))
        .await
    else {
        return;
    };
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
            Request::Put {
                job_id,
                what,
                fence,
            } => match admit_and_begin(&shared, job_id, what, fence).await {
                Ok(inc) => {
                    incoming = Some(inc);
                    None
                }
                // The data frames that follow are dropped, the error is
                // the answer to the put.
                Err(e) => {
                    incoming = Some(Incoming::File {
                        copy: None,
                        left: MAX_COPY,
                        failed: Some(e),
                    });
                    None
                }
            },
            Request::Data => {
                let taken = match incoming.as_mut() {
                    Some(inc) => piece(inc, payload).await,
                    None => false,
                };
                if !taken {
                    tracing::warn!(
                        "manager: dropping a connection that sent more data than announced"
                    );
                    return;
                }
                None
            }
            Request::Get {
                job_id,
                id,
                rank,
                world,
            } => {
                if !super::copy_back::give(&mut conn, &shared, job_id, id, rank, world).await {
                    return;
                }
                None
            }
            Request::Shard { job_id, id, window } => {
                if !super::shard_back::give(&mut conn, &shared, job_id, id, window).await {
                    return;
                }
                None
            }
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

/// Starts taking in what a `Put` of `fence` brings, unless it belongs to
/// an epoch the job has left (see `fences.rs`).
async fn admit_and_begin(
    shared: &Arc<Shared>,
    job_id: String,
    what: Put,
    fence: Option<crate::level::Fence>,
) -> Result<Incoming, Refusal> {
    shared.fences.admit(&job_id, fence)?;
    begin(shared, job_id, what).await
}

/// Ends what a `Put` brought: a file copy is checked whole and named; a
/// window of parity terms is added to its shard (written once complete).
async fn store(shared: &Arc<Shared>, inc: Incoming) -> Reply {
    let shared = Arc::clone(shared);
    let done = tokio::task::spawn_blocking(move || match inc {
        Incoming::File {
            failed: Some(e), ..
        } => Err(e),
        Incoming::File { left, .. } if left > 0 => Err(Refusal::Short(left)),
        Incoming::File { copy, .. } => match copy {
            Some(c) => Ok(c.finish()?),
            None => Err(Refusal::NotReceived),
        },
        Incoming::Term {
            len, ref pieces, ..
        } if pieces.iter().map(Bytes::len).sum::<usize>() as u64 != len => {
            Err(Refusal::Incomplete {
                got: pieces.iter().map(Bytes::len).sum::<usize>() as u64,
                len,
            })
        }
        Incoming::Term {
            job_id,
            term,
            mut pieces,
            ..
        } => match pieces.len() {
            1 => shared.add_term(&job_id, &term, &pieces.swap_remove(0)),
            _ => shared.add_term(&job_id, &term, &pieces.concat()),
        }
        .map_err(Refusal::from),
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
        Request::Submit(task) => {
            shared.fences.note(&task.job_id, task.fence);
            shared.submit(task)
        }
        Request::Status { job_id, keys } => shared.status(&job_id, &keys),
        // Levels 2 and 3 prune at once, not after the promotions queued
        // before the order: what a node holds stays within its retention
        // however far the promotions lag. Level 4's pruning shares chunks
        // with the level-4 write in progress, so it waits its turn.
        Request::Commit { commit } if commit.level != crate::level::Level::L4 => {
            shared.fences.note(&commit.job_id, commit.fence);
            shared.commit(&commit);
            Reply::Ok
        }
        Request::Commit { commit } => shared.chore(super::Work::Commit(commit)),
        Request::Remove { order } => shared.chore(super::Work::Remove(order)),
        Request::Drain => shared.drain(),
        Request::Layout {
            job_id,
            layout,
            fence,
        } => match (shared.fences.admit(&job_id, fence).map_err(Refusal::from))
            .and_then(|()| Ok(shared.add_layout(&job_id, &layout)?))
        {
            Ok(()) => Reply::Ok,
            Err(e) => Reply::Error(e.to_string()),
        },
        Request::Put { .. }
        | Request::Data
        | Request::End
        | Request::Get { .. }
        | Request::Shard { .. } => Reply::Error("unexpected data frame".into()),
    })
    .await;
    done.unwrap_or_else(|e| Reply::Error(e.to_string()))
}
