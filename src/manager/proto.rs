//! What ranks and managers say to a manager, and how it travels.
//!
//! Every connection first passes the job's handshake
//! ([`crate::auth::Channel::Manager`]). Then each frame
//! (length-delimited, at most [`MAX_FRAME`] bytes) holds a JSON header and
//! an optional binary payload: `[header length: u32 LE][header][payload]`.
//! A request gets exactly one reply (a [`Request::Layout`] none); a
//! [`Request::Put`] is followed by its bytes in [`Request::Data`] frames and
//! closed by [`Request::End`], and replied to then.

use super::task::{Progress, Task};
use crate::format::Metadata;
use crate::level::erasure::GroupManifest;
use crate::level::Level;
use bytes::{Bytes, BytesMut};
use serde::{Deserialize, Serialize};
use std::io;
use tokio_util::codec::LengthDelimitedCodec;

/// Largest frame (header and payload).
pub(crate) const MAX_FRAME: usize = 9 << 20;
/// Largest payload of one data frame.
pub(crate) const DATA_PIECE: usize = 8 << 20;
/// Largest file a peer may send in one copy.
pub(crate) const MAX_COPY: u64 = 1 << 40;

/// A request to a manager.
#[derive(Debug, Serialize, Deserialize)]
pub enum Request {
    /// Promote a checkpoint of this node (from its node's lowest rank).
    Submit(Box<Task>),
    /// Where these promotions are.
    Status {
        /// Job id.
        job_id: String,
        /// Checkpoints and levels asked about.
        keys: Vec<(u64, Level)>,
    },
    /// Every node finished promoting `id` to `level`: record it and retire
    /// what it supersedes there.
    Commit {
        /// What to commit.
        commit: CommitOrder,
    },
    /// Reply once every queued promotion has finished.
    Drain,
    /// Remove the job's level-2, -3 and -4 files of these ranks.
    Remove {
        /// What to remove.
        order: RemoveOrder,
    },
    /// Bytes for this node to keep; they follow in `Data` frames.
    Put {
        /// Job id.
        job_id: String,
        /// What they are.
        what: Put,
        /// The run and epoch of the ranks whose promotion sends them: a
        /// copy of an epoch the job has left is refused (see `fences.rs`).
        #[serde(default)]
        fence: Option<crate::level::Fence>,
    },
    /// A piece of the bytes of a `Put` (the payload).
    Data,
    /// The end of a `Put`.
    End,
    /// Send back the level-2 copy this node keeps of rank `rank`'s file of
    /// checkpoint `id` (see `copy_back.rs`): answered by [`Reply::Copy`]
    /// and the file's bytes in [`Reply::Data`] frames, or by an error.
    Get {
        /// Job id.
        job_id: String,
        /// Checkpoint id.
        id: u64,
        /// Whose file.
        rank: u32,
        /// Ranks in the job.
        world: u32,
    },
    /// Send back the level-3 group manifest this node keeps of checkpoint
    /// `id` and, with a window, those bytes of one of its shards (see
    /// `shard_back.rs`): answered by [`Reply::Shard`], the bytes its
    /// payload, or by an error.
    Shard {
        /// Job id.
        job_id: String,
        /// Checkpoint id.
        id: u64,
        /// Which bytes (none: the manifest alone).
        window: Option<ShardWindow>,
    },
    /// A group member's blob layout, for level 3.
    Layout {
        /// Job id.
        job_id: String,
        /// The layout.
        layout: Box<BlobLayout>,
        /// As for [`Request::Put`].
        #[serde(default)]
        fence: Option<crate::level::Fence>,
    },
}

/// Bytes of a level-3 shard a [`Request::Shard`] asks for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardWindow {
    /// The group's member nodes, as its manifest names them.
    pub nodes: Vec<u32>,
    /// The group position whose shard it is (the node's own).
    pub pos: u32,
    /// The stripe.
    pub stripe: u32,
    /// Where in the shard the bytes start.
    pub offset: u64,
    /// How many (at most [`DATA_PIECE`]).
    pub len: u32,
}

/// What a [`Request::Put`] carries.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Put {
    /// A copy of a rank's file to keep at `level` (2).
    File {
        /// Level of the copy.
        level: Level,
        /// The file's level-1 record.
        meta: Box<Metadata>,
    },
    /// A data node's terms of a parity shard held here (level 3).
    Term(Box<Term>),
}

/// The group a level-3 message is about.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupInfo {
    /// Checkpoint id.
    pub id: u64,
    /// Its stamp.
    pub stamp: u64,
    /// The promotion's round (see [`Task::round`](super::task::Task::round)).
    pub round: u64,
    /// Member nodes, ascending.
    pub nodes: Vec<u32>,
    /// Parity shards per stripe.
    pub parity: u32,
    /// Piece size.
    pub piece: u64,
    /// The erasure code's name (its scheme's).
    pub code: String,
}

/// A window of a member's terms of a parity shard: bytes
/// `offset..offset + window_len(piece, offset)` of its term.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Term {
    /// The group and checkpoint.
    pub group: GroupInfo,
    /// Which parity shard.
    pub key: crate::level::erasure::ParityKey,
    /// Group position of the sender.
    pub from: u32,
    /// Where the window starts in the shard (a multiple of [`WINDOW`]).
    pub offset: u64,
}

/// Bytes of a parity term sent (and summed) at once.
pub(crate) const WINDOW: u64 = DATA_PIECE as u64;

/// The length of the window at `offset` of a shard of `piece` bytes, if
/// `offset` starts one.
pub(crate) fn window_len(piece: u64, offset: u64) -> Option<u64> {
    (offset % WINDOW == 0 && offset < piece).then(|| WINDOW.min(piece - offset))
}

/// A member's blob layout.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BlobLayout {
    /// The group and checkpoint.
    pub group: GroupInfo,
    /// Group position of the member.
    pub pos: u32,
    /// Its blob.
    pub entries: Vec<crate::level::erasure::BlobEntry>,
}

/// The commit of a level, as the ranks agreed on it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CommitOrder {
    /// Job id.
    pub job_id: String,
    /// Checkpoint id.
    pub id: u64,
    /// Its stamp.
    pub stamp: u64,
    /// The level committed.
    pub level: Level,
    /// Checkpoints kept at that level.
    pub keep_last: u32,
    /// The node's ranks at the time (whose level-4 files this node keeps).
    pub ranks: Vec<u32>,
    /// Ranks in the job.
    pub world: u32,
    /// Whether this node writes the shared level-4 marker.
    pub marker: bool,
    /// The global directory.
    pub global_dir: std::path::PathBuf,
    /// The checkpoint's layout, recorded in the commit marker.
    pub layout: Option<crate::topology::Layout>,
    /// Level 4: the checkpoints the commit supersedes go to the archive
    /// instead of being removed.
    #[serde(default)]
    pub archive: bool,
    /// The run and epoch the ranks were in (see [`Task::fence`](super::task::Task::fence)).
    #[serde(default)]
    pub fence: Option<crate::level::Fence>,
    /// Node-local levels whose checkpoints older than the given id go once
    /// this commit is recorded: what commits at the levels that retire them
    /// superseded (`retention.levels`).
    #[serde(default)]
    pub retire: Vec<(Level, u64)>,
}

/// Removal of a job's higher-level files at the end of a run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RemoveOrder {
    /// Job id.
    pub job_id: String,
    /// The node's ranks.
    pub ranks: Vec<u32>,
    /// Whether this node also removes the shared level-4 markers.
    pub marker: bool,
    /// The global directory.
    pub global_dir: std::path::PathBuf,
    /// Keep level 4: remove only what lives on the node.
    #[serde(default)]
    pub keep_global: bool,
}

/// A manager's answer.
#[derive(Debug, Serialize, Deserialize)]
pub enum Reply {
    /// Done.
    Ok,
    /// The promotion was queued.
    Accepted,
    /// The promotion was not queued (the queue was full, and the policy is
    /// to skip).
    Skipped(String),
    /// Progress of the promotions asked about, in order.
    Status(Vec<Progress>),
    /// The request failed.
    Error(String),
    /// The copy a [`Request::Get`] asked for: its level-1 record; its
    /// `file_len` bytes follow in [`Reply::Data`] frames.
    Copy(Box<Metadata>),
    /// A piece of the bytes of a [`Reply::Copy`] (the payload).
    Data,
    /// The manifest a [`Request::Shard`] asked about; the window's bytes
    /// are the payload.
    Shard(Box<GroupManifest>),
}

/// Splits a frame into its header and payload.
pub(crate) fn split<T: for<'de> Deserialize<'de>>(mut frame: BytesMut) -> io::Result<(T, Bytes)> {
    let bad = |why: &str| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("bad manager frame: {why}"),
        )
    };
    if frame.len() < 4 {
        return Err(bad("too short"));
    }
    let n = u32::from_le_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize;
    if frame.len() < 4 + n {
        return Err(bad("header longer than the frame"));
    }
    let _ = frame.split_to(4);
    let header = frame.split_to(n);
    let value = serde_json::from_slice(&header).map_err(|e| bad(&e.to_string()))?;
    Ok((value, frame.freeze()))
}

/// Joins a header and a payload into a frame.
pub(crate) fn join<T: Serialize>(header: &T, payload: &[u8]) -> Bytes {
    let head = serde_json::to_vec(header).unwrap_or_default();
    let mut out = BytesMut::with_capacity(4 + head.len() + payload.len());
    out.extend_from_slice(&(head.len() as u32).to_le_bytes());
    out.extend_from_slice(&head);
    out.extend_from_slice(payload);
    out.freeze()
}

/// The codec of manager connections.
pub(crate) fn codec() -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder()
        .max_frame_length(MAX_FRAME)
        .new_codec()
}
