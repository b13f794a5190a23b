//! Node-local storage stays within the formula of docs/STORAGE.md
//! ([`Config::storage_need`]) while a job runs with every level on: every
//! level prunes as soon as a newer checkpoint of it commits, on every
//! node, including the partner copies and parity a node keeps for others.

mod common;

use common::{example, run, scratch, serial};
use frame::config::{Config, Interval, NodeData};
use std::collections::{BTreeMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const DEADLINE: Duration = Duration::from_secs(300);
const NODES: u32 = 4;

/// Bytes held under `dir`, each file counted once however many names it
/// has (levels share a node's own files by hard links). Files that vanish
/// while the walk runs are skipped.
fn held(dir: &Path) -> u64 {
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

/// Watches every node's directory until stopped; the peak of each.
struct Watch {
    stop: Arc<AtomicBool>,
    peaks: Arc<Mutex<BTreeMap<u32, u64>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watch {
    fn start(local: PathBuf) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let peaks = Arc::new(Mutex::new(BTreeMap::new()));
        let (s, p) = (Arc::clone(&stop), Arc::clone(&peaks));
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                for n in 0..NODES {
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

    fn finish(mut self) -> BTreeMap<u32, u64> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
        self.peaks.lock().unwrap().clone()
    }
}

/// The bytes of one checkpoint of node `n`'s ranks: the rank files of its
/// newest level-1 checkpoint (kept at the end of the run).
fn own_bytes(local: &Path, n: u32) -> u64 {
    let l1 = local.join(format!("node-{n}/heat2d/l1"));
    let newest = std::fs::read_dir(&l1)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("ckpt-")
        })
        .max()
        .unwrap_or_else(|| panic!("no level-1 checkpoint under {}", l1.display()));
    std::fs::read_dir(&newest)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".fck"))
        .map(|e| e.metadata().unwrap().len())
        .sum()
}

#[test]
fn twenty_checkpoints_at_every_level_keep_every_node_within_the_formula() {
    let _g = serial();
    let dir = scratch();
    let local = dir.path().join("local");
    let settings = [
        ("FRAME_L2_INTERVAL", "1"),
        ("FRAME_L3_INTERVAL", "2"),
        ("FRAME_L4_INTERVAL", "4"),
        ("FRAME_MANAGER_QUEUE", "1"),
        ("FRAME_RETENTION_KEEP_ON_FINALIZE", "true"),
    ];
    let mut cmd = Command::new(example("heat2d"));
    cmd.args(["--nodes", "4", "--ranks-per-node", "2"])
        .args([
            "--nx", "2048", "--ny", "2048", "--steps", "200", "--every", "10",
        ])
        .env("FRAME_STORAGE_LOCAL_DIR", &local)
        .env("FRAME_STORAGE_GLOBAL_DIR", dir.path().join("global"));
    for (k, v) in settings {
        cmd.env(k, v);
    }
    std::fs::create_dir_all(&local).unwrap();
    let watch = Watch::start(local.clone());
    let (status, out, err) = run(&mut cmd, DEADLINE);
    let peaks = watch.finish();
    assert!(status.success(), "{out}{err}");
    assert!(out.contains("wrote 20 checkpoint(s)"), "{out}");

    // The configuration the job ran with: the defaults and the settings.
    let mut cfg = Config::default();
    cfg.l2.interval = Interval::Calls(1);
    cfg.l3.interval = Interval::Calls(2);
    cfg.l4.interval = Interval::Calls(4);
    cfg.manager.queue = 1;
    let own: Vec<u64> = (0..NODES).map(|n| own_bytes(&local, n)).collect();
    let largest = *own.iter().max().unwrap();
    // Records and markers: a few KiB per file, well within this.
    let slack = 1 << 20;
    for n in 0..NODES {
        let data = NodeData {
            own: own[n as usize],
            // Node n keeps the copies of node n - 1 (its partner is n + 1).
            partner: own[((n + NODES - 1) % NODES) as usize],
            largest_blob: largest + 64 * 1024,
            group: NODES,
        };
        let need = cfg.storage_need(data);
        let peak = peaks[&n];
        println!(
            "node {n}: peak {peak} bytes, formula {need:?} = {}",
            need.total()
        );
        assert!(
            peak >= 2 * data.own,
            "node {n}: the watch saw {peak} bytes, less than two checkpoints"
        );
        assert!(
            peak <= need.total() + slack,
            "node {n} held {peak} bytes, above the {} the formula allows ({need:?})",
            need.total() + slack
        );
    }
}
