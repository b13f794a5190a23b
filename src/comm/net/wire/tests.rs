use super::*;
use tokio_util::codec::Decoder;

#[test]
fn frames_written_are_the_frames_the_codec_reads() {
    let mut stream = Vec::new();
    write_frame(&mut stream, 7, 1 << 33, 3, 42, b"hello").unwrap();
    write_frame(&mut stream, 8, 5, 0, 0, b"").unwrap();
    let big = vec![0xabu8; 100_000];
    write_frame(&mut stream, 9, 6, 1, 0, &big).unwrap();
    let mut buf = BytesMut::from(&stream[..]);
    let mut codec = codec(1 << 30);
    let a = decode(codec.decode(&mut buf).unwrap().unwrap()).unwrap();
    assert_eq!(
        (a.epoch, a.tag, a.src, a.seq, &a.payload[..]),
        (7, 1 << 33, 3, 42, &b"hello"[..])
    );
    let b = decode(codec.decode(&mut buf).unwrap().unwrap()).unwrap();
    assert_eq!((b.epoch, b.payload.len()), (8, 0));
    let c = decode(codec.decode(&mut buf).unwrap().unwrap()).unwrap();
    assert_eq!(c.payload, big);
    assert!(codec.decode(&mut buf).unwrap().is_none());
}

#[test]
fn a_partial_frame_waits_for_more_bytes() {
    let mut stream = Vec::new();
    write_frame(&mut stream, 1, 2, 3, 0, &[9u8; 50]).unwrap();
    let mut codec = codec(1 << 30);
    let mut buf = BytesMut::from(&stream[..40]);
    assert!(codec.decode(&mut buf).unwrap().is_none());
    buf.extend_from_slice(&stream[40..]);
    assert_eq!(
        decode(codec.decode(&mut buf).unwrap().unwrap())
            .unwrap()
            .payload
            .len(),
        50
    );
}

#[test]
fn large_frames_reuse_the_buffer_of_a_dropped_frame() {
    let big = vec![3u8; 2 << 20];
    let mut stream = Vec::new();
    write_frame(&mut stream, 1, 1, 0, 0, &big).unwrap();
    let mut decoder = FrameDecoder::new(1 << 30);
    let mut buf = BytesMut::from(&stream[..100]);
    assert!(decoder.decode(&mut buf).unwrap().is_none());
    buf.extend_from_slice(&stream[100..]);
    let first = decode(decoder.decode(&mut buf).unwrap().unwrap()).unwrap();
    let addr = first.payload.as_ptr() as usize;
    assert_eq!(first.payload, big);
    drop(first);
    drop(buf);
    // The next large frame lands in the same memory.
    let mut buf = BytesMut::from(&stream[..100]);
    assert!(decoder.decode(&mut buf).unwrap().is_none());
    buf.extend_from_slice(&stream[100..]);
    let second = decode(decoder.decode(&mut buf).unwrap().unwrap()).unwrap();
    assert_eq!(second.payload, big);
    assert_eq!(second.payload.as_ptr() as usize, addr);
}

#[test]
fn absurd_lengths_are_refused() {
    let mut header = WireHeader::new_zeroed();
    header.len.set(u64::MAX);
    let mut buf = BytesMut::from(header.as_bytes());
    assert!(codec(1 << 30).decode(&mut buf).is_err());
    // A length just over the limit is refused before any allocation.
    let mut header = WireHeader::new_zeroed();
    header.len.set(1 << 39);
    let mut buf = BytesMut::from(header.as_bytes());
    assert!(FrameDecoder::new(1 << 30).decode(&mut buf).is_err());
    assert!(buf.capacity() < 1 << 20);
}

/// One frame of the property tests: its header fields and payload.
type Sent = (u64, u64, u32, u64, Vec<u8>);

fn sent() -> impl proptest::strategy::Strategy<Value = Sent> {
    use proptest::prelude::*;
    (
        any::<u64>(),
        any::<u64>(),
        any::<u32>(),
        any::<u64>(),
        proptest::collection::vec(any::<u8>(), 0..300),
    )
}

proptest::proptest! {
    /// Frames cut into any pieces come out whole, in order, as written.
    #[test]
    fn frames_cut_anywhere_come_out_as_written(
        frames in proptest::collection::vec(sent(), 1..6),
        cuts in proptest::collection::vec(proptest::prelude::any::<usize>(), 0..8),
    ) {
        let mut stream = Vec::new();
        for (epoch, tag, src, seq, payload) in &frames {
            write_frame(&mut stream, *epoch, *tag, *src, *seq, payload).unwrap();
        }
        let mut at: Vec<usize> = cuts.iter().map(|c| c % (stream.len() + 1)).collect();
        at.push(stream.len());
        at.sort_unstable();
        let mut decoder = FrameDecoder::new(1 << 20);
        let mut buf = BytesMut::new();
        let mut got = Vec::new();
        let mut from = 0;
        for to in at {
            buf.extend_from_slice(&stream[from..to]);
            from = to;
            while let Some(frame) = decoder.decode(&mut buf).unwrap() {
                let f = decode(frame).unwrap();
                got.push((f.epoch, f.tag, f.src, f.seq, f.payload.to_vec()));
            }
        }
        proptest::prop_assert_eq!(got, frames);
    }

    /// Any bytes at all: frames or errors, never a panic, and never a
    /// frame longer than the limit or a buffer grown past what arrived
    /// plus one frame.
    #[test]
    fn any_bytes_are_frames_or_an_error(
        bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..2000),
        limit in 0usize..4096,
    ) {
        let mut decoder = FrameDecoder::new(limit);
        let mut buf = BytesMut::from(&bytes[..]);
        while let Ok(Some(frame)) = decoder.decode(&mut buf) {
            proptest::prop_assert!(frame.len() <= HEADER_LEN + limit);
            if let Ok(f) = decode(frame) {
                proptest::prop_assert!(f.payload.len() <= limit);
            }
        }
        proptest::prop_assert!(buf.capacity() <= bytes.len().max(HEADER_LEN) + HEADER_LEN + limit);
    }
}
