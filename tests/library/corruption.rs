//! Flip every field of every file kind: for each damage below, done to a
//! copy of a sound two-node job, recovery either restores a checkpoint bit
//! for bit (the newest one whose every copy is sound) or refuses clearly,
//! never panics, and `verify` reports the damage (naming the file) or, for
//! harmless changes, nothing worse than a warning.
//!
//! Covered: every byte of the data file's header and tables, every header
//! and table field rewritten with a valid header CRC, bytes of every chunk
//! (raw and zstd), truncations and extensions, every field of the metadata
//! record, the `LATEST` pointer in every form, symbolic links, FIFOs,
//! foreign owners and open permissions where files and directories belong,
//! and older (or other ranks', or other jobs') files in newer places.

use crate::common;

use common::{config, ranks, scratch, serial};
use frame::comm::Comm;
use frame::internals::format::layout::{self, RawHeader, CHUNK_SIZE, HEADER_SIZE, REGION_SIZE};
use frame::internals::level::catalog::{self, Severity};
use frame::{Checkpointer, Config};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use zerocopy::{FromBytes, IntoBytes};

const JOB: &str = "corrupt";
const NEWEST: u64 = 3;

/// A rank's values at `step`.
fn values(rank: usize, step: u64) -> Vec<u64> {
    (0..20_000u64)
        .map(|i| (i + 1).wrapping_mul(0x2545_f491_4f6c_dd1d) ^ (rank as u64) << 48 ^ step)
        .collect()
}

fn cfg(base: &Path, node: u32, zstd: bool) -> Config {
    let mut c = config(&base.join(format!("node-{node}")), JOB);
    c.retention.keep_last = 3;
    if zstd {
        c.snapshot.compression = frame::config::Compression::Zstd;
        c.snapshot.compression_level = 1;
    }
    c
}

/// Two ranks on two nodes write checkpoints 1..=3 (steps 1..=3).
fn write_job(base: &Path, zstd: bool) {
    let base = base.to_path_buf();
    ranks(2, 1, move |comm| {
        let c = cfg(&base, comm.node(), zstd);
        let mut ckpt = Checkpointer::init(&c, &comm).unwrap();
        let step = ckpt.protect(0, 0u64);
        let v = ckpt.protect(1, Vec::new());
        for k in 1..=NEWEST {
            step.set(k);
            // Smooth values compress: the zstd job stores zstd chunks.
            *v.write() = if zstd {
                (0..20_000u64)
                    .map(|i| i / 64 + k + comm.rank() as u64)
                    .collect()
            } else {
                values(comm.rank(), k)
            };
            ckpt.snapshot().unwrap();
        }
    });
}

/// What recovery did on every rank: the restored id, or the error.
fn recover(base: &Path, zstd: bool) -> Result<u64, String> {
    let base = base.to_path_buf();
    let out = ranks(2, 1, move |comm| {
        let c = cfg(&base, comm.node(), zstd);
        let mut ckpt = Checkpointer::init(&c, &comm).map_err(|e| e.to_string())?;
        let step = ckpt.protect(0, 0u64);
        let v = ckpt.protect(1, Vec::<u64>::new());
        if !ckpt.recovering() {
            return Err("started fresh".to_string());
        }
        let id = ckpt.recover().map_err(|e| e.to_string())?;
        let want: Vec<u64> = if zstd {
            (0..20_000u64)
                .map(|i| i / 64 + step.get() + comm.rank() as u64)
                .collect()
        } else {
            values(comm.rank(), step.get())
        };
        assert_eq!(step.get(), id, "checkpoint {id} holds step {}", step.get());
        assert!(*v.read() == want, "checkpoint {id}: wrong values");
        Ok(id)
    });
    assert_eq!(out[0], out[1], "ranks disagree");
    out[0].clone()
}

fn data(base: &Path, node: u32, id: u64) -> PathBuf {
    base.join(format!(
        "node-{node}/{JOB}/l1/ckpt-{id:020}/rank-{node:06}.fck"
    ))
}

fn record(base: &Path, node: u32, id: u64) -> PathBuf {
    data(base, node, id).with_extension("meta.json")
}

fn latest(base: &Path, node: u32) -> PathBuf {
    base.join(format!("node-{node}/{JOB}/l1/LATEST"))
}

fn ckpt_dir(base: &Path, node: u32, id: u64) -> PathBuf {
    base.join(format!("node-{node}/{JOB}/l1/ckpt-{id:020}"))
}

/// What a damage must lead to.
#[derive(Clone, Copy, Debug)]
enum Want {
    /// Recovery restores this checkpoint.
    Restore(u64),
    /// Recovery refuses with an error containing this text.
    Refuse(&'static str),
}

/// What `verify` must say.
#[derive(Clone, Copy, Debug)]
enum Says {
    /// Damage whose path or message contains this text.
    Damage(&'static str),
    /// No damage, a warning containing this text.
    Warning(&'static str),
    /// Nothing worse than a note.
    Clean,
}

type Mutation = Box<dyn Fn(&Path)>;

struct Case {
    name: String,
    mutate: Mutation,
    want: Want,
    says: Says,
}

fn case(name: impl Into<String>, want: Want, says: Says, mutate: impl Fn(&Path) + 'static) -> Case {
    Case {
        name: name.into(),
        mutate: Box::new(mutate),
        want,
        says,
    }
}

fn edit(path: &Path, f: impl FnOnce(&mut Vec<u8>)) {
    let mut bytes = std::fs::read(path).unwrap();
    f(&mut bytes);
    std::fs::write(path, bytes).unwrap();
}

/// Rewrites header/table bytes `at..at+len` (adding 1 to the first byte) and
/// recomputes the header CRC, so only semantic checks can catch it.
fn rewrite_with_crc(path: &Path, at: usize) {
    edit(path, |b| {
        b[at] = b[at].wrapping_add(1);
        let (header, _) = RawHeader::read_from_prefix(&b[..]).unwrap();
        let tables = HEADER_SIZE
            + header.region_count.get() as usize * REGION_SIZE
            + header.chunk_count.get() as usize * CHUNK_SIZE;
        let crc = layout::header_crc(&header, &b[HEADER_SIZE..tables.min(b.len())]);
        b[layout::HEADER_CRC_OFFSET..HEADER_SIZE].copy_from_slice(crc.to_le_bytes().as_bytes());
    });
}

/// Header fields: (name, offset).
const HEADER_FIELDS: &[(&str, usize)] = &[
    ("magic", 0),
    ("version", 8),
    ("flags", 10),
    ("header_len", 12),
    ("checkpoint_id", 16),
    ("file_len", 24),
    ("created_unix_ms", 32),
    ("rank", 40),
    ("world_size", 44),
    ("chunk_size", 48),
    ("region_count", 52),
    ("chunk_count", 56),
    ("job_id_len", 60),
    ("job_id", 64),
    ("node", 128),
    ("stamp", 132),
    ("reserved", 140),
];
const REGION_FIELDS: &[(&str, usize)] = &[
    ("id", 0),
    ("elem", 4),
    ("reserved", 5),
    ("count", 8),
    ("byte_len", 16),
    ("first_chunk", 24),
    ("chunk_count", 28),
];
const CHUNK_FIELDS: &[(&str, usize)] = &[
    ("offset", 0),
    ("stored_len", 8),
    ("raw_len", 12),
    ("crc", 16),
    ("codec", 20),
    ("reserved", 21),
];

/// Mutations of the JSON record: (field, new value or None to remove it).
fn record_mutations() -> Vec<(&'static str, Option<serde_json::Value>)> {
    use serde_json::json;
    vec![
        ("format_version", Some(json!(1))),
        ("job_id", Some(json!("other"))),
        ("checkpoint_id", Some(json!(2))),
        ("level", Some(json!(2))),
        ("rank", Some(json!(0))),
        ("world_size", Some(json!(3))),
        ("node", Some(json!(7))),
        ("stamp", Some(json!(12345))),
        ("file", Some(json!("../../../etc/passwd"))),
        ("file", Some(json!("rank-000000.fck"))),
        ("file_len", Some(json!(4096))),
        ("header_crc", Some(json!(1))),
        ("data_crc", Some(json!(1))),
        ("raw_bytes", Some(json!(1))),
        ("stored_bytes", Some(json!(1))),
        ("regions", Some(json!([]))),
        (
            "regions",
            Some(
                json!([{"id": 0, "elem": "u64", "count": 1}, {"id": 1, "elem": "f64", "count": 20000}]),
            ),
        ),
        (
            "regions",
            Some(
                json!([{"id": 0, "elem": "u64", "count": 1}, {"id": 1, "elem": "u64", "count": 19999}]),
            ),
        ),
        ("created_unix_ms", Some(json!(0))),
        ("compression", Some(json!("lzma"))),
        ("format_version", None),
        ("stamp", None),
        ("regions", None),
        ("surprise", Some(json!(1))),
    ]
}

fn cases(pristine: &Path) -> Vec<Case> {
    use Says::*;
    use Want::*;
    let mut v = Vec::new();
    let d = data(pristine, 1, NEWEST);
    let bytes = std::fs::read(&d).unwrap();
    let (header, _) = RawHeader::read_from_prefix(&bytes[..]).unwrap();
    let regions = header.region_count.get() as usize;
    let chunks = header.chunk_count.get() as usize;
    let tables = HEADER_SIZE + regions * REGION_SIZE + chunks * CHUNK_SIZE;
    let header_len = header.header_len.get() as usize;
    const DATA_NAME: &str = "rank-000001.fck";
    let data_name = DATA_NAME;

    // Every byte of the header and tables, and the first padding bytes.
    for at in 0..tables + 16 {
        v.push(case(
            format!("flip data byte {at}"),
            Restore(2),
            Damage(data_name),
            move |b| edit(&data(b, 1, NEWEST), |x| x[at] ^= 0x55),
        ));
    }
    // Every field rewritten with a valid header CRC.
    let mut fields: Vec<(String, usize)> = HEADER_FIELDS
        .iter()
        .filter(|(n, _)| *n != "magic")
        .map(|(n, o)| (format!("header {n}"), *o))
        .collect();
    for r in 0..regions {
        for (n, o) in REGION_FIELDS {
            fields.push((format!("region {r} {n}"), HEADER_SIZE + r * REGION_SIZE + o));
        }
    }
    for c in 0..chunks {
        for (n, o) in CHUNK_FIELDS {
            fields.push((
                format!("chunk {c} {n}"),
                HEADER_SIZE + regions * REGION_SIZE + c * CHUNK_SIZE + o,
            ));
        }
    }
    for (name, at) in fields {
        v.push(case(
            format!("{name} rewritten, CRC fixed"),
            Restore(2),
            Damage(data_name),
            move |b| rewrite_with_crc(&data(b, 1, NEWEST), at),
        ));
    }
    // Bytes of every chunk: first, middle, last.
    let mut offsets = Vec::new();
    for c in 0..chunks {
        let e = HEADER_SIZE + regions * REGION_SIZE + c * CHUNK_SIZE;
        let off = u64::from_le_bytes(bytes[e..e + 8].try_into().unwrap()) as usize;
        let len = u32::from_le_bytes(bytes[e + 8..e + 12].try_into().unwrap()) as usize;
        offsets.extend([off, off + len / 2, off + len - 1]);
    }
    for at in offsets {
        v.push(case(
            format!("flip chunk byte {at}"),
            Restore(2),
            Damage("CRC mismatch"),
            move |b| edit(&data(b, 1, NEWEST), |x| x[at] ^= 1),
        ));
    }
    // Truncations and extensions.
    let len = bytes.len();
    for cut in [
        0,
        1,
        100,
        HEADER_SIZE - 1,
        HEADER_SIZE,
        header_len - 1,
        header_len,
        header_len + 5000,
        len - 1,
    ] {
        v.push(case(
            format!("truncate data to {cut}"),
            Restore(2),
            Damage("bytes on disk, its record says"),
            move |b| edit(&data(b, 1, NEWEST), |x| x.truncate(cut)),
        ));
    }
    for more in [1usize, 4096] {
        v.push(case(
            format!("extend data by {more}"),
            Restore(2),
            Damage("on disk"),
            move |b| {
                edit(&data(b, 1, NEWEST), |x| {
                    x.extend(std::iter::repeat_n(0u8, more))
                })
            },
        ));
    }
    // The data file replaced.
    v.push(case(
        "data removed",
        Restore(2),
        Damage("record without its data file"),
        |b| std::fs::remove_file(data(b, 1, NEWEST)).unwrap(),
    ));
    v.push(case(
        "data is a link to the older checkpoint's file",
        Restore(2),
        Damage("symbolic link"),
        |b| {
            std::fs::remove_file(data(b, 1, NEWEST)).unwrap();
            std::os::unix::fs::symlink(data(b, 1, 2), data(b, 1, NEWEST)).unwrap();
        },
    ));
    v.push(case(
        "data is the older checkpoint's file",
        Restore(2),
        Damage("does not match its record"),
        |b| {
            std::fs::copy(data(b, 1, 2), data(b, 1, NEWEST)).unwrap();
        },
    ));
    v.push(case(
        "data is a FIFO",
        Restore(2),
        Damage("not a regular file"),
        |b| {
            std::fs::remove_file(data(b, 1, NEWEST)).unwrap();
            nix::unistd::mkfifo(&data(b, 1, NEWEST), nix::sys::stat::Mode::S_IRWXU).unwrap();
        },
    ));
    // Every field of the record.
    for (field, value) in record_mutations() {
        let name = match &value {
            Some(x) => format!("record {field} = {x}"),
            None => format!("record without {field}"),
        };
        v.push(case(
            name,
            Restore(2),
            Damage(data_name.trim_end_matches(".fck")),
            move |b| {
                let path = record(b, 1, NEWEST);
                let mut json: serde_json::Value =
                    serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
                let obj = json.as_object_mut().unwrap();
                match &value {
                    Some(x) => obj.insert(field.into(), x.clone()),
                    None => obj.remove(field),
                };
                std::fs::write(&path, serde_json::to_vec(&json).unwrap()).unwrap();
            },
        ));
    }
    // Asking for zstd while storing raw chunks is legitimate (zstd did not
    // help), so this change is harmless.
    v.push(case(
        "record compression = zstd on raw chunks",
        Restore(3),
        Clean,
        |b| {
            let path = record(b, 1, NEWEST);
            let text = std::fs::read_to_string(&path)
                .unwrap()
                .replace("\"none\"", "\"zstd\"");
            std::fs::write(&path, text).unwrap();
        },
    ));
    for (name, bytes) in [
        ("garbage", b"{{{".to_vec()),
        ("empty", Vec::new()),
        ("binary", vec![0xff; 64]),
    ] {
        v.push(case(
            format!("record is {name}"),
            Restore(2),
            Damage("unreadable record"),
            move |b| std::fs::write(record(b, 1, NEWEST), &bytes).unwrap(),
        ));
    }
    v.push(case(
        "record truncated",
        Restore(2),
        Damage("unreadable record"),
        |b| edit(&record(b, 1, NEWEST), |x| x.truncate(x.len() / 2)),
    ));
    v.push(case(
        "record huge",
        Restore(2),
        Damage("larger than"),
        |b| {
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(record(b, 1, NEWEST))
                .unwrap();
            f.set_len(frame::internals::format::MAX_RECORD + 10)
                .unwrap();
        },
    ));
    v.push(case(
        "record removed",
        Restore(2),
        Damage("was committed"),
        |b| std::fs::remove_file(record(b, 1, NEWEST)).unwrap(),
    ));
    v.push(case(
        "record is a link to the older record",
        Restore(2),
        Damage("symbolic link"),
        |b| {
            std::fs::remove_file(record(b, 1, NEWEST)).unwrap();
            std::os::unix::fs::symlink(record(b, 1, 2), record(b, 1, NEWEST)).unwrap();
        },
    ));
    // Older files, other ranks' files and other jobs' files in newer places.
    v.push(case(
        "checkpoint 2's files copied into checkpoint 3",
        Restore(2),
        Damage("holds checkpoint 2"),
        |b| {
            std::fs::copy(data(b, 1, 2), data(b, 1, NEWEST)).unwrap();
            std::fs::copy(record(b, 1, 2), record(b, 1, NEWEST)).unwrap();
        },
    ));
    v.push(case(
        "checkpoint 2's directory copied over checkpoint 3's",
        Restore(2),
        Damage("holds checkpoint 2"),
        |b| {
            std::fs::remove_dir_all(ckpt_dir(b, 1, NEWEST)).unwrap();
            common::copy_tree(&ckpt_dir(b, 1, 2), &ckpt_dir(b, 1, NEWEST));
        },
    ));
    v.push(case(
        "rank 0's files under rank 1's names",
        Restore(2),
        Damage("holds rank 0's data"),
        |b| {
            std::fs::copy(data(b, 0, NEWEST), data(b, 1, NEWEST)).unwrap();
            std::fs::copy(record(b, 0, NEWEST), record(b, 1, NEWEST)).unwrap();
        },
    ));
    v.push(case(
        "another job's files",
        Restore(2),
        Damage("belongs to job"),
        |b| {
            let other = b.join("node-1/other/l1");
            std::fs::create_dir_all(&other).unwrap();
            let from = b.join(format!("node-1/{JOB}/l1"));
            let copy = b.join("node-1/other/l1/ckpt");
            common::copy_tree(&from.join(format!("ckpt-{NEWEST:020}")), &copy);
            let text = std::fs::read_to_string(copy.join("rank-000001.meta.json")).unwrap();
            std::fs::write(
                copy.join("rank-000001.meta.json"),
                text.replace(JOB, "other"),
            )
            .unwrap();
            // Its file really is another job's: rewrite the job id in the header.
            edit(&copy.join(DATA_NAME), |x| {
                x[64..64 + 5].copy_from_slice(b"other");
                x[60] = 5;
            });
            std::fs::copy(copy.join(DATA_NAME), data(b, 1, NEWEST)).unwrap();
            std::fs::copy(copy.join("rank-000001.meta.json"), record(b, 1, NEWEST)).unwrap();
            std::fs::remove_dir_all(b.join("node-1/other")).unwrap();
        },
    ));
    v.push(case(
        "checkpoint 3's directory is a link to checkpoint 2's",
        Restore(2),
        Damage("symbolic link"),
        |b| {
            std::fs::remove_dir_all(ckpt_dir(b, 1, NEWEST)).unwrap();
            std::os::unix::fs::symlink(ckpt_dir(b, 1, 2), ckpt_dir(b, 1, NEWEST)).unwrap();
        },
    ));
    v.push(case(
        "checkpoint 3's directory removed on node 1",
        Restore(2),
        Damage("was committed"),
        |b| std::fs::remove_dir_all(ckpt_dir(b, 1, NEWEST)).unwrap(),
    ));
    v.push(case(
        "checkpoint 3's directory writable by all",
        Restore(2),
        Damage("writable by other users"),
        |b| {
            std::fs::set_permissions(
                ckpt_dir(b, 1, NEWEST),
                std::fs::Permissions::from_mode(0o777),
            )
            .unwrap()
        },
    ));
    if nix::unistd::geteuid().is_root() {
        v.push(case(
            "data owned by another user",
            Restore(2),
            Damage("owned by uid 4242"),
            |b| std::os::unix::fs::chown(data(b, 1, NEWEST), Some(4242), None).unwrap(),
        ));
        v.push(case(
            "record owned by another user",
            Restore(2),
            Damage("owned by uid 4242"),
            |b| std::os::unix::fs::chown(record(b, 1, NEWEST), Some(4242), None).unwrap(),
        ));
    }
    // The pointer, in every form: recovery never depends on it.
    v.push(case(
        "LATEST removed on node 0",
        Restore(3),
        Warning("missing"),
        |b| std::fs::remove_file(latest(b, 0)).unwrap(),
    ));
    v.push(case(
        "LATEST removed on both nodes",
        Restore(3),
        Warning("missing"),
        |b| {
            std::fs::remove_file(latest(b, 0)).unwrap();
            std::fs::remove_file(latest(b, 1)).unwrap();
        },
    ));
    for (id, says) in [
        (2u64, Warning("names checkpoint 2, but 3 is complete")),
        (0, Warning("disagree")),
        (99, Damage("names checkpoint 99, which is missing")),
        (1_000_000_000_000, Damage("which is missing")),
    ] {
        v.push(case(
            format!("LATEST names {id}"),
            Restore(3),
            says,
            move |b| {
                let text = std::fs::read_to_string(latest(b, 0)).unwrap();
                std::fs::write(
                    latest(b, 0),
                    text.replace(&format!(":{NEWEST}}}"), &format!(":{id}}}")),
                )
                .unwrap();
            },
        ));
    }
    v.push(case(
        "LATEST names another job",
        Restore(3),
        Damage("names job `intruder`"),
        |b| std::fs::write(latest(b, 0), br#"{"job_id":"intruder","checkpoint_id":3}"#).unwrap(),
    ));
    v.push(case(
        "LATEST is garbage",
        Restore(3),
        Damage("unreadable"),
        |b| std::fs::write(latest(b, 0), b"\x00\x01garbage").unwrap(),
    ));
    v.push(case(
        "LATEST is a link",
        Restore(3),
        Damage("symbolic link"),
        |b| {
            std::fs::remove_file(latest(b, 0)).unwrap();
            std::os::unix::fs::symlink(latest(b, 1), latest(b, 0)).unwrap();
        },
    ));
    v.push(case(
        "LATEST is a directory",
        Restore(3),
        Damage("LATEST"),
        |b| {
            std::fs::remove_file(latest(b, 0)).unwrap();
            std::fs::create_dir(latest(b, 0)).unwrap();
        },
    ));
    // Links where the store's own directories and files belong.
    v.push(case(
        "node directory is a link",
        Refuse("symbolic link"),
        Damage("was committed"),
        |b| {
            let real = b.with_extension("node-1");
            std::fs::rename(b.join("node-1"), &real).unwrap();
            std::os::unix::fs::symlink(&real, b.join("node-1")).unwrap();
        },
    ));
    v.push(case(
        "job directory is a link",
        Refuse("symbolic link"),
        Damage("was committed"),
        |b| {
            let real = b.with_extension("job");
            std::fs::rename(b.join(format!("node-1/{JOB}")), &real).unwrap();
            std::os::unix::fs::symlink(&real, b.join(format!("node-1/{JOB}"))).unwrap();
        },
    ));
    v.push(case(
        "rank lock is a link",
        Refuse("symbolic link"),
        Clean,
        |b| {
            let lock = b.join(format!("node-1/{JOB}/l1/.lock-rank-000001"));
            let _ = std::fs::remove_file(&lock);
            std::os::unix::fs::symlink(b.join("target"), lock).unwrap();
        },
    ));
    v.push(case(
        "a spare file is a link to a file of someone else",
        Restore(3),
        Clean,
        |b| {
            let spare = b.join(format!("node-1/{JOB}/l1/spare"));
            std::fs::create_dir_all(&spare).unwrap();
            std::fs::write(b.join("precious"), b"precious").unwrap();
            for e in std::fs::read_dir(&spare).unwrap().flatten() {
                std::fs::remove_file(e.path()).unwrap();
            }
            std::os::unix::fs::symlink(b.join("precious"), spare.join("rank-000001.0.fck"))
                .unwrap();
        },
    ));
    v
}

/// Checks `verify`'s verdict on `base`.
fn check_verify(base: &Path, says: Says, name: &str) {
    let tree = catalog::scan(base).unwrap();
    let report = catalog::verify(&tree);
    let text: Vec<String> = report
        .findings
        .iter()
        .map(|f| format!("{:?} {}: {}", f.severity, f.path.display(), f.message))
        .collect();
    let damage = report.count(Severity::Damage);
    match says {
        Says::Damage(needle) => assert!(
            report
                .findings
                .iter()
                .any(|f| f.severity == Severity::Damage
                    && (f.message.contains(needle)
                        || f.path.display().to_string().contains(needle))),
            "{name}: verify must report damage about {needle:?}: {text:#?}"
        ),
        Says::Warning(needle) => {
            assert_eq!(damage, 0, "{name}: no damage expected: {text:#?}");
            assert!(
                report
                    .findings
                    .iter()
                    .any(|f| f.severity == Severity::Warning && f.message.contains(needle)),
                "{name}: verify must warn about {needle:?}: {text:#?}"
            );
        }
        Says::Clean => assert_eq!(damage, 0, "{name}: no damage expected: {text:#?}"),
    }
}

fn sweep(zstd: bool) -> usize {
    let dir = scratch();
    let pristine = dir.path().join("pristine");
    write_job(&pristine, zstd);
    check_verify(&pristine, Says::Clean, "pristine");
    assert_eq!(
        recover(
            &{
                let copy = dir.path().join("check");
                common::copy_tree(&pristine, &copy);
                copy
            },
            zstd
        ),
        Ok(NEWEST)
    );
    let all = cases(&pristine);
    let n = all.len();
    for (i, c) in all.into_iter().enumerate() {
        let base = dir.path().join(format!("case-{i}"));
        common::copy_tree(&pristine, &base);
        (c.mutate)(&base);
        let name = format!("{} ({})", c.name, if zstd { "zstd" } else { "raw" });
        check_verify(&base, c.says, &name);
        let got = recover(&base, zstd);
        match c.want {
            Want::Restore(id) => assert_eq!(got, Ok(id), "{name}"),
            Want::Refuse(needle) => {
                let e = got.expect_err(&name);
                assert!(e.contains(needle), "{name}: {e}");
            }
        }
        if c.name.starts_with("a spare file is a link") {
            assert_eq!(
                std::fs::read(base.join("precious")).unwrap(),
                b"precious",
                "{name}"
            );
        }
        std::fs::remove_dir_all(&base).ok();
        std::fs::remove_dir_all(base.with_extension("node-1")).ok();
        std::fs::remove_dir_all(base.with_extension("job")).ok();
    }
    n
}

#[test]
fn every_field_of_every_file_kind_damaged_one_at_a_time() {
    let _g = serial();
    let started = std::time::Instant::now();
    let raw = sweep(false);
    let zstd = sweep(true);
    eprintln!(
        "{raw} damages of a raw job and {zstd} of a zstd job, each recovered and verified, in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}
