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
use crate::auth::{self, Channel, Secret};
use crate::comm::net::Endpoint;
use crate::format::Metadata;
use crate::level::erasure::GroupManifest;
use crate::level::{Level, StorageError};
use bytes::{Bytes, BytesMut};
use futures_util::{SinkExt, StreamExt};
use serde::{Deserialize, Serialize};
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::codec::{Framed, LengthDelimitedCodec};

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

/// An authenticated connection to a manager, used from blocking code (a
/// rank, or a manager's worker sending to a peer).
pub struct Client {
    rt: tokio::runtime::Runtime,
    conn: Framed<Box<dyn Stream>, LengthDelimitedCodec>,
    endpoint: Endpoint,
}

/// A stream a client talks over (a socket: files are sent to it by the
/// kernel).
pub(crate) trait Stream: AsyncRead + AsyncWrite + AsFd + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + AsFd + Unpin + Send> Stream for T {}

/// How long a manager on another host may leave a connection attempt,
/// bytes sent to it, or keepalive probes while a reply is awaited,
/// unanswered before it is taken as lost (a host cut off the network
/// answers nothing at all).
const PEER_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a client waits for a reply before calling the manager lost
/// (promotion requests are answered at once; `Drain` and a full queue under
/// the `wait` policy are the slow ones).
const REPLY_TIMEOUT: Duration = Duration::from_secs(600);

impl Client {
    /// Connects to the manager at `endpoint` and proves the job's secret.
    pub fn connect(endpoint: &Endpoint, secret: &Secret) -> io::Result<Self> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let conn = rt.block_on(async {
            let open = || async {
                let stream: Box<dyn Stream> = match endpoint {
                    Endpoint::Unix(p) => Box::new(tokio::net::UnixStream::connect(p).await?),
                    Endpoint::Tcp(a) => {
                        let s =
                            tokio::time::timeout(PEER_TIMEOUT, tokio::net::TcpStream::connect(a))
                                .await
                                .map_err(|_| {
                                    io::Error::new(io::ErrorKind::TimedOut, "no answer to connect")
                                })??;
                        s.set_nodelay(true)?;
                        // Bytes a lost host never acknowledges fail the
                        // connection instead of holding the sender; so do
                        // keepalive probes while it waits for a reply.
                        use rustix::net::sockopt;
                        sockopt::set_tcp_user_timeout(&s, PEER_TIMEOUT.as_millis() as u32)?;
                        sockopt::set_socket_keepalive(&s, true)?;
                        sockopt::set_tcp_keepidle(&s, PEER_TIMEOUT / 4)?;
                        sockopt::set_tcp_keepintvl(&s, PEER_TIMEOUT / 4)?;
                        Box::new(s)
                    }
                };
                io::Result::Ok(stream)
            };
            let stream = auth::connect_retrying(open, secret, Channel::Manager).await?;
            io::Result::Ok(Framed::new(stream, codec()))
        });
        let conn =
            conn.map_err(|e| io::Error::new(e.kind(), format!("manager at {endpoint}: {e}")))?;
        Ok(Self {
            rt,
            conn,
            endpoint: endpoint.clone(),
        })
    }

    /// Where the manager is.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// Sends `req` (with `payload`) without waiting for a reply.
    pub(super) fn send(&mut self, req: &Request, payload: &[u8]) -> io::Result<()> {
        let frame = join(req, payload);
        self.rt.block_on(self.conn.send(frame))
    }

    fn reply(&mut self) -> io::Result<Reply> {
        Ok(self.reply_frame()?.0)
    }

    /// The next reply, with its payload.
    pub(super) fn reply_frame(&mut self) -> io::Result<(Reply, Bytes)> {
        let endpoint = self.endpoint.clone();
        let next = self
            .rt
            .block_on(async { tokio::time::timeout(REPLY_TIMEOUT, self.conn.next()).await });
        match next {
            Err(_) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("manager at {endpoint} did not answer"),
            )),
            Ok(None) => Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                format!("manager at {endpoint} closed the connection"),
            )),
            Ok(Some(frame)) => split::<Reply>(frame?),
        }
    }

    /// Sends `req` and waits for the reply.
    pub fn call(&mut self, req: &Request) -> io::Result<Reply> {
        self.send(req, &[])?;
        self.reply()
    }

    /// Sends bytes for the manager to keep (a file copy or a window of
    /// parity terms), read from `source` one piece (at most `DATA_PIECE`
    /// bytes) at a time. Each piece is read straight into the frame that
    /// carries it, one buffer kept for the whole put, and written to the
    /// connection as it is (no copy into the codec's buffer). A source that
    /// fails leaves the connection unusable: drop the client.
    pub fn put_from(
        &mut self,
        job_id: &str,
        fence: Option<crate::level::Fence>,
        what: Put,
        source: &mut dyn Source,
    ) -> Result<Reply, PutError> {
        use tokio::io::AsyncWriteExt;
        let head = Request::Put {
            job_id: job_id.to_string(),
            what,
            fence,
        };
        // Flushed: the codec's buffer is empty when pieces bypass it.
        self.send(&head, &[])?;
        let data = serde_json::to_vec(&Request::Data).unwrap_or_default();
        // A frame as the codec reads it: its length (big-endian, the
        // codec's default), then the header's (little-endian, see
        // `split`), the header, the piece.
        let prefix = 4 + 4 + data.len();
        let mut frame = Vec::new();
        loop {
            let n = usize::try_from(source.left())
                .unwrap_or(usize::MAX)
                .min(DATA_PIECE);
            if n == 0 {
                break;
            }
            // Grows (zero-filled) only for the first piece.
            frame.resize(prefix + n, 0);
            let body = u32::try_from(frame.len() - 4).map_err(|_| SourceError::TooLarge(n))?;
            frame[..4].copy_from_slice(&body.to_be_bytes());
            frame[4..8].copy_from_slice(&(data.len() as u32).to_le_bytes());
            frame[8..prefix].copy_from_slice(&data);
            let stream = self.conn.get_mut();
            if let Some((file, at)) = source.file() {
                // The kernel moves the piece from the file to the
                // connection: no copy through this process.
                self.rt.block_on(stream.write_all(&frame[..prefix]))?;
                self.rt.block_on(stream.flush())?;
                send_file(stream.as_fd(), file, at, n, &self.endpoint)?;
                source.skip(n)?;
                continue;
            }
            source.read_next(&mut frame[prefix..])?;
            self.rt.block_on(stream.write_all(&frame))?;
        }
        let stream = self.conn.get_mut();
        self.rt.block_on(stream.flush())?;
        self.send(&Request::End, &[])?;
        Ok(self.reply()?)
    }
}

/// Sends `len` bytes of `file` from offset `at` to the connection `to`
/// (non-blocking: waits for room, at most [`PEER_TIMEOUT`] at a time).
fn send_file(
    to: BorrowedFd<'_>,
    file: BorrowedFd<'_>,
    at: u64,
    len: usize,
    endpoint: &Endpoint,
) -> io::Result<()> {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    use rustix::io::Errno;
    let end = at + len as u64;
    let mut off = at;
    while off < end {
        let left = usize::try_from(end - off).unwrap_or(usize::MAX);
        match rustix::fs::sendfile(to, file, Some(&mut off), left) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("a file sent to the manager at {endpoint} ended early"),
                ))
            }
            Ok(_) | Err(Errno::INTR) => {}
            Err(Errno::AGAIN) => {
                let wait = Timespec::try_from(PEER_TIMEOUT).unwrap_or_default();
                let mut fds = [PollFd::new(&to, PollFlags::OUT)];
                if poll(&mut fds, Some(&wait))? == 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("the manager at {endpoint} took no bytes"),
                    ));
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Why the bytes of a put could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The node's storage.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// More bytes asked than the source has left.
    #[error("{asked} bytes asked of {left} left")]
    Overrun {
        /// Bytes asked.
        asked: usize,
        /// Bytes left.
        left: u64,
    },
    /// Bytes passed over where the source cannot.
    #[error("{0} bytes cannot be skipped here")]
    NoSkip(usize),
    /// A piece longer than a frame holds.
    #[error("a piece of {0} bytes does not fit a frame")]
    TooLarge(usize),
}

/// Where the bytes of a put come from, piece by piece.
pub trait Source {
    /// Bytes left to send.
    fn left(&self) -> u64;
    /// Reads the next `out.len()` bytes (at most [`left`](Self::left)).
    fn read_next(&mut self, out: &mut [u8]) -> Result<(), SourceError>;
    /// The file the next bytes are in and their offset, where the kernel
    /// can send them straight from it ([`skip`](Self::skip) them after).
    fn file(&self) -> Option<(BorrowedFd<'_>, u64)> {
        None
    }
    /// Passes over the next `n` bytes (sent from [`file`](Self::file)).
    fn skip(&mut self, n: usize) -> Result<(), SourceError> {
        Err(SourceError::NoSkip(n))
    }
}

impl Source for crate::level::Pieces {
    fn left(&self) -> u64 {
        crate::level::Pieces::left(self)
    }

    fn read_next(&mut self, out: &mut [u8]) -> Result<(), SourceError> {
        Ok(crate::level::Pieces::read_next(self, out)?)
    }

    fn file(&self) -> Option<(BorrowedFd<'_>, u64)> {
        Some(self.next_at())
    }

    fn skip(&mut self, n: usize) -> Result<(), SourceError> {
        Ok(crate::level::Pieces::skip(self, n as u64)?)
    }
}

impl Source for &[u8] {
    fn left(&self) -> u64 {
        self.len() as u64
    }

    fn read_next(&mut self, out: &mut [u8]) -> Result<(), SourceError> {
        if out.len() > self.len() {
            return Err(SourceError::Overrun {
                asked: out.len(),
                left: self.len() as u64,
            });
        }
        let (now, rest) = self.split_at(out.len());
        out.copy_from_slice(now);
        *self = rest;
        Ok(())
    }
}

/// Why a put failed.
#[derive(Debug, thiserror::Error)]
pub enum PutError {
    /// The connection failed (worth a retry on a new one).
    #[error("{0}")]
    Io(#[from] io::Error),
    /// The bytes could not be read here.
    #[error(transparent)]
    Source(#[from] SourceError),
}
