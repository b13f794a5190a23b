use super::*;
use crate::level::stream::PieceSource;

/// A node lost while it wrote a rank's level-4 manifest leaves it under its
/// temporary name; removing the job's files (at finalize, by the node that
/// now holds the rank) removes that too, and with it the checkpoint's
/// directory (seen as a file left behind after two node failures).
#[test]
fn removing_ranks_also_removes_what_a_killed_writer_left() {
    let dir = tempfile::tempdir().unwrap();
    let store = GlobalStore::open(dir.path(), "job", 0).unwrap();
    let ckpt = store.root().join(names::ckpt_dir(17));
    std::fs::create_dir_all(&ckpt).unwrap();
    let leftover = ckpt.join(format!(".{}.tmp-5", manifest_file(5)));
    std::fs::write(&leftover, b"{").unwrap();
    // Another rank's leftover stays for the node that holds that rank.
    let other = ckpt.join(format!(".{}.tmp-6", manifest_file(6)));
    std::fs::write(&other, b"{").unwrap();
    store.remove_ranks(&[5], true).unwrap();
    assert!(!leftover.exists());
    assert!(other.exists());
    store.remove_ranks(&[6], true).unwrap();
    assert!(!ckpt.exists(), "the checkpoint's directory is left");
}

fn record(id: u64, len: u64) -> Metadata {
    Metadata {
        format_version: crate::format::VERSION,
        job_id: "job".into(),
        checkpoint_id: id,
        level: 1,
        rank: 2,
        world_size: 4,
        node: 1,
        stamp: id,
        file: names::data_file(2),
        file_len: len,
        header_crc: 0,
        data_crc: 0,
        raw_bytes: len,
        stored_bytes: len,
        compression: crate::format::Compression::None,
        regions: Vec::new(),
        created_unix_ms: 0,
    }
}

fn pieces_of(dir: &Path, bytes: &[u8]) -> Pieces {
    let path = dir.join("source");
    std::fs::write(&path, bytes).unwrap();
    Pieces::new(
        std::fs::File::open(&path).unwrap(),
        path,
        bytes.len() as u64,
    )
}

fn read_back(store: &GlobalStore, id: u64) -> Vec<u8> {
    let (_, mut chunks) = store.open_copy(id, 2, 4).unwrap();
    let mut out = Vec::new();
    while let Some(p) = chunks.next_piece().unwrap() {
        out.extend_from_slice(p);
    }
    out
}

/// A full (not differential) write hashes each chunk as it writes it and
/// names it by that hash: the chunks read back whole and match their
/// names, with a last chunk shorter than the others; what a writer killed
/// mid-chunk left under a temporary name neither disturbs the next write
/// nor is taken for a chunk, and goes with the rank's files.
#[test]
fn a_full_write_names_every_chunk_by_its_content() {
    let dir = tempfile::tempdir().unwrap();
    let src = tempfile::tempdir().unwrap();
    let store = GlobalStore::open(&dir.path().join("global"), "job", 0).unwrap();
    let chunk = 1 << 20;
    let first: Vec<u8> = (0..3 * chunk + 12345)
        .map(|i| (i * 7 % 253) as u8)
        .collect();
    let w = store
        .write_from(
            &record(1, first.len() as u64),
            pieces_of(src.path(), &first),
            L4Write::Full { chunk },
            None,
        )
        .unwrap();
    assert_eq!(w.written, first.len() as u64);
    assert_eq!(read_back(&store, 1), first);
    // A writer killed while writing a chunk of rank 2.
    let chunks = store.root().join(CHUNKS).join(chunk_dir(2));
    let leftover = chunks.join(format!(".{}.tmp-2", chunks::INCOMING));
    std::fs::write(&leftover, b"half a chunk").unwrap();
    let second: Vec<u8> = first.iter().map(|b| b ^ 0x5a).collect();
    store
        .write_from(
            &record(2, second.len() as u64),
            pieces_of(src.path(), &second),
            L4Write::Full { chunk },
            None,
        )
        .unwrap();
    assert_eq!(read_back(&store, 2), second);
    assert_eq!(read_back(&store, 1), first);
    for entry in std::fs::read_dir(&chunks).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        if !names::is_temporary(&name) {
            assert_eq!(
                chunks::chunk_hash(&std::fs::read(entry.path()).unwrap()),
                name
            );
        }
    }
    store.remove_ranks(&[2], true).unwrap();
    assert!(!leftover.exists(), "a killed writer's leftover stays");
}

/// Bytes that do not repeat at any block boundary (so that no block of a
/// file equals another).
fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn packs(store: &GlobalStore) -> Vec<String> {
    let dir = store.root().join(CHUNKS).join(chunk_dir(2));
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("pack-"))
        .collect();
    names.sort();
    names
}

fn manifest_of(store: &GlobalStore, id: u64) -> Manifest {
    let path = store
        .root()
        .join(names::ckpt_dir(id))
        .join(manifest_file(2));
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// Differential writes: the first is a full layer, the next ones write
/// only the blocks that changed (scattered through the file, the last
/// block shorter than the others) into one pack each, every third is full
/// again; every checkpoint reads back bit for bit, and once older
/// checkpoints go, so do the packs no kept manifest names.
#[test]
fn differential_writes_store_only_changed_blocks_and_read_back_exact() {
    let dir = tempfile::tempdir().unwrap();
    let src = tempfile::tempdir().unwrap();
    let store = GlobalStore::open(&dir.path().join("global"), "job", 0).unwrap();
    let block = 4096;
    let how = L4Write::Differential {
        block,
        full_every: 3,
    };
    let len = 40 * block + 100;
    let mut bytes = noise(len, 1);
    let mut versions = Vec::new();
    let write = |id: u64, bytes: &[u8]| {
        store
            .write_from(
                &record(id, len as u64),
                pieces_of(src.path(), bytes),
                how,
                None,
            )
            .unwrap()
    };
    let w = write(1, &bytes);
    assert_eq!((w.written, w.referenced), (len as u64, 0));
    versions.push(bytes.clone());
    // Four blocks changed, one of them the short last one.
    for b in [3, 17, 29, 40] {
        bytes[b * block + 7] ^= 0xa5;
    }
    let w = write(2, &bytes);
    assert_eq!(w.written, 3 * block as u64 + 100);
    assert_eq!(w.referenced, len as u64 - w.written);
    assert_eq!(manifest_of(&store, 2).layer, 1);
    versions.push(bytes.clone());
    bytes[5 * block] ^= 1;
    let w = write(3, &bytes);
    assert_eq!(w.written, block as u64);
    assert_eq!(manifest_of(&store, 3).layer, 2);
    versions.push(bytes.clone());
    bytes[6 * block] ^= 1;
    // The third write in a row from the last full one is full again.
    let w = write(4, &bytes);
    assert_eq!((w.written, manifest_of(&store, 4).layer), (len as u64, 0));
    versions.push(bytes.clone());
    for (i, v) in versions.iter().enumerate() {
        assert!(
            read_back(&store, i as u64 + 1) == *v,
            "checkpoint {}",
            i + 1
        );
    }
    assert_eq!(packs(&store).len(), 4);
    for id in 1..=4 {
        store.mark_committed(id, id, None, None).unwrap();
    }
    store.retain(&[2], 1, 4, true, false).unwrap();
    let kept = packs(&store);
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert!(manifest_of(&store, 4)
        .chunks
        .iter()
        .all(|c| c.pack.as_ref().is_some_and(|p| p.name == kept[0])));
    assert!(read_back(&store, 4) == versions[3]);
}

/// A block that changed on disk (a bit flipped in a pack) is found when it
/// is read, naming the pack, in every checkpoint that references it; a
/// truncated pack is found without reading it.
#[test]
fn a_corrupted_block_in_a_pack_is_detected_by_every_checkpoint_that_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let src = tempfile::tempdir().unwrap();
    let store = GlobalStore::open(&dir.path().join("global"), "job", 0).unwrap();
    let block = 4096;
    let how = L4Write::Differential {
        block,
        full_every: 8,
    };
    let len = 16 * block;
    let mut bytes = noise(len, 2);
    store
        .write_from(
            &record(1, len as u64),
            pieces_of(src.path(), &bytes),
            how,
            None,
        )
        .unwrap();
    bytes[block] ^= 1;
    store
        .write_from(
            &record(2, len as u64),
            pieces_of(src.path(), &bytes),
            how,
            None,
        )
        .unwrap();
    let first = packs(&store)
        .into_iter()
        .find(|p| manifest_of(&store, 1).chunks[0].pack.as_ref().unwrap().name == *p)
        .unwrap();
    let path = store.root().join(CHUNKS).join(chunk_dir(2)).join(&first);
    // Block 9 is unchanged: checkpoint 2 references it in the first pack.
    let mut packed = std::fs::read(&path).unwrap();
    packed[9 * block + 100] ^= 0x10;
    std::fs::write(&path, &packed).unwrap();
    for id in [1, 2] {
        let err = store.verify(id, 2, 4).unwrap_err().to_string();
        assert!(
            err.contains("does not match its hash") && err.contains(&first),
            "checkpoint {id}: {err}"
        );
    }
    let (held, bad) = store.scan_rank(2, 4);
    assert_eq!(held.len(), 2, "the sizes are right: {bad:?}");
    packed.truncate(5 * block);
    std::fs::write(&path, &packed).unwrap();
    let (held, bad) = store.scan_rank(2, 4);
    assert!(held.is_empty(), "{held:?}");
    assert!(
        bad.iter().all(|(_, e)| e.contains("missing or truncated")),
        "{bad:?}"
    );
}

/// Identical blocks in one write are stored once; a differential write
/// after a full one references the full write's chunk files where a block
/// equals a chunk.
#[test]
fn differential_writes_reuse_equal_blocks_and_full_writes_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let src = tempfile::tempdir().unwrap();
    let store = GlobalStore::open(&dir.path().join("global"), "job", 0).unwrap();
    let block = 4096;
    let write = |id: u64, bytes: &[u8], how: L4Write| {
        store
            .write_from(
                &record(id, bytes.len() as u64),
                pieces_of(src.path(), bytes),
                how,
                None,
            )
            .unwrap()
    };
    let differential = L4Write::Differential {
        block,
        full_every: 8,
    };
    let zeros = vec![0u8; 10 * block];
    let w = write(1, &zeros, differential);
    assert_eq!((w.written, w.referenced), (block as u64, 9 * block as u64));
    let mut bytes = noise(8 * block, 3);
    write(2, &bytes, L4Write::Full { chunk: block });
    bytes[0] ^= 1;
    let w = write(3, &bytes, differential);
    assert_eq!(w.written, block as u64);
    assert!(read_back(&store, 3) == bytes);
    assert!(read_back(&store, 1) == zeros);
}

/// With the archive, the checkpoints a newer one supersedes move there with
/// their markers and keep their blocks: recovery lists only the kept ones,
/// every archived one still reads back bit for bit, an uncommitted one is
/// removed, not archived, and removing the job's files leaves the archive
/// and the chunks it names.
#[test]
fn archived_checkpoints_keep_their_blocks_and_outlive_the_job() {
    let dir = tempfile::tempdir().unwrap();
    let src = tempfile::tempdir().unwrap();
    let store = GlobalStore::open(&dir.path().join("global"), "job", 0).unwrap();
    let how = L4Write::Differential {
        block: 4096,
        full_every: 3,
    };
    let len = 12 * 4096;
    let mut bytes = noise(len, 4);
    let mut versions = Vec::new();
    for id in 1..=5u64 {
        bytes[(id as usize % 12) * 4096] ^= 0x11;
        store
            .write_from(
                &record(id, len as u64),
                pieces_of(src.path(), &bytes),
                how,
                None,
            )
            .unwrap();
        versions.push(bytes.clone());
        // Checkpoint 3 never commits.
        if id != 3 {
            store.mark_committed(id, id, None, None).unwrap();
        }
        store.retain(&[2], 1, 4, true, true).unwrap();
    }
    assert_eq!(store.ids(), vec![5]);
    assert_eq!(store.archived(), vec![1, 2, 4]);
    let archive = store.root().join(ARCHIVE);
    for id in [1u64, 2, 4] {
        let ckpt = archive.join(names::ckpt_dir(id));
        assert!(ckpt.join(COMMITTED).exists(), "checkpoint {id}'s marker");
        let manifest: Manifest =
            serde_json::from_slice(&std::fs::read(ckpt.join(manifest_file(2))).unwrap()).unwrap();
        let dir = Dir::open(&store.root().join(CHUNKS).join(chunk_dir(2))).unwrap();
        let back = Chunks::new(dir, manifest.chunks);
        let mut out = Vec::new();
        let mut back = back;
        while let Some(p) = back.next_piece().unwrap() {
            out.extend_from_slice(p);
        }
        assert!(out == versions[id as usize - 1], "archived checkpoint {id}");
    }
    store.remove_ranks(&[2], true).unwrap();
    assert!(store.ids().is_empty());
    assert_eq!(store.archived(), vec![1, 2, 4]);
    let manifest: Manifest = serde_json::from_slice(
        &std::fs::read(archive.join(names::ckpt_dir(1)).join(manifest_file(2))).unwrap(),
    )
    .unwrap();
    for c in &manifest.chunks {
        let file = store
            .root()
            .join(CHUNKS)
            .join(chunk_dir(2))
            .join(c.place().0);
        assert!(file.exists(), "{} is gone", file.display());
    }
}

/// Nodes retain concurrently: a node that retains after the one that
/// moves the marker to the archive still archives its ranks' manifests
/// (it no longer sees the checkpoint as committed where it was).
#[test]
fn every_node_archives_its_ranks_whichever_moves_the_marker_first() {
    let dir = tempfile::tempdir().unwrap();
    let src = tempfile::tempdir().unwrap();
    let store = GlobalStore::open(&dir.path().join("global"), "job", 0).unwrap();
    let how = L4Write::Differential {
        block: 4096,
        full_every: 8,
    };
    let bytes = noise(3 * 4096, 5);
    for id in 1..=2u64 {
        for rank in [2u32, 3] {
            let mut meta = record(id, bytes.len() as u64);
            meta.rank = rank;
            meta.file = names::data_file(rank);
            store
                .write_from(&meta, pieces_of(src.path(), &bytes), how, None)
                .unwrap();
        }
        store.mark_committed(id, id, None, None).unwrap();
    }
    // The node of rank 3 moves the marker; the node of rank 2 comes after.
    store.retain(&[3], 1, 4, true, true).unwrap();
    store.retain(&[2], 1, 4, false, true).unwrap();
    let archived = store.root().join(ARCHIVE).join(names::ckpt_dir(1));
    for rank in [2, 3] {
        assert!(
            archived.join(manifest_file(rank)).exists(),
            "rank {rank}'s manifest was not archived"
        );
    }
    assert!(archived.join(COMMITTED).exists());
    assert_eq!(store.ids(), vec![2]);
}
