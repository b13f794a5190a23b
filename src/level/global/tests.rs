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
            chunk,
            false,
        )
        .unwrap();
    assert_eq!(w.written, first.len() as u64);
    assert_eq!(read_back(&store, 1), first);
    // A writer killed while writing a chunk of rank 2.
    let chunks = store.root().join(CHUNKS).join(chunk_dir(2));
    let leftover = chunks.join(format!(".{INCOMING}.tmp-2"));
    std::fs::write(&leftover, b"half a chunk").unwrap();
    let second: Vec<u8> = first.iter().map(|b| b ^ 0x5a).collect();
    store
        .write_from(
            &record(2, second.len() as u64),
            pieces_of(src.path(), &second),
            chunk,
            false,
        )
        .unwrap();
    assert_eq!(read_back(&store, 2), second);
    assert_eq!(read_back(&store, 1), first);
    for entry in std::fs::read_dir(&chunks).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        if !names::is_temporary(&name) {
            assert_eq!(chunk_hash(&std::fs::read(entry.path()).unwrap()), name);
        }
    }
    store.remove_ranks(&[2], true).unwrap();
    assert!(!leftover.exists(), "a killed writer's leftover stays");
}
