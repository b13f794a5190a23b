//! The per-job secret, and the handshake every connection of a job passes.
//!
//! The launcher makes a random 256-bit secret for each job and hands it to
//! its daemons and ranks in the environment (never on a command line). Every
//! connection (daemon to root, rank to daemon, rank to rank) starts with a
//! mutual challenge-response: each side proves it knows the secret with a
//! keyed BLAKE3 hash over both sides' fresh nonces, so the secret never
//! crosses the wire and a recorded exchange cannot be replayed. The
//! messages have fixed sizes, so a peer cannot make either side allocate,
//! and the accepting side gives up after [`HANDSHAKE_TIMEOUT`].
//!
//! ```text
//! acceptor  -> connector : "FRMAUTH1" | nonce_a (32)
//! connector -> acceptor  : nonce_c (32) | H(secret, "connect" | channel | nonce_a | nonce_c)
//! acceptor  -> connector : H(secret, "accept" | channel | nonce_a | nonce_c)
//! ```

use std::fmt;
use std::io::{self, Read, Write};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// How long an accepted connection has to prove itself.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

const MAGIC: &[u8; 8] = b"FRMAUTH1";

mod gate;

pub use gate::{Gate, Pass};

/// A job's shared secret.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret([u8; 32]);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(..)")
    }
}

impl Secret {
    /// A new random secret.
    pub fn generate() -> io::Result<Self> {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).map_err(|e| io::Error::other(e.to_string()))?;
        Ok(Self(key))
    }

    /// The secret as 64 hexadecimal digits (for the environment).
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Parses 64 hexadecimal digits.
    pub fn from_hex(text: &str) -> Option<Self> {
        let text = text.trim();
        if text.len() != 64 || !text.is_ascii() {
            return None;
        }
        let mut key = [0u8; 32];
        for (i, byte) in key.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
        }
        Some(Self(key))
    }

    fn proof(
        &self,
        role: &[u8],
        channel: Channel,
        nonce_a: &[u8; 32],
        nonce_c: &[u8; 32],
    ) -> blake3::Hash {
        let mut h = blake3::Hasher::new_keyed(&self.0);
        h.update(b"frame-auth-v1 ");
        h.update(role);
        h.update(&[channel as u8]);
        h.update(nonce_a);
        h.update(nonce_c);
        h.finalize()
    }
}

/// Which kind of connection is being made (part of every proof, so a proof
/// for one kind is worthless for another).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Channel {
    /// A daemon connecting to the root.
    Node = 1,
    /// A rank connecting to its daemon.
    Rank = 2,
    /// A rank connecting to another rank.
    Data = 3,
    /// A rank or a manager connecting to a node's manager.
    Manager = 4,
}

fn nonce() -> io::Result<[u8; 32]> {
    let mut n = [0u8; 32];
    getrandom::fill(&mut n).map_err(|e| io::Error::other(e.to_string()))?;
    Ok(n)
}

fn refused(why: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!("handshake refused: {why}"),
    )
}

/// Runs the accepting side on `stream`, giving up after [`HANDSHAKE_TIMEOUT`].
pub async fn accept<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    secret: &Secret,
    channel: Channel,
) -> io::Result<()> {
    accept_within(stream, secret, channel, HANDSHAKE_TIMEOUT).await
}

/// [`accept`], giving up after `patience`: a job's control connections
/// (a rank to its daemon, a daemon to the root) wait as long as the lease
/// they serve, since on an overloaded machine a live peer may take longer
/// than [`HANDSHAKE_TIMEOUT`] to answer; a [`Gate`] still bounds how many
/// wait.
pub async fn accept_within<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    secret: &Secret,
    channel: Channel,
    patience: Duration,
) -> io::Result<()> {
    let exchange = async {
        let nonce_a = nonce()?;
        let mut hello = [0u8; 40];
        hello[..8].copy_from_slice(MAGIC);
        hello[8..].copy_from_slice(&nonce_a);
        stream.write_all(&hello).await?;
        let mut reply = [0u8; 64];
        stream.read_exact(&mut reply).await?;
        let nonce_c: [u8; 32] = reply[..32].try_into().map_err(|_| refused("short reply"))?;
        let proof: [u8; 32] = reply[32..].try_into().map_err(|_| refused("short reply"))?;
        if secret.proof(b"connect", channel, &nonce_a, &nonce_c) != blake3::Hash::from_bytes(proof)
        {
            return Err(refused("the peer does not know the job's secret"));
        }
        let answer = secret.proof(b"accept", channel, &nonce_a, &nonce_c);
        stream.write_all(answer.as_bytes()).await?;
        stream.flush().await
    };
    tokio::time::timeout(patience, exchange)
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "handshake timed out"))?
}

/// Whether a connecting side's handshake failed in a way another attempt
/// can fix: the listener dropped the connection before it was through,
/// as it does to its oldest handshake when too many are pending (see
/// [`Gate`]).
pub(crate) fn worth_retrying(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::UnexpectedEof
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe
    )
}

/// The pauses between attempts to connect: from 2 ms, doubling, at most
/// 250 ms, about [`HANDSHAKE_TIMEOUT`] in all.
pub(crate) fn backoff() -> impl Iterator<Item = Duration> {
    backoff_within(HANDSHAKE_TIMEOUT)
}

/// [`backoff`], about `patience` in all.
fn backoff_within(patience: Duration) -> impl Iterator<Item = Duration> {
    let mut left = patience;
    std::iter::successors(Some(Duration::from_millis(2)), |d| {
        Some((*d * 2).min(Duration::from_millis(250)))
    })
    .map_while(move |d| {
        left = left.checked_sub(d)?;
        Some(d)
    })
}

/// Opens a stream with `open` and runs the connecting side on it, trying
/// again after a pause (see `backoff`) while the listener drops it
/// before the handshake is through.
pub async fn connect_retrying<S, F, Fut>(
    open: F,
    secret: &Secret,
    channel: Channel,
) -> io::Result<S>
where
    S: AsyncRead + AsyncWrite + Unpin,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = io::Result<S>>,
{
    connect_retrying_within(open, secret, channel, HANDSHAKE_TIMEOUT).await
}

/// [`connect_retrying`], each handshake and all the pauses bounded by
/// `patience` instead of [`HANDSHAKE_TIMEOUT`] (see [`accept_within`]).
pub async fn connect_retrying_within<S, F, Fut>(
    mut open: F,
    secret: &Secret,
    channel: Channel,
    patience: Duration,
) -> io::Result<S>
where
    S: AsyncRead + AsyncWrite + Unpin,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = io::Result<S>>,
{
    let mut pauses = backoff_within(patience);
    loop {
        let mut stream = open().await?;
        match connect_within(&mut stream, secret, channel, patience).await {
            Ok(()) => return Ok(stream),
            Err(e) if worth_retrying(&e) => match pauses.next() {
                Some(pause) => tokio::time::sleep(pause).await,
                None => return Err(e),
            },
            Err(e) => return Err(e),
        }
    }
}

/// Runs the connecting side on `stream`, giving up after `patience`.
async fn connect_within<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    secret: &Secret,
    channel: Channel,
    patience: Duration,
) -> io::Result<()> {
    let exchange = async {
        let mut hello = [0u8; 40];
        stream.read_exact(&mut hello).await?;
        let reply = reply_to(&hello, secret, channel)?;
        stream.write_all(&reply.0).await?;
        stream.flush().await?;
        let mut answer = [0u8; 32];
        stream.read_exact(&mut answer).await?;
        check_answer(&answer, secret, channel, &reply.1, &reply.2)
    };
    tokio::time::timeout(patience, exchange)
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "handshake timed out"))?
}

/// The connecting side on a blocking stream; the caller bounds it with the
/// stream's read and write timeouts.
pub(crate) fn connect_blocking<S: Read + Write>(
    stream: &mut S,
    secret: &Secret,
    channel: Channel,
) -> io::Result<()> {
    let mut hello = [0u8; 40];
    stream.read_exact(&mut hello)?;
    let reply = reply_to(&hello, secret, channel)?;
    stream.write_all(&reply.0)?;
    stream.flush()?;
    let mut answer = [0u8; 32];
    stream.read_exact(&mut answer)?;
    check_answer(&answer, secret, channel, &reply.1, &reply.2)
}

/// The connector's reply to the acceptor's hello, and both nonces.
fn reply_to(
    hello: &[u8; 40],
    secret: &Secret,
    channel: Channel,
) -> io::Result<([u8; 64], [u8; 32], [u8; 32])> {
    if &hello[..8] != MAGIC {
        return Err(refused("the peer is not a frame job"));
    }
    let nonce_a: [u8; 32] = hello[8..].try_into().map_err(|_| refused("short hello"))?;
    let nonce_c = nonce()?;
    let mut reply = [0u8; 64];
    reply[..32].copy_from_slice(&nonce_c);
    reply[32..].copy_from_slice(
        secret
            .proof(b"connect", channel, &nonce_a, &nonce_c)
            .as_bytes(),
    );
    Ok((reply, nonce_a, nonce_c))
}

fn check_answer(
    answer: &[u8; 32],
    secret: &Secret,
    channel: Channel,
    nonce_a: &[u8; 32],
    nonce_c: &[u8; 32],
) -> io::Result<()> {
    if secret.proof(b"accept", channel, nonce_a, nonce_c) != blake3::Hash::from_bytes(*answer) {
        return Err(refused("the peer does not know the job's secret"));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
