use super::*;

#[test]
fn copies_every_alignment_and_length_exactly() {
    let src: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let mut buf = vec![0u8; 200_100];
    for offset in [0usize, 1, 7, 31, 32, 33] {
        for len in [0usize, 1, 31, 4095, 4096, 4097, 65_537, 199_000] {
            buf.fill(0);
            let dst = &mut buf[offset..offset + len];
            let mut h = crc32fast::Hasher::new();
            copy_with_crc(dst, &src[..len], &mut h);
            assert_eq!(dst, &src[..len], "offset {offset} len {len}");
            assert_eq!(h.finalize(), crc32fast::hash(&src[..len]));
            assert!(buf[..offset].iter().all(|b| *b == 0));
            assert!(buf[offset + len..].iter().all(|b| *b == 0));
        }
    }
}
