//! The frame that carries one message between ranks.
//!
//! Every message is a 40-byte header followed by the payload. The header ends
//! with the payload length, and the framing is tokio-util's
//! [`LengthDelimitedCodec`] configured to find that length field at offset 32
//! and to keep the header in the frame. Writers send the header struct and the
//! payload with one vectored write, so the payload is never copied in user
//! space; readers get each frame in one buffer and split the payload off
//! without copying either.

use bytes::{Bytes, BytesMut};
use std::io::{self, IoSlice, Write};
use tokio_util::codec::{Decoder, LengthDelimitedCodec};
use zerocopy::little_endian::{U32, U64};
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout, Unaligned};

/// The fixed header in front of every payload.
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
#[repr(C)]
pub(crate) struct WireHeader {
    /// Runtime epoch the message was sent in.
    pub epoch: U64,
    /// Message tag (user tags below 2^32, collectives above).
    pub tag: U64,
    /// Sending rank.
    pub src: U32,
    /// Zero.
    pub reserved: U32,
    /// The message's number towards its destination in this epoch, when
    /// the sender logs its messages (see `journal.rs`); 0 otherwise.
    pub seq: U64,
    /// Payload length (the codec's length field).
    pub len: U64,
}

/// Size of [`WireHeader`].
pub(crate) const HEADER_LEN: usize = std::mem::size_of::<WireHeader>();
const _: () = assert!(HEADER_LEN == 40);

/// The codec that splits a byte stream into frames (header + payload) of
/// payloads up to `max_payload` bytes; a longer frame is an error before
/// anything is allocated for it.
pub(crate) fn codec(max_payload: usize) -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder()
        .length_field_offset(HEADER_LEN - 8)
        .length_field_type::<u64>()
        .little_endian()
        // The frame handed out starts at the header (nothing skipped), and the
        // length field counts only the payload: add the header to it.
        .length_adjustment(HEADER_LEN as isize)
        .num_skip(0)
        .max_frame_length(HEADER_LEN.saturating_add(max_payload))
        .new_codec()
}

/// Frames at least this large are received into a recycled buffer.
const LARGE: usize = 1 << 20;

/// The reader's decoder: the length-delimited codec, plus reuse of the
/// buffer of the last large frame.
///
/// Every frame is handed out without a copy, so a frame's buffer belongs to
/// its receiver until dropped. For large frames the decoder keeps a handle on
/// that buffer; once the receiver dropped the frame, the next large frame is
/// read into the same, already faulted-in memory instead of fresh pages the
/// kernel must zero (which otherwise dominates messages of tens of MiB).
pub(crate) struct FrameDecoder {
    inner: LengthDelimitedCodec,
    recycled: Option<BytesMut>,
    max_payload: usize,
}

impl FrameDecoder {
    pub(crate) fn new(max_payload: usize) -> Self {
        Self {
            inner: codec(max_payload),
            recycled: None,
            max_payload,
        }
    }
}

impl Decoder for FrameDecoder {
    type Item = BytesMut;
    type Error = io::Error;

    fn decode(&mut self, src: &mut BytesMut) -> io::Result<Option<BytesMut>> {
        let total = WireHeader::read_from_prefix(&src[..])
            .ok()
            .and_then(|(h, _)| usize::try_from(h.len.get()).ok())
            .and_then(|n| n.checked_add(HEADER_LEN))
            .filter(|t| *t >= LARGE && *t <= HEADER_LEN.saturating_add(self.max_payload));
        if let Some(total) = total {
            if src.capacity() < total {
                if let Some(mut buf) = self.recycled.take() {
                    // Reclaims the old allocation if its frame was dropped.
                    buf.reserve(total);
                    buf.extend_from_slice(src);
                    *src = buf;
                }
            }
            if src.len() >= total {
                // The frame is complete: keep a zero-length view of its
                // allocation, which outlives the codec's split.
                let end = src.capacity();
                self.recycled = Some(src.split_off(end));
            }
        }
        self.inner.decode(src)
    }
}

/// A decoded message.
pub(crate) struct Frame {
    pub epoch: u64,
    pub tag: u64,
    pub src: u32,
    pub seq: u64,
    pub payload: Bytes,
}

/// Splits a codec frame into its header fields and payload (no copy).
pub(crate) fn decode(mut frame: BytesMut) -> io::Result<Frame> {
    let payload = frame.split_off(HEADER_LEN.min(frame.len())).freeze();
    let header = WireHeader::read_from_bytes(&frame[..])
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "short frame header"))?;
    if header.len.get() != payload.len() as u64 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "frame length disagrees with its header",
        ));
    }
    Ok(Frame {
        epoch: header.epoch.get(),
        tag: header.tag.get(),
        src: header.src.get(),
        seq: header.seq.get(),
        payload,
    })
}

/// Writes one frame: the header, then the payload, with vectored writes.
pub(crate) fn write_frame(
    out: &mut dyn Write,
    epoch: u64,
    tag: u64,
    src: u32,
    seq: u64,
    payload: &[u8],
) -> io::Result<()> {
    let mut header = WireHeader::new_zeroed();
    header.epoch.set(epoch);
    header.tag.set(tag);
    header.src.set(src);
    header.seq.set(seq);
    header.len.set(payload.len() as u64);
    let mut bufs = [IoSlice::new(header.as_bytes()), IoSlice::new(payload)];
    let mut slices = &mut bufs[..];
    while !slices.is_empty() {
        match out.write_vectored(slices) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut slices, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
