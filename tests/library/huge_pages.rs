//! Level 1 on a RAM disk mounted with huge pages (`huge=within_size`, the
//! setting docs/STORAGE.md recommends for `storage.local_dir`): new files
//! are written through a mapping there, large regions load on several
//! threads, and a full RAM disk is still an error that keeps the previous
//! checkpoint. Mounting needs root; without it the tests say so and pass.

use crate::common;

use common::{config, ranks};
use frame::comm::Comm;
use frame::Checkpointer;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// A tmpfs mounted with huge=within_size on a fresh directory, unmounted
/// and removed on drop.
struct HugeTmpfs {
    dir: PathBuf,
}

impl HugeTmpfs {
    /// `None` (with a line saying why) where this process may not mount.
    fn mount(size: &str) -> Option<Self> {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("needs root to mount a tmpfs; skipped");
            return None;
        }
        let dir = tempfile::Builder::new()
            .prefix("frame-huge-")
            .tempdir()
            .unwrap()
            .keep();
        nix::mount::mount(
            Some("tmpfs"),
            &dir,
            Some("tmpfs"),
            nix::mount::MsFlags::MS_NOSUID | nix::mount::MsFlags::MS_NODEV,
            Some(format!("huge=within_size,size={size},mode=0700").as_str()),
        )
        .unwrap_or_else(|e| panic!("mounting a huge-page tmpfs on {}: {e}", dir.display()));
        Some(Self { dir })
    }
}

impl Drop for HugeTmpfs {
    fn drop(&mut self) {
        let _ = nix::mount::umount2(&self.dir, nix::mount::MntFlags::MNT_DETACH);
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Rank `rank`'s field at checkpoint `step`: `mib` MiB of f64.
fn field(rank: usize, step: u64, mib: usize) -> Vec<f64> {
    (0..(mib << 20) / 8)
        .map(|i| (i as f64 * 1e-3 + step as f64).sin() * (rank + 1) as f64)
        .collect()
}

/// Every file under `dir` whose name ends in `.fck` (checkpoint data).
fn data_files(dir: &Path) -> Vec<PathBuf> {
    common::files_under(dir)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "fck"))
        .collect()
}

/// Restores job `job` under `dir` as a new process would (nothing kept
/// mapped from the writers) on `size` ranks; each rank's checkpoint id and
/// whether it got back the field of `mib` MiB written at that checkpoint.
fn restore_in_a_new_process(dir: &Path, job: &str, size: usize, mib: usize) -> Vec<(u64, bool)> {
    frame::internals::level::l1::release_kept_files();
    let cfg = config(dir, job);
    ranks(size, size, move |comm| {
        let mut ckpt = Checkpointer::init(&cfg, &comm).unwrap();
        assert!(ckpt.recovering());
        let data = ckpt.protect(0, Vec::<f64>::new());
        let id = ckpt.recover().unwrap();
        let same = *data.read() == field(comm.rank(), id, mib);
        ckpt.finalize().unwrap();
        (id, same)
    })
}

#[test]
fn new_and_reused_files_on_huge_pages_restore_bit_exact() {
    let Some(disk) = HugeTmpfs::mount("512m") else {
        return;
    };
    let cfg = config(&disk.dir, "huge");
    let mib = 24;
    let written = ranks(2, 2, move |comm| {
        let mut ckpt = Checkpointer::init(&cfg, &comm).unwrap();
        let data = ckpt.protect(0, field(comm.rank(), 0, mib));
        for step in 1..=3 {
            *data.write() = field(comm.rank(), step, mib);
            assert_eq!(ckpt.snapshot().unwrap(), Some(step));
        }
        // No finalize: the job dies here.
    });
    assert_eq!(written.len(), 2);
    let files = data_files(&disk.dir);
    assert!(
        !files.is_empty(),
        "no checkpoint files under {}",
        disk.dir.display()
    );
    for f in &files {
        let blksize = std::fs::metadata(f).unwrap().blksize();
        assert!(
            blksize >= 2 << 20,
            "{} is not backed by huge pages (block size {blksize})",
            f.display()
        );
    }
    let restored = restore_in_a_new_process(&disk.dir, "huge", 2, mib);
    for (rank, (id, same)) in restored.into_iter().enumerate() {
        assert_eq!(id, 3, "rank {rank}");
        assert!(same, "rank {rank} restored other bytes");
    }
}

#[test]
fn a_full_huge_page_disk_fails_the_snapshot_and_keeps_the_previous() {
    let Some(disk) = HugeTmpfs::mount("48m") else {
        return;
    };
    let cfg = config(&disk.dir, "full");
    let outcome = ranks(1, 1, move |comm| {
        let mut ckpt = Checkpointer::init(&cfg, &comm).unwrap();
        let data = ckpt.protect(0, field(0, 1, 8));
        assert_eq!(ckpt.snapshot().unwrap(), Some(1));
        // Grown past what the disk holds next to checkpoint 1.
        *data.write() = field(0, 2, 44);
        let err = ckpt.snapshot().unwrap_err().to_string();
        *data.write() = Vec::new();
        (err, ckpt.stats().last_id)
    });
    let (err, last) = &outcome[0];
    assert!(
        err.contains(&disk.dir.display().to_string()),
        "the error does not name the file: {err}"
    );
    assert_eq!(*last, Some(1));
    let restored = restore_in_a_new_process(&disk.dir, "full", 1, 8);
    assert_eq!(restored[0], (1, true));
}
