//! A job's run directory on one host: where the root (and, on other
//! hosts, each daemon) keeps the job's Unix sockets.
//!
//! It is made (mode 0700) inside a base directory that must be this user's
//! (or root's, and sticky if others may write to it), and it holds a lock
//! file its maker keeps locked for the job's lifetime. Leftovers of
//! processes that died are removed only when they are provably frame's: a
//! directory of this user, named `run-*`, whose lock file is there and no
//! longer locked.

use frame::internals::safefs::{self, Dir, Lock};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The lock file inside a run directory.
const RUN_LOCK: &str = ".frame-run.lock";

/// The job's directory for sockets; removed when dropped.
pub(crate) struct RunDir {
    pub(crate) path: PathBuf,
    _lock: Lock,
}

impl Drop for RunDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Creates the job's run directory, a new one inside `given` or in this
/// user's private directory `$TMPDIR/frame-<uid>/`, after removing
/// leftovers of launchers that died.
pub(crate) fn make(given: Option<&Path>) -> Result<RunDir, String> {
    let base = match given {
        Some(p) => {
            if !p.exists() {
                Dir::open_or_create(p).map_err(|e| e.to_string())?;
            }
            safefs::check_base(p).map_err(|e| e.to_string())?;
            p.to_path_buf()
        }
        None => {
            let p = std::env::temp_dir().join(format!("frame-{}", safefs::my_uid()));
            Dir::open_or_create(&p).map_err(|e| e.to_string())?;
            p
        }
    };
    remove_stale(&base);
    let path = tempfile::Builder::new()
        .prefix(&format!("run-{}-", std::process::id()))
        .tempdir_in(&base)
        .map_err(|e| format!("cannot make a run directory in {}: {e}", base.display()))?
        .keep();
    let dir = Dir::open(&path).map_err(|e| e.to_string())?;
    let lock = dir
        .lock(RUN_LOCK, "the run directory of a running job")
        .map_err(|e| e.to_string())?;
    Ok(RunDir { path, _lock: lock })
}

/// Removes run directories in `base` whose launcher is gone.
fn remove_stale(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        if !name.to_string_lossy().starts_with("run-") {
            continue;
        }
        let path = e.path();
        let ours = std::fs::symlink_metadata(&path)
            .is_ok_and(|m| m.is_dir() && m.uid() == safefs::my_uid());
        if !ours {
            continue;
        }
        let Ok(dir) = Dir::open(&path) else {
            continue;
        };
        if dir.kind(RUN_LOCK) != Some(safefs::Kind::File) {
            continue;
        }
        // Taking the lock proves that no launcher holds it any more.
        if let Ok(lock) = dir.lock(RUN_LOCK, "a run directory") {
            drop(lock);
            let _ = std::fs::remove_dir_all(&path);
        }
    }
}
