//! Watching node-local storage while a job runs: the peak bytes each
//! node's directory held.

use std::collections::{BTreeMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Bytes held under `dir`, each file counted once however many names it
/// has (levels share a node's own files by hard links). Files that vanish
/// while the walk runs are skipped.
pub fn held(dir: &Path) -> u64 {
    let mut seen = HashSet::new();
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(m) = std::fs::symlink_metadata(e.path()) else {
                continue;
            };
            if m.is_dir() {
                stack.push(e.path());
            } else if seen.insert((m.dev(), m.ino())) {
                total += m.len();
            }
        }
    }
    total
}

/// Walks every node directory `<local>/node-<n>` (n below `nodes`) over
/// and over until finished; the peak of each.
pub struct Watch {
    stop: Arc<AtomicBool>,
    peaks: Arc<Mutex<BTreeMap<u32, u64>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watch {
    pub fn start(local: PathBuf, nodes: u32) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let peaks = Arc::new(Mutex::new(BTreeMap::new()));
        let (s, p) = (Arc::clone(&stop), Arc::clone(&peaks));
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                for n in 0..nodes {
                    let now = held(&local.join(format!("node-{n}")));
                    let mut peaks = p.lock().unwrap();
                    let e = peaks.entry(n).or_insert(0);
                    *e = (*e).max(now);
                }
            }
        });
        Self {
            stop,
            peaks,
            thread: Some(thread),
        }
    }

    pub fn finish(mut self) -> BTreeMap<u32, u64> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
        self.peaks.lock().unwrap().clone()
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
