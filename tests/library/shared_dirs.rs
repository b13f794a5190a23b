//! Node-local storage on a RAM disk every user shares: `storage.local_dir
//! = "/dev/shm"`, or a tmpfs mounted with its default mode 1777. frame
//! keeps the job's files in this user's private `frame-<uid>` inside it
//! (mode 0700), recovers from them, and the tools find them from the
//! shared directory's name. A directory others can write without the
//! sticky bit is refused, naming the key, and no message advises changing
//! the mode of a directory frame did not make.

use crate::common;

use common::heat2d::Heat2d;
use common::{frame_bin, ranks, run, scratch, serial, Job};
use frame::config::Config;
use frame::Checkpointer;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const DEADLINE: Duration = Duration::from_secs(120);
const NODES: [&str; 6] = [
    "--nodes",
    "2",
    "--ranks-per-node",
    "2",
    "--spare-nodes",
    "0",
];
const GRID: [&str; 8] = [
    "--nx", "64", "--ny", "60", "--steps", "120", "--every", "10",
];

fn uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// heat2d under `frame run` with node-local storage in `local` and job id
/// `job`, its checkpoints kept at the end.
fn heat2d(scratch: &Path, local: &Path, job: &str, args: &[&str]) -> Job {
    let mut all = NODES.to_vec();
    all.extend(args);
    (Heat2d::new(GRID).local(local))
        .env("FRAME_JOB_ID", job)
        .env("FRAME_RETENTION_KEEP_ON_FINALIZE", "true")
        .unset("FRAME_CONFIG")
        .frame_run(scratch, &all)
}

fn reference() -> String {
    let dir = scratch();
    let job = heat2d(dir.path(), &dir.path().join("local"), "shared-ref", &[]);
    assert!(job.status.success(), "{}", job.out);
    common::final_checksum(&job.out)
}

fn frame(args: &[&str], dir: &Path) -> (bool, String) {
    let (status, out, err) = run(Command::new(frame_bin()).args(args).arg(dir), DEADLINE);
    (status.success(), out + &err)
}

/// Runs a job with a rank killed on the shared directory `shared`: it
/// recovers to `reference`, and its files are all in this user's private
/// directory there.
fn job_on_a_shared_directory(shared: &Path, reference: &str) {
    let job_id = format!("shared-{}", std::process::id());
    let dir = scratch();
    let job = heat2d(dir.path(), shared, &job_id, &["--inject", "rank:1@iter=75"]);
    assert!(job.status.success(), "{}", job.out);
    assert!(job.out.contains("from L1 and resumed"), "{}", job.out);
    assert_eq!(common::final_checksum(&job.out), reference);
    let mine = shared.join(format!("frame-{}", uid()));
    let meta = std::fs::symlink_metadata(&mine).unwrap();
    assert!(meta.is_dir());
    assert_eq!(meta.uid(), uid());
    assert_eq!(meta.permissions().mode() & 0o7777, 0o700);
    for node in 0..2 {
        let kept = common::node_dir(&mine, node).join(&job_id);
        assert!(kept.is_dir(), "no {}", kept.display());
    }
    let strays: Vec<PathBuf> = std::fs::read_dir(shared)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().contains(&job_id) || p.ends_with("node-0"))
        .collect();
    assert!(
        strays.is_empty(),
        "written outside {}: {strays:?}",
        mine.display()
    );
    // The tools look where the job wrote, from the shared directory's name.
    let (ok, out) = frame(&["ls", "--job", &job_id], shared);
    assert!(ok && out.contains(&format!("job {job_id}")), "{out}");
    assert!(out.contains("L1 committed"), "{out}");
    let (ok, out) = frame(&["clean", "--yes", "--job", &job_id], shared);
    assert!(ok, "{out}");
    for node in 0..2 {
        let kept = common::node_dir(&mine, node).join(&job_id);
        assert!(common::files_under(&kept).is_empty(), "{out}");
    }
}

#[test]
fn a_job_on_dev_shm_keeps_its_files_in_a_private_directory_of_the_user() {
    let _g = serial();
    let shm = Path::new("/dev/shm");
    let mode = std::fs::metadata(shm).unwrap().permissions().mode() & 0o7777;
    assert_eq!(
        mode & 0o1002,
        0o1002,
        "/dev/shm is not a shared sticky directory here"
    );
    job_on_a_shared_directory(shm, &reference());
}

/// A tmpfs mounted over a directory, unmounted when dropped.
struct Mount(PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = nix::mount::umount2(&self.0, nix::mount::MntFlags::MNT_DETACH);
    }
}

#[test]
fn a_job_on_a_tmpfs_of_mode_1777_keeps_its_files_in_a_private_directory_of_the_user() {
    let _g = serial();
    assert!(
        rustix::process::geteuid().is_root(),
        "mounting a tmpfs needs root (scripts/test runs as root)"
    );
    let reference = reference();
    let dir = scratch();
    let ramdisk = dir.path().join("ramdisk");
    std::fs::create_dir(&ramdisk).unwrap();
    nix::mount::mount(
        Some("tmpfs"),
        &ramdisk,
        Some("tmpfs"),
        nix::mount::MsFlags::MS_NOSUID | nix::mount::MsFlags::MS_NODEV,
        Some("size=256m,mode=1777"),
    )
    .expect("mount a tmpfs");
    let _mount = Mount(ramdisk.clone());
    job_on_a_shared_directory(&ramdisk, &reference);
    let names: Vec<String> = std::fs::read_dir(&ramdisk)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, [format!("frame-{}", uid())]);
}

fn open_directory(dir: &Path) -> PathBuf {
    let open = dir.join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    open
}

#[test]
fn a_local_dir_others_can_write_without_the_sticky_bit_is_refused_by_the_checkpointer() {
    let dir = scratch();
    let open = open_directory(dir.path());
    let mut cfg = Config::default();
    cfg.storage.local_dir = open.clone();
    cfg.job.id = "open".into();
    let errors = ranks(2, 1, move |comm| match Checkpointer::init(&cfg, &comm) {
        Ok(_) => String::new(),
        Err(e) => e.to_string(),
    });
    for e in errors {
        assert!(e.contains("storage.local_dir"), "{e}");
        assert!(e.contains("without the sticky bit"), "{e}");
        assert!(!e.contains("chmod"), "{e}");
    }
    assert_eq!(
        std::fs::read_dir(&open).unwrap().count(),
        0,
        "it wrote there"
    );
}

#[test]
fn a_local_dir_others_can_write_without_the_sticky_bit_stops_frame_run() {
    let _g = serial();
    let dir = scratch();
    let open = open_directory(dir.path());
    let job = heat2d(dir.path(), &open, "open", &[]);
    assert!(!job.status.success(), "{}", job.out);
    assert!(job.out.contains("storage.local_dir"), "{}", job.out);
    assert!(job.out.contains("without the sticky bit"), "{}", job.out);
    assert!(!job.out.contains("chmod"), "{}", job.out);
    assert_eq!(
        std::fs::read_dir(&open).unwrap().count(),
        0,
        "it wrote there"
    );
}
