//! The blocking side of a manager connection: [`Client`] sends requests
//! (and a put's bytes, piece by piece, from a [`Source`]) and waits for
//! replies, within the time a manager on another host may take, or until
//! the caller says to give up.

use super::proto::{join, split, Put, Reply, Request, DATA_PIECE};
use crate::auth::{self, Channel, Secret};
use crate::comm::net::Endpoint;
use crate::level::StorageError;
use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::codec::{Framed, LengthDelimitedCodec};

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

/// How often a client waiting for a reply asks whether to give up (see
/// [`Client::call_unless`]).
const STOP_SLICE: Duration = Duration::from_millis(50);

/// The error of a call given up on (see [`Client::call_unless`]).
fn gave_up(endpoint: &Endpoint) -> io::Error {
    io::Error::new(
        io::ErrorKind::Interrupted,
        format!("stopped waiting for the manager at {endpoint}: a recovery started"),
    )
}

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
            io::Result::Ok(Framed::new(stream, super::proto::codec()))
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
        self.reply_frame_unless(&|| false)
    }

    /// The next reply, with its payload, unless `stop` says to give up
    /// first (asked every [`STOP_SLICE`] of the wait): then an error of
    /// kind [`Interrupted`](io::ErrorKind::Interrupted), and the reply
    /// may still come on this connection, so it cannot be used again.
    fn reply_frame_unless(&mut self, stop: &dyn Fn() -> bool) -> io::Result<(Reply, Bytes)> {
        let endpoint = self.endpoint.clone();
        let deadline = tokio::time::Instant::now() + REPLY_TIMEOUT;
        let next = loop {
            let slice = deadline.min(tokio::time::Instant::now() + STOP_SLICE);
            let next = (self.rt)
                .block_on(async { tokio::time::timeout_at(slice, self.conn.next()).await });
            match next {
                Ok(next) => break Some(next),
                Err(_) if slice >= deadline => break None,
                Err(_) if stop() => return Err(gave_up(&endpoint)),
                Err(_) => {}
            }
        };
        match next {
            None => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("manager at {endpoint} did not answer"),
            )),
            Some(None) => Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                format!("manager at {endpoint} closed the connection"),
            )),
            Some(Some(frame)) => split::<Reply>(frame?),
        }
    }

    /// Sends `req` and waits for the reply.
    pub fn call(&mut self, req: &Request) -> io::Result<Reply> {
        self.send(req, &[])?;
        self.reply()
    }

    /// Sends `req` and waits for the reply, unless `stop` says to give up
    /// (asked before sending, and while waiting): a rank whose job started
    /// a recovery stops waiting for its node's manager and rolls back.
    /// Giving up is an error of kind
    /// [`Interrupted`](io::ErrorKind::Interrupted), after which the client
    /// cannot be used again: drop it.
    pub fn call_unless(&mut self, req: &Request, stop: &dyn Fn() -> bool) -> io::Result<Reply> {
        if stop() {
            return Err(gave_up(&self.endpoint));
        }
        self.send(req, &[])?;
        Ok(self.reply_frame_unless(stop)?.0)
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
