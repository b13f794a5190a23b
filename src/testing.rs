//! Helpers for the unit tests that run several threads.

use std::sync::mpsc;
use std::time::Duration;

/// Aborts the whole test process if dropped later than `limit` after its
/// creation: a deadlocked multi-rank test fails fast instead of hanging CI.
pub(crate) struct Deadline {
    done: Option<mpsc::Sender<()>>,
}

impl Deadline {
    pub(crate) fn new(limit: Duration) -> Self {
        let (done, wait) = mpsc::channel::<()>();
        std::thread::spawn(move || {
            if let Err(mpsc::RecvTimeoutError::Timeout) = wait.recv_timeout(limit) {
                eprintln!("test still running after {limit:?}: aborting");
                std::process::abort();
            }
        });
        Self { done: Some(done) }
    }
}

impl Drop for Deadline {
    fn drop(&mut self) {
        if let Some(d) = self.done.take() {
            let _ = d.send(());
        }
    }
}

/// A temporary directory on tmpfs when the machine has one (removed on drop).
pub(crate) fn scratch() -> tempfile::TempDir {
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(d) = tempfile::Builder::new()
            .prefix("frame-unit-")
            .tempdir_in(shm)
        {
            return d;
        }
    }
    tempfile::Builder::new()
        .prefix("frame-unit-")
        .tempdir()
        .expect("temp dir")
}
