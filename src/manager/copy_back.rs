//! Giving a kept copy back. A rank whose node is gone (the replacement of
//! one of its ranks, started on a spare node in a logged recovery) asks the
//! manager of the node that keeps its level-2 copy for it
//! ([`Request::Get`]). The manager answers with the copy's level-1 record
//! ([`Reply::Copy`]) and streams the file in [`Reply::Data`] frames of at
//! most [`DATA_PIECE`] bytes, read one piece at a time; the rank installs
//! it into its level 1 as it arrives, every chunk checked on the way
//! (`L1Store::install_from`). Neither side holds more than a piece.

use super::client::Client;
use super::proto::{join, Reply, Request, DATA_PIECE};
use super::Shared;
use crate::format::Metadata;
use crate::level::stream::PieceSource;
use crate::level::{CopyStore, Level, StorageError};
use bytes::Bytes;
use futures_util::SinkExt;
use std::io;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::codec::{Framed, LengthDelimitedCodec};

/// Why a copy could not be had (the manager's answer, the connection, or
/// the installation).
#[derive(Debug)]
pub(crate) struct CopyError(pub(crate) String);

impl From<StorageError> for CopyError {
    fn from(e: StorageError) -> Self {
        CopyError(e.to_string())
    }
}

/// Answers a [`Request::Get`]: the copy this node keeps of `rank`'s file of
/// checkpoint `id`, or why there is none. `false` if the connection broke.
pub(super) async fn give<S: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut Framed<S, LengthDelimitedCodec>,
    shared: &Arc<Shared>,
    job_id: String,
    id: u64,
    rank: u32,
    world: u32,
) -> bool {
    let local = shared.opts.local_dir.clone();
    let opened = tokio::task::spawn_blocking(move || {
        match CopyStore::open_existing(&local, &job_id, Level::L2) {
            Ok(Some(store)) => store.open_copy(id, rank, world).map_err(|e| e.to_string()),
            Ok(None) => Err("this node keeps no level-2 copies of the job".to_string()),
            Err(e) => Err(e.to_string()),
        }
    })
    .await
    .unwrap_or_else(|e| Err(e.to_string()));
    let (meta, mut pieces) = match opened {
        Ok(opened) => opened,
        Err(e) => {
            let why = format!("no level-2 copy of rank {rank}'s checkpoint {id} here: {e}");
            return conn.send(join(&Reply::Error(why), &[])).await.is_ok();
        }
    };
    if conn
        .send(join(&Reply::Copy(Box::new(meta)), &[]))
        .await
        .is_err()
    {
        return false;
    }
    let mut buf = Vec::new();
    loop {
        let read = tokio::task::spawn_blocking(move || {
            let r = pieces.next_into(&mut buf, DATA_PIECE);
            (pieces, buf, r)
        })
        .await;
        let Ok((p, b, read)) = read else {
            return false;
        };
        (pieces, buf) = (p, b);
        let frame = match read {
            Ok(true) => join(&Reply::Data, &buf),
            Ok(false) => return true,
            Err(e) => join(
                &Reply::Error(format!(
                    "reading rank {rank}'s copy of checkpoint {id}: {e}"
                )),
                &[],
            ),
        };
        if conn.send(frame).await.is_err() {
            return false;
        }
    }
}

/// A copy arriving from a manager, as the pieces of its installation: each
/// data frame's own payload, lent.
pub(crate) struct Arriving<'a> {
    client: &'a mut Client,
    left: u64,
    piece: Bytes,
}

impl Client {
    /// Asks the manager for the level-2 copy its node keeps of `rank`'s file
    /// of checkpoint `id`: the copy's record and its bytes as they arrive,
    /// or the manager's reason for having none. Drop the client after an
    /// installation that failed part way.
    pub(crate) fn get_copy(
        &mut self,
        job_id: &str,
        id: u64,
        rank: u32,
        world: u32,
    ) -> Result<(Metadata, Arriving<'_>), CopyError> {
        let endpoint = self.endpoint().clone();
        let lost = |e: io::Error| CopyError(format!("the manager at {endpoint}: {e}"));
        let req = Request::Get {
            job_id: job_id.to_string(),
            id,
            rank,
            world,
        };
        self.send(&req, &[]).map_err(&lost)?;
        match self.reply_frame().map_err(&lost)?.0 {
            Reply::Copy(meta) => {
                let left = meta.file_len;
                Ok((
                    *meta,
                    Arriving {
                        client: self,
                        left,
                        piece: Bytes::new(),
                    },
                ))
            }
            Reply::Error(e) => Err(CopyError(e)),
            other => Err(CopyError(format!(
                "the manager at {endpoint} answered a request for a copy with {other:?}"
            ))),
        }
    }
}

impl PieceSource for Arriving<'_> {
    type Error = CopyError;

    fn next_piece(&mut self) -> Result<Option<&[u8]>, CopyError> {
        if self.left == 0 {
            return Ok(None);
        }
        let (reply, payload) = self
            .client
            .reply_frame()
            .map_err(|e| CopyError(e.to_string()))?;
        match reply {
            Reply::Data if !payload.is_empty() && payload.len() as u64 <= self.left => {
                self.left -= payload.len() as u64;
                self.piece = payload;
                Ok(Some(&self.piece))
            }
            Reply::Data => Err(CopyError(format!(
                "the manager sent a piece of {} bytes with {} left",
                payload.len(),
                self.left
            ))),
            Reply::Error(e) => Err(CopyError(e)),
            other => Err(CopyError(format!(
                "the manager sent {other:?} in the middle of a copy"
            ))),
        }
    }
}
