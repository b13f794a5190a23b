//! File checkpoints from Rust: files a program writes itself become part
//! of a checkpoint beside its regions, and come back by name, bit for bit.

use crate::common;

use common::{config, ranks, scratch};
use frame::comm::Comm;
use frame::internals::level::catalog::{self, Severity};
use frame::{Checkpointer, Error, Level};
use std::io::Write;

/// The content of rank `r`'s file `k` at checkpoint `c`: sizes differ per
/// rank and file, and cross chunk boundaries (chunks are 64 KiB).
fn content(r: usize, k: usize, c: u64) -> Vec<u8> {
    let len = [0usize, 1, 65_536, 200_003][k] + 7_919 * r;
    (0..len)
        .map(|i| ((i as u64).wrapping_mul(31) ^ (r as u64) << 3 ^ c << 5 ^ k as u64) as u8)
        .collect()
}

const NAMES: [&str; 4] = ["empty.dat", "one.bin", "chunk.bin", "restart file 3.dat"];

#[test]
fn files_and_regions_of_one_checkpoint_come_back_by_name() {
    for zstd in [false, true] {
        let dir = scratch();
        let mut cfg = config(dir.path(), "files");
        if zstd {
            cfg.snapshot.compression = frame::config::Compression::Zstd;
        }
        let first = cfg.clone();
        let root = dir.path().to_path_buf();
        ranks(3, 2, move |comm| {
            let r = comm.rank();
            let mut ckpt = Checkpointer::init(&first, &comm).unwrap();
            let step = ckpt.protect(0, 0u64);
            for c in 1..=3u64 {
                step.set(c);
                ckpt.begin_checkpoint(Level::L1).unwrap();
                // Snapshots wait for the end.
                assert!(matches!(ckpt.snapshot(), Err(Error::Level { .. })));
                for (k, name) in NAMES.iter().enumerate() {
                    let path = ckpt.checkpoint_file(name).unwrap();
                    let mut f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
                    f.write_all(&content(r, k, c)).unwrap();
                }
                assert_eq!(ckpt.end_checkpoint().unwrap(), c);
            }
            // The saved files were removed; their content is in checkpoint 3.
            assert!(ckpt.recovered_files().is_empty());
        });
        let tree = catalog::scan(dir.path()).expect("scan");
        let damage: Vec<String> = catalog::verify(&tree)
            .findings
            .iter()
            .filter(|f| f.severity == Severity::Damage)
            .map(|f| format!("{}: {}", f.path.display(), f.message))
            .collect();
        assert!(damage.is_empty(), "verify: {damage:#?}");
        ranks(3, 2, move |comm| {
            let r = comm.rank();
            let mut ckpt = Checkpointer::init(&cfg, &comm).unwrap();
            let step = ckpt.protect(0, 0u64);
            assert!(ckpt.recovering());
            assert_eq!(ckpt.recover().unwrap(), 3);
            assert_eq!(step.get(), 3);
            let mut held = ckpt.recovered_files().to_vec();
            held.sort();
            let mut want: Vec<String> = NAMES.iter().map(|n| n.to_string()).collect();
            want.sort();
            assert_eq!(held, want);
            for (k, name) in NAMES.iter().enumerate() {
                let path = ckpt.recovered_file(name).unwrap();
                assert!(path.starts_with(&root), "{}", path.display());
                let got = std::fs::read(&path).unwrap();
                assert!(
                    got == content(r, k, 3),
                    "rank {r}, file {name}: differs (zstd {zstd})"
                );
                let mode = std::os::unix::fs::PermissionsExt::mode(
                    &std::fs::metadata(&path).unwrap().permissions(),
                );
                assert_eq!(mode & 0o777, 0o600, "{name}");
            }
            let err = ckpt.recovered_file("other.dat").unwrap_err().to_string();
            assert!(err.contains("holds no file of that name"), "{err}");
            ckpt.finalize().unwrap();
        });
        assert!(
            common::files_under(dir.path()).is_empty(),
            "finalize removes the files too"
        );
    }
}

#[test]
fn bad_names_and_misuse_are_errors_that_name_the_file() {
    let dir = scratch();
    let cfg = config(dir.path(), "names");
    ranks(1, 1, move |comm| {
        let mut ckpt = Checkpointer::init(&cfg, &comm).unwrap();
        let err = ckpt.checkpoint_file("a.dat").unwrap_err().to_string();
        assert!(
            err.contains("\"a.dat\"") && err.contains("begin_checkpoint"),
            "{err}"
        );
        let err = ckpt.begin_checkpoint(Level::L2).unwrap_err().to_string();
        assert!(err.contains("no level above 1 is configured"), "{err}");
        ckpt.begin_checkpoint(Level::L1).unwrap();
        for bad in ["", "../escape", "a/b", ".hidden"] {
            let err = ckpt.checkpoint_file(bad).unwrap_err();
            assert!(matches!(err, Error::File { .. }), "{bad}: {err}");
        }
        assert!(ckpt.begin_checkpoint(Level::L1).is_err(), "one at a time");
        // A name asked twice is one file, emptied again.
        let path = ckpt.checkpoint_file("x").unwrap();
        std::fs::write(&path, b"first").unwrap();
        let again = ckpt.checkpoint_file("x").unwrap();
        assert_eq!(path, again);
        assert_eq!(std::fs::read(&again).unwrap(), b"");
        std::fs::write(&again, b"second").unwrap();
        // A file the program removed is an error of the checkpoint, which
        // keeps the previous one.
        let gone = ckpt.checkpoint_file("gone").unwrap();
        std::fs::remove_file(&gone).unwrap();
        let err = ckpt.end_checkpoint().unwrap_err().to_string();
        assert!(err.contains("\"gone\""), "{err}");
        // A symbolic link put in its place is not followed.
        ckpt.begin_checkpoint(Level::L1).unwrap();
        let link = ckpt.checkpoint_file("link").unwrap();
        std::fs::remove_file(&link).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", &link).unwrap();
        let err = ckpt.end_checkpoint().unwrap_err().to_string();
        assert!(err.contains("\"link\""), "{err}");
        ckpt.begin_checkpoint(Level::L1).unwrap();
        let ok = ckpt.checkpoint_file("x").unwrap();
        std::fs::write(&ok, b"third").unwrap();
        assert_eq!(ckpt.end_checkpoint().unwrap(), 1);
    });
}

#[test]
fn a_cancelled_checkpoint_of_files_leaves_the_previous_one_the_newest() {
    let dir = scratch();
    let cfg = config(dir.path(), "cancel");
    let first = cfg.clone();
    ranks(2, 1, move |comm| {
        let r = comm.rank();
        let mut ckpt = Checkpointer::init(&first, &comm).unwrap();
        assert!(ckpt.cancel_checkpoint().is_err(), "nothing is begun");
        for (c, keep) in [(1u64, true), (2, false)] {
            ckpt.begin_checkpoint(Level::L1).unwrap();
            let path = ckpt.checkpoint_file(NAMES[1]).unwrap();
            std::fs::write(&path, content(r, 1, c)).unwrap();
            if keep {
                assert_eq!(ckpt.end_checkpoint().unwrap(), 1);
            } else {
                ckpt.cancel_checkpoint().unwrap();
                assert!(
                    !path.exists(),
                    "the cancelled file stays at {}",
                    path.display()
                );
            }
        }
        // The next checkpoint begins as if the cancelled one never had.
        ckpt.begin_checkpoint(Level::L1).unwrap();
        ckpt.cancel_checkpoint().unwrap();
    });
    ranks(2, 1, move |comm| {
        let r = comm.rank();
        let mut ckpt = Checkpointer::init(&cfg, &comm).unwrap();
        assert!(ckpt.recovering());
        assert_eq!(ckpt.recover().unwrap(), 1);
        let path = ckpt.recovered_file(NAMES[1]).unwrap();
        assert_eq!(std::fs::read(path).unwrap(), content(r, 1, 1));
    });
}
