use super::*;

fn full(path: &str) -> FsError {
    FsError::Io {
        op: "write",
        path: PathBuf::from(path),
        cause: io::Error::from_raw_os_error(28),
    }
}

#[test]
fn a_full_storage_names_the_bytes_only_when_the_write_knew_them() {
    let unknown = StorageError::from_fs(full("/shm/rank-0.json"), 0);
    assert!(unknown.is_no_space());
    let text = unknown.to_string();
    assert!(
        text.starts_with("no space left on the storage of /shm/rank-0.json: "),
        "{text}"
    );
    assert!(!text.contains("needed"), "{text}");
    let known = StorageError::from_fs(full("/shm/rank-0.fck"), 4096).to_string();
    assert!(
        known.contains("/shm/rank-0.fck (needed 4096 bytes): "),
        "{known}"
    );
    let from: StorageError = full("/shm/x").into();
    assert!(!from.to_string().contains("needed"), "{from}");
}

#[test]
fn small_files_written_on_a_full_storage_say_how_many_bytes_they_needed() {
    // A tmpfs of one page, filled.
    assert!(
        rustix::process::geteuid().is_root(),
        "mounting a tmpfs needs root (scripts/test runs as root)"
    );
    let t = crate::testing::scratch();
    let mnt = t.path().join("tiny");
    std::fs::create_dir(&mnt).unwrap();
    let flags = nix::mount::MsFlags::MS_NOSUID | nix::mount::MsFlags::MS_NODEV;
    nix::mount::mount(
        Some("tmpfs"),
        &mnt,
        Some("tmpfs"),
        flags,
        Some("size=4k,mode=0700"),
    )
    .unwrap();
    struct Unmount<'a>(&'a std::path::Path);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            let _ = nix::mount::umount2(self.0, nix::mount::MntFlags::MNT_DETACH);
        }
    }
    let _u = Unmount(&mnt);
    let _ = std::fs::write(mnt.join("filler"), vec![0u8; 64 << 10]);
    let dir = crate::safefs::Dir::open(&mnt).unwrap();
    let record = vec![b'x'; 3000];
    let e = write_small(&dir, "rank-0.json", &record, "0").unwrap_err();
    assert!(e.is_no_space(), "{e}");
    assert!(e.to_string().contains("(needed 3000 bytes)"), "{e}");
}
