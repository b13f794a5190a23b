use super::*;

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
