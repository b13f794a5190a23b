//! Damaged, missing or mismatched input: every case gets a clear error that
//! names the rank, file or key, nothing panics, and the previous good
//! checkpoint is still restored where one exists.

use crate::common;

use common::{config, frame_bin, ranks, run, scratch};
use frame::comm::Comm;
use frame::{Checkpointer, Config, Error};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn values(rank: usize, step: u64) -> Vec<f64> {
    (0..50_000)
        .map(|i| (i as f64 + 1.0) * (rank as f64 + 1.0) + step as f64)
        .collect()
}

/// Two ranks write checkpoints 1..=n of [step, values].
fn write_checkpoints(cfg: &Config, n: u64) {
    let cfg = cfg.clone();
    ranks(2, 1, move |comm| {
        let mut ckpt = Checkpointer::init(&cfg, &comm).unwrap();
        let step = ckpt.protect(0, 0u64);
        let v = ckpt.protect(1, Vec::new());
        for k in 1..=n {
            step.set(k);
            *v.write() = values(comm.rank(), k);
            ckpt.snapshot().unwrap();
        }
    });
}

/// Two ranks recover; returns each rank's (checkpoint id, step) or error text.
fn try_recover(cfg: &Config) -> Vec<Result<(u64, u64), String>> {
    let cfg = cfg.clone();
    ranks(2, 1, move |comm| {
        let mut ckpt = Checkpointer::init(&cfg, &comm).map_err(|e| e.to_string())?;
        let step = ckpt.protect(0, 0u64);
        let v = ckpt.protect(1, Vec::<f64>::new());
        let id = ckpt.recover().map_err(|e| e.to_string())?;
        assert_eq!(
            *v.read(),
            values(comm.rank(), step.get()),
            "restored values"
        );
        Ok((id, step.get()))
    })
}

fn data_file(cfg: &Config, id: u64, rank: u32) -> PathBuf {
    cfg.storage
        .local_dir
        .join(&cfg.job.id)
        .join("l1")
        .join(format!("ckpt-{id:020}"))
        .join(format!("rank-{rank:06}.fck"))
}

fn record(cfg: &Config, id: u64, rank: u32) -> PathBuf {
    data_file(cfg, id, rank).with_extension("meta.json")
}

/// Runs `frame verify` on `dir`; returns (exit code, stdout).
fn verify(dir: &Path) -> (i32, String) {
    let (status, out, err) = run(
        Command::new(frame_bin()).arg("verify").arg(dir),
        Duration::from_secs(60),
    );
    (status.code().unwrap_or(-1), out + &err)
}

fn flip(path: &Path, at: u64) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[at as usize] ^= 0x40;
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn a_truncated_file_falls_back_to_the_previous_checkpoint() {
    let dir = scratch();
    let cfg = config(dir.path(), "trunc");
    write_checkpoints(&cfg, 2);
    let f = data_file(&cfg, 2, 1);
    let len = std::fs::metadata(&f).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&f)
        .unwrap()
        .set_len(len / 2)
        .unwrap();

    let (code, out) = verify(dir.path());
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("rank-000001.fck") && out.contains("truncated"),
        "{out}"
    );

    assert_eq!(try_recover(&cfg), vec![Ok((1, 1)), Ok((1, 1))]);
}

#[test]
fn a_truncated_only_checkpoint_is_not_recoverable_and_names_the_rank() {
    let dir = scratch();
    let mut cfg = config(dir.path(), "trunc1");
    cfg.retention.keep_last = 1;
    write_checkpoints(&cfg, 3);
    let f = data_file(&cfg, 3, 1);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&f)
        .unwrap()
        .set_len(1000)
        .unwrap();
    for r in try_recover(&cfg) {
        let e = r.unwrap_err();
        assert!(e.starts_with("not recoverable: rank(s) 1"), "{e}");
        assert!(
            e.contains("rank 1: checkpoint 3 is unusable") && e.contains("truncated"),
            "{e}"
        );
        assert!(e.contains("rank-000001.fck"), "{e}");
    }
    // Nothing was deleted: the damaged checkpoint is still there to inspect.
    assert!(f.exists() && data_file(&cfg, 3, 0).exists());
}

#[test]
fn a_flipped_header_byte_falls_back() {
    let dir = scratch();
    let cfg = config(dir.path(), "hdr");
    write_checkpoints(&cfg, 2);
    let f = data_file(&cfg, 2, 0);
    flip(&f, 20);
    let (code, out) = verify(dir.path());
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("rank-000000.fck") && out.contains("header checksum mismatch"),
        "{out}"
    );
    assert_eq!(try_recover(&cfg), vec![Ok((1, 1)), Ok((1, 1))]);
}

#[test]
fn a_flipped_data_byte_is_caught_while_loading_and_falls_back() {
    let dir = scratch();
    let cfg = config(dir.path(), "data");
    write_checkpoints(&cfg, 2);
    let f = data_file(&cfg, 2, 1);
    // Region 1 starts after the header (4096) and the 8-byte region 0; its
    // second 64 KiB chunk is chunk 2 of the file.
    flip(&f, 4096 + 8 + 65536 + 100);
    let (code, out) = verify(dir.path());
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("rank-000001.fck") && out.contains("region 1, chunk 2"),
        "{out}"
    );
    assert!(out.contains("CRC mismatch"), "{out}");
    // Checkpoint 2 looks fine from its header, fails its CRC while loading on
    // rank 1, and every rank falls back to checkpoint 1 together.
    assert_eq!(try_recover(&cfg), vec![Ok((1, 1)), Ok((1, 1))]);
}

#[test]
fn a_record_that_does_not_match_its_file_falls_back() {
    let dir = scratch();
    let cfg = config(dir.path(), "meta");
    write_checkpoints(&cfg, 2);
    let m = record(&cfg, 2, 1);
    let mut json: serde_json::Value = serde_json::from_slice(&std::fs::read(&m).unwrap()).unwrap();
    json["regions"][1]["count"] = serde_json::json!(49_999);
    std::fs::write(&m, serde_json::to_vec(&json).unwrap()).unwrap();
    let (code, out) = verify(dir.path());
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("rank-000001.fck") && out.contains("does not match its record"),
        "{out}"
    );
    assert_eq!(try_recover(&cfg), vec![Ok((1, 1)), Ok((1, 1))]);

    // An unreadable record is damage too.
    write_checkpoints(&config(dir.path(), "meta2"), 1);
    let m = record(&config(dir.path(), "meta2"), 1, 0);
    std::fs::write(&m, b"{ not json").unwrap();
    let (code, out) = verify(&dir.path().join("meta2"));
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("rank-000000.meta.json") && out.contains("unreadable record"),
        "{out}"
    );
}

#[test]
fn mismatched_protected_regions_are_reported_on_every_rank() {
    let dir = scratch();
    let cfg = config(dir.path(), "regions");
    write_checkpoints(&cfg, 1);
    type Setup = fn(&mut Checkpointer<'_>, usize);
    let cases: [(Setup, &str); 4] = [
        // Rank 0 forgot region 1.
        (
            |c, rank| {
                if rank != 0 {
                    c.protect(1, Vec::<f64>::new());
                }
            },
            "rank 0: checkpoint 1 holds region 1 (50000 x f64), which is not protected",
        ),
        // Rank 1 protects it with the wrong element type.
        (
            |c, rank| {
                if rank == 1 {
                    c.protect(1, Vec::<f32>::new());
                } else {
                    c.protect(1, Vec::<f64>::new());
                }
            },
            "rank 1: region 1: checkpoint holds f64 elements, the protected region holds f32",
        ),
        // Rank 0 protects a fixed-size region of the wrong size.
        (
            |c, rank| {
                if rank == 0 {
                    c.protect(1, vec![0f64; 10].into_boxed_slice());
                } else {
                    c.protect(1, Vec::<f64>::new());
                }
            },
            "rank 0: region 1: checkpoint holds 50000 elements, the protected region has 10 and cannot be resized",
        ),
        // Both protect a region the checkpoint does not have.
        (
            |c, _| {
                c.protect(1, Vec::<f64>::new());
                c.protect(9, 0u8);
            },
            "region 9 is protected but checkpoint 1 does not hold it",
        ),
    ];
    for (setup, want) in cases {
        let cfg = cfg.clone();
        let errors = ranks(2, 1, move |comm| {
            let mut ckpt = Checkpointer::init(&cfg, &comm).unwrap();
            ckpt.protect(0, 0u64);
            setup(&mut ckpt, comm.rank());
            match ckpt.recover() {
                Err(e @ Error::RegionMismatch { .. }) => e.to_string(),
                other => panic!("expected a region mismatch, got {other:?}"),
            }
        });
        for e in errors {
            assert!(e.contains(want), "{e}\n  wanted: {want}");
        }
    }
    // The checkpoint is untouched and restores once regions match.
    assert_eq!(try_recover(&cfg), vec![Ok((1, 1)), Ok((1, 1))]);
}

#[test]
fn jobs_sharing_a_directory_do_not_touch_each_other() {
    let dir = scratch();
    let a = config(dir.path(), "job-a");
    let mut b = config(dir.path(), "job-b");
    b.retention.keep_last = 1;
    write_checkpoints(&a, 2);
    let before: Vec<(PathBuf, Vec<u8>)> = common::files_under(&dir.path().join("job-a"))
        .into_iter()
        .map(|p| (p.clone(), std::fs::read(&p).unwrap()))
        .collect();
    // Job B checkpoints many times (its retention deletes its own files), then
    // finalizes (deleting all of them).
    let bc = b.clone();
    ranks(2, 1, move |comm| {
        let mut ckpt = Checkpointer::init(&bc, &comm).unwrap();
        assert!(!ckpt.recovering(), "job b must not see job a's checkpoints");
        let _v = ckpt.protect(1, vec![7u8; 1000]);
        for _ in 0..5 {
            ckpt.snapshot().unwrap();
        }
        ckpt.finalize().unwrap();
    });
    assert!(!dir.path().join("job-b").exists());
    for (p, bytes) in &before {
        assert_eq!(&std::fs::read(p).unwrap(), bytes, "{} changed", p.display());
    }
    assert_eq!(try_recover(&a), vec![Ok((2, 2)), Ok((2, 2))]);

    // A file of another job copied into job a's directory is rejected.
    write_checkpoints(&b, 1);
    std::fs::copy(record(&b, 1, 0), record(&a, 2, 0)).unwrap();
    std::fs::copy(data_file(&b, 1, 0), data_file(&a, 2, 0)).unwrap();
    let r = try_recover(&a);
    assert_eq!(
        r,
        vec![Ok((1, 1)), Ok((1, 1))],
        "falls back past the foreign file"
    );
}

#[test]
fn a_different_number_of_ranks_is_not_recoverable() {
    let dir = scratch();
    let cfg = config(dir.path(), "resize-job");
    write_checkpoints(&cfg, 1);
    let errors = ranks(3, 1, move |comm| {
        let err = Checkpointer::init(&cfg, &comm).err().expect("must fail");
        (comm.rank(), err.to_string())
    });
    for (_, e) in errors {
        assert!(
            e.contains("written by a job of 2 ranks, this run has 3"),
            "{e}"
        );
        assert!(e.contains("rank 2: holds no checkpoint"), "{e}");
    }
}

#[test]
fn a_local_dir_that_cannot_be_created_is_named() {
    let dir = scratch();
    let file = dir.path().join("plain-file");
    std::fs::write(&file, b"x").unwrap();
    let mut cfg = config(&file.join("sub"), "nodir");
    cfg.mark_set_by_program("storage.local_dir");
    let errors = ranks(2, 1, move |comm| {
        Checkpointer::init(&cfg, &comm).err().map(|e| e.to_string())
    });
    for e in errors {
        let e = e.expect("init must fail");
        assert!(
            e.contains("checkpoint storage unavailable on rank(s) 0, 1"),
            "{e}"
        );
        assert!(e.contains("plain-file/sub"), "{e}");
        assert!(
            e.contains("`storage.local_dir` (set by the program)"),
            "{e}"
        );
    }
}

#[test]
fn an_unwritable_local_dir_is_named() {
    let dir = scratch();
    // As root, permission bits do not stop writes, so use a place no one may
    // write instead.
    let root = nix::unistd::geteuid().is_root();
    let target = if root {
        PathBuf::from("/sys/frame-test-unwritable")
    } else {
        let d = dir.path().join("ro");
        std::fs::create_dir(&d).unwrap();
        std::fs::set_permissions(&d, std::os::unix::fs::PermissionsExt::from_mode(0o500)).unwrap();
        d
    };
    let cfg = config(&target, "nowrite");
    let errors = ranks(1, 1, move |comm| {
        Checkpointer::init(&cfg, &comm).err().map(|e| e.to_string())
    });
    let e = errors[0].clone().expect("init must fail");
    assert!(e.contains(&target.display().to_string()), "{e}");
    assert!(e.contains("storage.local_dir"), "{e}");
}

#[test]
fn bad_configuration_files_stop_the_program_with_the_key_and_file() {
    let dir = scratch();
    let heat = common::example("heat2d");
    let cases = [
        ("[snapshot\ninterval = 3\n", "line 1"),
        ("[snapshot]\nintervall = 3\n", "snapshot.intervall"),
        ("[retention]\nkeep_last = \"two\"\n", "retention.keep_last"),
    ];
    for (i, (text, want)) in cases.iter().enumerate() {
        let file = dir.path().join(format!("bad{i}.toml"));
        std::fs::write(&file, text).unwrap();
        let (status, out, err) = run(
            Command::new(&heat)
                .arg("--config")
                .arg(&file)
                .env("FRAME_STORAGE_LOCAL_DIR", dir.path()),
            Duration::from_secs(60),
        );
        assert!(!status.success(), "{out}");
        assert!(
            err.contains(want) && err.contains(&format!("bad{i}.toml")),
            "{err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
    let (status, _, err) = run(
        Command::new(&heat)
            .env("FRAME_RETENTION_KEEP_LAST", "lots")
            .env("FRAME_STORAGE_LOCAL_DIR", dir.path()),
        Duration::from_secs(60),
    );
    assert!(!status.success());
    assert!(err.contains("FRAME_RETENTION_KEEP_LAST"), "{err}");
}

#[test]
fn two_jobs_with_one_job_id_in_one_directory_are_refused() {
    let dir = scratch();
    let cfg = config(dir.path(), "twin");
    let first = cfg.clone();
    let (held_tx, held_rx) = std::sync::mpsc::channel();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let done_rx = std::sync::Mutex::new(done_rx);
    // The first job holds rank 0 until the second has tried.
    let holder = std::thread::spawn(move || {
        ranks(1, 1, move |comm| {
            let mut ckpt = Checkpointer::init(&first, &comm).unwrap();
            let v = ckpt.protect(0, vec![1u8; 100_000]);
            ckpt.checkpoint().unwrap();
            held_tx.send(()).unwrap();
            done_rx
                .lock()
                .unwrap()
                .recv_timeout(Duration::from_secs(60))
                .unwrap();
            v.write()[0] = 2;
            ckpt.checkpoint().unwrap()
        })
    });
    common::Patience::new(Duration::from_secs(60))
        .wait(|slice| held_rx.recv_timeout(slice).ok())
        .unwrap();
    let second = cfg.clone();
    let errors = ranks(1, 1, move |comm| {
        Checkpointer::init(&second, &comm)
            .err()
            .map(|e| e.to_string())
    });
    done_tx.send(()).unwrap();
    let e = errors[0].clone().expect("the second job must be refused");
    assert!(
        e.contains("rank 0 of job `twin` is running in another process")
            && e.contains(".lock-rank-000000"),
        "{e}"
    );
    // The first job was not disturbed.
    assert_eq!(holder.join().unwrap(), vec![2]);
}

#[test]
fn a_fixed_length_region_refuses_a_checkpoint_of_another_length() {
    let dir = scratch();
    let cfg = config(dir.path(), "fixed");
    write_checkpoints(&cfg, 1);
    // A rerun with a smaller grid: 40_000 values where 50_000 were saved.
    let c = cfg.clone();
    let errors = ranks(2, 1, move |comm| {
        let mut ckpt = Checkpointer::init(&c, &comm).unwrap();
        let _step = ckpt.protect(0, 0u64);
        let _v = ckpt.protect_fixed(1, vec![0.0f64; 40_000]);
        ckpt.recover().unwrap_err()
    });
    for e in errors {
        let msg = e.to_string();
        assert!(matches!(e, Error::RegionMismatch { id: 1, .. }), "{msg}");
        assert!(
            msg.contains("region 1: checkpoint holds 50000 elements, the region (protected with a fixed length) has 40000"),
            "{msg}"
        );
    }
    // The same Vec protected without a fixed length is resized instead.
    let got = ranks(2, 1, move |comm| {
        let mut ckpt = Checkpointer::init(&cfg, &comm).unwrap();
        let _step = ckpt.protect(0, 0u64);
        let v = ckpt.protect(1, vec![0.0f64; 40_000]);
        ckpt.recover().unwrap();
        let n = v.read().len();
        n
    });
    assert_eq!(got, vec![50_000, 50_000]);
}
