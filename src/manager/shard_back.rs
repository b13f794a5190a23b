//! Giving level-3 shards back. The replacement of a rank whose node is
//! gone (started on a spare node in a logged recovery) rebuilds its own
//! file from the rest of its node's group: it asks a member's manager for
//! the group's manifest, then for the windows of the members' shards that
//! cover its file ([`Request::Shard`]), and decodes them itself. Each
//! answer ([`Reply::Shard`]) carries the manifest and at most
//! [`DATA_PIECE`] bytes, read from the node's level-3 files for that one
//! request: a manager holds no more than one window per connection.

use super::client::Client;
use super::proto::{join, Reply, Request, ShardWindow, DATA_PIECE};
use super::Shared;
use crate::level::erasure::{ErasureStore, GroupManifest, ShardReader};
use bytes::Bytes;
use futures_util::SinkExt;
use std::io;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::codec::{Framed, LengthDelimitedCodec};

use super::copy_back::CopyError;

/// Answers a [`Request::Shard`]: the manifest this node keeps of
/// checkpoint `id` and the window asked for, or why not. `false` if the
/// connection broke.
pub(super) async fn give<S: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut Framed<S, LengthDelimitedCodec>,
    shared: &Arc<Shared>,
    job_id: String,
    id: u64,
    window: Option<ShardWindow>,
) -> bool {
    let local = shared.opts.local_dir.clone();
    let read = tokio::task::spawn_blocking(move || read(&local, &job_id, id, window.as_ref()))
        .await
        .unwrap_or_else(|e| Err(e.to_string()));
    let frame = match read {
        Ok((m, bytes)) => join(&Reply::Shard(Box::new(m)), &bytes),
        Err(e) => join(
            &Reply::Error(format!("no level-3 data of checkpoint {id} here: {e}")),
            &[],
        ),
    };
    conn.send(frame).await.is_ok()
}

/// The manifest of checkpoint `id` kept under `local`, and `window`'s
/// bytes of the shard it names.
fn read(
    local: &std::path::Path,
    job_id: &str,
    id: u64,
    window: Option<&ShardWindow>,
) -> Result<(GroupManifest, Vec<u8>), String> {
    let store = ErasureStore::open_existing(local, job_id)
        .map_err(|e| e.to_string())?
        .ok_or("this node keeps no level-3 data of the job")?;
    let m = store.manifest(id).ok_or("no group manifest")?;
    let Some(w) = window else {
        return Ok((m, Vec::new()));
    };
    if w.nodes != m.nodes {
        return Err(format!(
            "its group is of nodes {:?}, not {:?}",
            m.nodes, w.nodes
        ));
    }
    let (pos, t) = (w.pos as usize, w.stripe as usize);
    let len = w.len as usize;
    if pos >= m.nodes.len() || t >= m.nodes.len() {
        return Err(format!(
            "position {pos}, stripe {t}: the group has {}",
            m.nodes.len()
        ));
    }
    if len > DATA_PIECE || w.offset.saturating_add(w.len as u64) > m.piece {
        return Err(format!(
            "{len} bytes at {} of a shard of {} (at most {DATA_PIECE} a request)",
            w.offset, m.piece
        ));
    }
    let reader = ShardReader::open(&store, &m, pos, &[t])?;
    let mut buf = vec![0u8; len];
    reader.read(t, w.offset, &mut buf)?;
    Ok((m, buf))
}

impl Client {
    /// Asks the manager for its group manifest of checkpoint `id` and,
    /// with `window`, those bytes of a shard; or the manager's reason for
    /// having none.
    pub(crate) fn get_shard(
        &mut self,
        job_id: &str,
        id: u64,
        window: Option<ShardWindow>,
    ) -> Result<(GroupManifest, Bytes), CopyError> {
        let endpoint = self.endpoint().clone();
        let lost = |e: io::Error| CopyError(format!("the manager at {endpoint}: {e}"));
        let want = window.as_ref().map_or(0, |w| w.len as usize);
        let req = Request::Shard {
            job_id: job_id.to_string(),
            id,
            window,
        };
        self.send(&req, &[]).map_err(&lost)?;
        match self.reply_frame().map_err(&lost)? {
            (Reply::Shard(m), bytes) if bytes.len() == want => Ok((*m, bytes)),
            (Reply::Shard(_), bytes) => Err(CopyError(format!(
                "the manager at {endpoint} sent {} bytes of a shard for {want}",
                bytes.len()
            ))),
            (Reply::Error(e), _) => Err(CopyError(e)),
            (other, _) => Err(CopyError(format!(
                "the manager at {endpoint} answered a request for a shard with {other:?}"
            ))),
        }
    }
}
