//! Loading regions from a file as it streams by.

use super::super::tests::fixture;
use super::{StreamCheck, Target};
use crate::format::{CheckpointFile, FormatError, FormatErrorKind};

/// Feeds `bytes` to a check loading into `targets` (region id, memory),
/// in pieces of varying sizes; the verdict.
fn load_streamed(
    bytes: &[u8],
    targets: &mut [(u32, Vec<u8>)],
    seed: u64,
) -> Result<(), FormatError> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let targets = targets
        .iter_mut()
        .map(|(id, mem)| Target::new(*id, mem))
        .collect();
    let mut check = StreamCheck::new("loaded.fck", bytes.len() as u64)?.loading(targets);
    let mut rest = bytes;
    while !rest.is_empty() {
        let n = rng.usize(1..300_000).min(rest.len());
        check.feed(&rest[..n])?;
        rest = &rest[n..];
    }
    check.finish().map(|_| ())
}

#[test]
fn every_region_named_is_loaded_as_it_streams_by() {
    let f = fixture();
    for zstd in [None, Some(3)] {
        let (path, _) = f.write("s.fck", zstd);
        let bytes = std::fs::read(&path).unwrap();
        // Region 9 is not named: it is only checked.
        let mut targets: Vec<(u32, Vec<u8>)> = (f.regions.iter())
            .filter(|(info, _)| info.id != 9)
            .map(|(info, b)| (info.id, vec![0xa5; b.len()]))
            .collect();
        for seed in 0..4 {
            load_streamed(&bytes, &mut targets, seed).unwrap();
            for (id, mem) in &targets {
                let (_, want) = f.regions.iter().find(|(i, _)| i.id == *id).unwrap();
                assert_eq!(mem, want, "region {id}, zstd {zstd:?}");
            }
        }
    }
}

#[test]
fn damage_in_any_chunk_fails_the_load() {
    let f = fixture();
    for zstd in [None, Some(3)] {
        let (path, _) = f.write("d.fck", zstd);
        let good = std::fs::read(&path).unwrap();
        let chunks = CheckpointFile::open(&path).unwrap().chunks().to_vec();
        for c in &chunks {
            let mut bad = good.clone();
            bad[(c.offset + u64::from(c.stored_len) / 2) as usize] ^= 0x04;
            let mut targets: Vec<(u32, Vec<u8>)> = (f.regions.iter())
                .map(|(info, b)| (info.id, vec![0; b.len()]))
                .collect();
            let err = load_streamed(&bad, &mut targets, c.index.into()).unwrap_err();
            assert!(
                matches!(err.kind, FormatErrorKind::ChunkCrc { chunk, .. } if chunk == c.index),
                "{err}"
            );
        }
    }
}

#[test]
fn memory_of_the_wrong_length_is_refused_without_a_panic() {
    let f = fixture();
    let (path, _) = f.write("w.fck", None);
    let bytes = std::fs::read(&path).unwrap();
    let smooth = f.regions.iter().find(|(i, _)| i.id == 3).unwrap().1.len();
    for len in [0, smooth - 8, smooth + 8, 2 * smooth] {
        let mut targets = vec![(3u32, vec![0u8; len])];
        let err = load_streamed(&bytes, &mut targets, 5).unwrap_err();
        assert!(
            matches!(&err.kind, FormatErrorKind::Inconsistent(why) if why.contains("region 3")),
            "{len}: {err}"
        );
    }
}
