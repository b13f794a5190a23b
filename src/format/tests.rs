//! Round trips and damage detection for the file format.

use super::*;
use crate::region::{ElemType, RegionInfo};
use std::path::Path;
use zerocopy::IntoBytes;

/// Builds a file in memory, growing as needed.
#[derive(Default)]
struct MemSink {
    bytes: Vec<u8>,
}

impl Sink for MemSink {
    fn window(&mut self, offset: u64, len: usize) -> std::io::Result<&mut [u8]> {
        let end = usize::try_from(offset).unwrap() + len;
        if self.bytes.len() < end {
            self.bytes.resize(end, 0);
        }
        Ok(&mut self.bytes[end - len..end])
    }

    fn commit(&mut self, _offset: u64, _len: usize) -> std::io::Result<()> {
        Ok(())
    }
}

pub(super) struct Fixture {
    pub(super) dir: tempfile::TempDir,
    pub(super) regions: Vec<(RegionInfo, Vec<u8>)>,
}

fn spec(zstd: Option<i32>) -> WriteSpec<'static> {
    WriteSpec {
        job_id: "unit",
        checkpoint_id: 7,
        rank: 1,
        world_size: 4,
        node: 2,
        stamp: 0x5eed,
        chunk_size: MIN_CHUNK as usize,
        zstd_level: zstd,
        created_unix_ms: 1_700_000_000_000,
    }
}

pub(super) fn fixture() -> Fixture {
    let mut rng = fastrand::Rng::with_seed(7);
    let smooth: Vec<f64> = (0..40_000).map(|i| (i as f64 * 0.001).sin()).collect();
    let noise: Vec<u8> = (0..100_000).map(|_| rng.u8(..)).collect();
    let regions = vec![
        (
            RegionInfo {
                id: 0,
                elem: ElemType::U64,
                count: 1,
            },
            42u64.as_bytes().to_vec(),
        ),
        (
            RegionInfo {
                id: 3,
                elem: ElemType::F64,
                count: 40_000,
            },
            smooth.as_bytes().to_vec(),
        ),
        (
            RegionInfo {
                id: 4,
                elem: ElemType::I32,
                count: 0,
            },
            Vec::new(),
        ),
        (
            RegionInfo {
                id: 9,
                elem: ElemType::Byte,
                count: 100_000,
            },
            noise,
        ),
    ];
    Fixture {
        dir: tempfile::tempdir().unwrap(),
        regions,
    }
}

impl Fixture {
    fn sources(&self) -> Vec<RegionSource<'_>> {
        self.regions
            .iter()
            .map(|(info, bytes)| RegionSource { info: *info, bytes })
            .collect()
    }

    pub(super) fn write(&self, name: &str, zstd: Option<i32>) -> (std::path::PathBuf, Written) {
        let spec = spec(zstd);
        let layout = plan(&spec, &self.sources()).unwrap();
        let mut sink = MemSink::default();
        let written = write_checkpoint(&mut sink, &spec, &self.sources(), &layout).unwrap();
        assert!(written.file_len <= layout.capacity);
        sink.bytes.truncate(written.file_len as usize);
        let path = self.dir.path().join(name);
        std::fs::write(&path, &sink.bytes).unwrap();
        (path, written)
    }

    fn check_loads(&self, path: &Path) {
        let file = CheckpointFile::open(path).unwrap();
        assert_eq!(file.header().job_id, "unit");
        assert_eq!(file.header().checkpoint_id, 7);
        assert_eq!(file.header().rank, 1);
        let infos: Vec<RegionInfo> = self.regions.iter().map(|r| r.0).collect();
        assert_eq!(file.regions(), infos);
        for (info, bytes) in &self.regions {
            let mut out = vec![0u8; bytes.len()];
            file.load_region(info.id, &mut out).unwrap();
            assert_eq!(&out, bytes, "region {}", info.id);
        }
        assert!(file.verify().is_empty());
    }
}

#[test]
fn raw_round_trip() {
    let f = fixture();
    let (path, written) = f.write("raw.fck", None);
    f.check_loads(&path);
    let file = CheckpointFile::open(&path).unwrap();
    assert_eq!(file.data_crc(), written.data_crc);
    assert_eq!(written.raw_bytes, written.stored_bytes);
    let mut wrong = vec![0u8; 3];
    assert!(matches!(
        file.load_region(0, &mut wrong).unwrap_err().kind,
        FormatErrorKind::SizeMismatch { .. }
    ));
    assert!(matches!(
        file.load_region(5, &mut wrong).unwrap_err().kind,
        FormatErrorKind::NoRegion(5)
    ));
}

#[test]
fn zstd_round_trip_stores_noise_raw() {
    let f = fixture();
    let (path, written) = f.write("z.fck", Some(3));
    f.check_loads(&path);
    assert!(written.stored_bytes < written.raw_bytes);
    let file = CheckpointFile::open(&path).unwrap();
    let codecs: Vec<Codec> = file.chunks().iter().map(|c| c.codec).collect();
    assert!(codecs.contains(&Codec::Zstd) && codecs.contains(&Codec::Raw));
    assert_eq!(file.data_crc(), written.data_crc);
}

/// The verdict of a [`StreamCheck`] fed `bytes` in pieces of varying
/// sizes (1 byte to 64 KiB), announced as `expected` bytes long.
fn streamed(bytes: &[u8], expected: u64, seed: u64) -> Result<FileHeader, FormatError> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut check = StreamCheck::new("streamed.fck", expected)?;
    let mut rest = bytes;
    while !rest.is_empty() {
        let n = match rng.u8(..4) {
            0 => 1,
            1 => rng.usize(1..200),
            _ => rng.usize(1..65_536),
        }
        .min(rest.len());
        check.feed(&rest[..n])?;
        rest = &rest[n..];
    }
    check.finish()
}

#[test]
fn every_header_byte_is_protected() {
    let f = fixture();
    let (path, written) = f.write("h.fck", None);
    let good = std::fs::read(&path).unwrap();
    let header_len = CheckpointFile::open(&path).unwrap().header().header_len as usize;
    let bad = f.dir.path().join("bad.fck");
    for at in 0..header_len {
        let mut b = good.clone();
        b[at] ^= 0x10;
        std::fs::write(&bad, &b).unwrap();
        assert!(
            CheckpointFile::open(&bad).is_err(),
            "flip at {at} undetected"
        );
        let err = CheckpointFile::verify_image(&b, &bad)
            .err()
            .unwrap_or_else(|| panic!("flip at {at} undetected in memory"));
        assert!(err.to_string().contains("bad.fck"), "{err}");
        assert!(
            streamed(&b, b.len() as u64, at as u64).is_err(),
            "flip at {at} undetected while streaming"
        );
    }
    assert!(CheckpointFile::verify_image(&good, &path).is_ok());
    let header = streamed(&good, good.len() as u64, 1).unwrap();
    assert_eq!(&header, CheckpointFile::open(&path).unwrap().header());
    let read = CheckpointFile::open(&path)
        .unwrap()
        .read_verified()
        .unwrap();
    assert_eq!(read, good);
    assert_eq!(written.file_len as usize, good.len());
}

#[test]
fn data_flips_are_found_by_load_and_verify() {
    let f = fixture();
    for zstd in [None, Some(3)] {
        let (path, _) = f.write("d.fck", zstd);
        let good = std::fs::read(&path).unwrap();
        let file = CheckpointFile::open(&path).unwrap();
        let chunks = file.chunks().to_vec();
        drop(file);
        for c in &chunks {
            for at in [
                c.offset,
                c.offset + u64::from(c.stored_len) / 2,
                c.offset + u64::from(c.stored_len) - 1,
            ] {
                let mut b = good.clone();
                b[at as usize] ^= 0x01;
                std::fs::write(&path, &b).unwrap();
                let file = CheckpointFile::open(&path).unwrap();
                let problems = file.verify();
                assert_eq!(problems.len(), 1, "flip at {at}");
                assert!(
                    matches!(problems[0].kind, FormatErrorKind::ChunkCrc { chunk, .. } if chunk == c.index),
                    "{}",
                    problems[0]
                );
                let info = file.region(c.region).unwrap();
                let mut out = vec![0u8; info.bytes() as usize];
                assert!(file.load_region(c.region, &mut out).is_err());
                // The same damage, found in memory: one read, or an image
                // that arrived whole.
                for err in [
                    file.read_verified().unwrap_err(),
                    CheckpointFile::verify_image(&b, &path).unwrap_err(),
                    streamed(&b, b.len() as u64, at).unwrap_err(),
                ] {
                    assert!(
                        matches!(err.kind, FormatErrorKind::ChunkCrc { chunk, .. } if chunk == c.index),
                        "{err}"
                    );
                }
            }
        }
    }
}

#[test]
fn truncation_and_trailing_bytes_are_detected() {
    let f = fixture();
    let (path, _) = f.write("t.fck", None);
    let good = std::fs::read(&path).unwrap();
    let cut = f.dir.path().join("cut.fck");
    for len in [0, 5, 100, 159, 160, 4095, 4096, 5000, good.len() - 1] {
        std::fs::write(&cut, &good[..len]).unwrap();
        let err = CheckpointFile::open(&cut)
            .err()
            .unwrap_or_else(|| panic!("len {len} accepted"));
        assert!(
            matches!(err.kind, FormatErrorKind::Truncated { .. }),
            "len {len}: {err}"
        );
        assert!(err.to_string().contains("cut.fck"));
        let err = CheckpointFile::verify_image(&good[..len], &cut).unwrap_err();
        assert!(
            matches!(err.kind, FormatErrorKind::Truncated { .. }),
            "len {len} in memory: {err}"
        );
        // Streamed: the sender announced the whole file and stopped early,
        // or announced the cut length.
        let err = streamed(&good[..len], good.len() as u64, len as u64).unwrap_err();
        assert!(
            matches!(err.kind, FormatErrorKind::Truncated { .. }),
            "len {len} streamed: {err}"
        );
        assert!(streamed(&good[..len], len as u64, len as u64).is_err());
    }
    let mut longer = good.clone();
    longer.extend_from_slice(b"junk");
    std::fs::write(&cut, &longer).unwrap();
    assert!(matches!(
        CheckpointFile::open(&cut).unwrap_err().kind,
        FormatErrorKind::Inconsistent(_)
    ));
    // More bytes than announced, or announced longer than the file says.
    assert!(streamed(&longer, good.len() as u64, 7).is_err());
    assert!(streamed(&longer, longer.len() as u64, 7).is_err());
}

#[test]
fn garbage_never_panics() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.fck");
    let mut rng = fastrand::Rng::with_seed(99);
    let f = fixture();
    let (good_path, _) = f.write("good.fck", Some(1));
    let good = std::fs::read(&good_path).unwrap();
    for round in 0..400 {
        let bytes: Vec<u8> = if round % 2 == 0 {
            let len = rng.usize(..9000);
            let mut b: Vec<u8> = (0..len).map(|_| rng.u8(..)).collect();
            if round % 4 == 0 && b.len() >= 8 {
                b[..8].copy_from_slice(&layout::MAGIC);
            }
            b
        } else {
            // A valid file with a few random bytes overwritten anywhere.
            let mut b = good.clone();
            for _ in 0..rng.usize(1..4) {
                let at = rng.usize(..b.len());
                b[at] = rng.u8(..);
            }
            b
        };
        std::fs::write(&path, &bytes).unwrap();
        let in_memory = CheckpointFile::verify_image(&bytes, &path).is_ok();
        let on_disk = CheckpointFile::open(&path).is_ok_and(|f| f.verify().is_empty());
        assert_eq!(in_memory, on_disk, "round {round}");
        let stream = streamed(&bytes, bytes.len() as u64, round).is_ok();
        assert_eq!(stream, on_disk, "round {round} streamed");
        if let Ok(file) = CheckpointFile::open(&path) {
            assert_eq!(file.read_verified().is_ok(), on_disk, "round {round}");
            let _ = file.verify();
            for info in file.regions() {
                let mut out = vec![0u8; info.bytes() as usize];
                let _ = file.load_region(info.id, &mut out);
            }
        }
    }
}

#[test]
fn plan_rejects_what_the_format_cannot_hold() {
    let f = fixture();
    let mut s = spec(None);
    s.chunk_size = 1000;
    assert!(plan(&s, &f.sources()).is_err());
    let mut sources = f.sources();
    sources.swap(0, 1);
    assert!(plan(&spec(None), &sources).is_err());
    let mut sources = f.sources();
    sources[1].bytes = &sources[1].bytes[..8];
    assert!(matches!(
        plan(&spec(None), &sources),
        Err(FormatErrorKind::SizeMismatch { region: 3, .. })
    ));
}

#[test]
fn metadata_detects_a_foreign_file() {
    let f = fixture();
    let (path, written) = f.write("m.fck", None);
    let file = CheckpointFile::open(&path).unwrap();
    let mut meta = Metadata {
        format_version: VERSION,
        job_id: "unit".into(),
        checkpoint_id: 7,
        level: 1,
        rank: 1,
        world_size: 4,
        node: 2,
        stamp: 0x5eed,
        file: "m.fck".into(),
        file_len: written.file_len,
        header_crc: written.header_crc,
        data_crc: written.data_crc,
        raw_bytes: written.raw_bytes,
        stored_bytes: written.stored_bytes,
        compression: Compression::None,
        regions: file.regions(),
        created_unix_ms: 1_700_000_000_000,
    };
    meta.check_file(&file).unwrap();
    let json = meta.to_json();
    let back: Metadata = serde_json::from_slice(&json).unwrap();
    assert_eq!(back, meta);
    meta.checkpoint_id = 8;
    let err = meta.check_file(&file).unwrap_err().to_string();
    assert!(
        err.contains("checkpoint id is 8 in the record but 7 in the file"),
        "{err}"
    );
    // Every field of the record is compared with the file.
    let good = back.clone();
    type Mutation = (&'static str, fn(&mut Metadata));
    let mutations: Vec<Mutation> = vec![
        ("format version", |m| m.format_version += 1),
        ("job id", |m| m.job_id.push('x')),
        ("rank", |m| m.rank += 1),
        ("world size", |m| m.world_size += 1),
        ("node", |m| m.node += 1),
        ("stamp", |m| m.stamp += 1),
        ("file length", |m| m.file_len -= 1),
        ("header CRC", |m| m.header_crc ^= 1),
        ("data CRC", |m| m.data_crc ^= 1),
        ("raw size", |m| m.raw_bytes += 1),
        ("stored size", |m| m.stored_bytes -= 1),
        ("creation time", |m| m.created_unix_ms += 1),
        ("regions", |m| m.regions[0].count += 1),
    ];
    for (what, mutate) in mutations {
        let mut m = good.clone();
        mutate(&mut m);
        let err = m.check_file(&file).unwrap_err().to_string();
        assert!(err.contains(what), "{what}: {err}");
    }
    // A record naming another place is caught by the place check.
    let place = Place {
        job_id: "unit",
        checkpoint_id: 7,
        rank: 1,
        level: 1,
        file: "m.fck",
        world_size: Some(4),
    };
    assert!(good.misplacements(&place).is_empty());
    let mut m = good.clone();
    m.file = "../../etc/passwd".into();
    m.level = 2;
    let wrong = m.misplacements(&place).join("; ");
    assert!(
        wrong.contains("names data file `../../etc/passwd`"),
        "{wrong}"
    );
    assert!(
        wrong.contains("level-2 record in a level-1 directory"),
        "{wrong}"
    );
}

/// A region large enough to be loaded by several threads comes back whole,
/// raw and compressed, and damage in two chunks is reported for the first
/// one, as a single thread would report it.
#[test]
fn large_region_loads_on_several_threads() {
    let dir = tempfile::tempdir().unwrap();
    let data: Vec<f64> = (0..(12usize << 20) / 8)
        .map(|i| (i as f64 * 1e-4).sin())
        .collect();
    let info = RegionInfo {
        id: 1,
        elem: ElemType::F64,
        count: data.len() as u64,
    };
    let sources = [RegionSource {
        info,
        bytes: data.as_bytes(),
    }];
    for zstd in [None, Some(1)] {
        let spec = spec(zstd);
        let layout = plan(&spec, &sources).unwrap();
        let mut sink = MemSink::default();
        let written = write_checkpoint(&mut sink, &spec, &sources, &layout).unwrap();
        sink.bytes.truncate(written.file_len as usize);
        let path = dir.path().join("large.fck");
        std::fs::write(&path, &sink.bytes).unwrap();
        let mut file = CheckpointFile::open(&path).unwrap();
        file.set_workers(4);
        let mut out = vec![0u8; data.as_bytes().len()];
        file.load_region(1, &mut out).unwrap();
        assert!(out == data.as_bytes(), "zstd {zstd:?}: loaded bytes differ");

        let chunks = file.chunks().to_vec();
        assert!(chunks.len() > 8, "only {} chunks", chunks.len());
        let (early, late) = (&chunks[5], &chunks[chunks.len() - 2]);
        for c in [late, early] {
            sink.bytes[c.offset as usize + c.stored_len as usize / 2] ^= 0x10;
        }
        std::fs::write(&path, &sink.bytes).unwrap();
        let mut file = CheckpointFile::open(&path).unwrap();
        file.set_workers(4);
        let err = file.load_region(1, &mut out).unwrap_err();
        match err.kind {
            FormatErrorKind::ChunkCrc { chunk, .. } => assert_eq!(chunk, early.index),
            other => panic!("zstd {zstd:?}: expected a CRC error, got {other:?}"),
        }
    }
}

/// A file's bytes and the regions written in it.
type Image = (Vec<u8>, Vec<(RegionInfo, Vec<u8>)>);

/// A sound image of the fixture's regions, written once.
fn sound_image() -> &'static Image {
    static IMAGE: std::sync::OnceLock<Image> = std::sync::OnceLock::new();
    IMAGE.get_or_init(|| {
        let f = fixture();
        let (path, _) = f.write("sound.fck", Some(1));
        (std::fs::read(path).unwrap(), f.regions.clone())
    })
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(128))]

    /// A sound file with bytes overwritten, cut short or extended is
    /// refused, or read whole with every region as it was written: never
    /// a panic, never other data.
    #[test]
    fn a_damaged_file_is_refused_or_read_as_written(
        writes in proptest::collection::vec(
            (proptest::prelude::any::<usize>(), proptest::prelude::any::<u8>()), 0..6),
        cut in proptest::option::of(proptest::prelude::any::<usize>()),
        tail in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40),
    ) {
        let (sound, regions) = sound_image();
        let mut bytes = sound.clone();
        for (at, value) in writes {
            let at = at % bytes.len();
            bytes[at] = value;
        }
        if let Some(cut) = cut {
            bytes.truncate(cut % (bytes.len() + 1));
        }
        bytes.extend_from_slice(&tail);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.fck");
        let in_memory = CheckpointFile::verify_image(&bytes, &path).is_ok();
        std::fs::write(&path, &bytes).unwrap();
        let Ok(file) = CheckpointFile::open(&path) else {
            proptest::prop_assert!(!in_memory);
            return Ok(());
        };
        let sound_on_disk = file.verify().is_empty();
        proptest::prop_assert_eq!(in_memory, sound_on_disk);
        if sound_on_disk {
            for (info, expected) in regions {
                let mut out = vec![0u8; expected.len()];
                file.load_region(info.id, &mut out).unwrap();
                proptest::prop_assert_eq!(&out, expected);
            }
        }
    }
}
