//! Files a level-1 checkpoint holds beside its data file: a checkpoint of
//! files that stays on its node keeps them as the program wrote them and
//! seals their CRCs in the background; one that goes to level 2 saves them
//! into its data file. Both restore bit for bit. Every damage to a held
//! file, its directory or its seal makes recovery fall back to the
//! previous checkpoint (bit for bit) and `verify` report it, naming the
//! directory; a missing seal or a leftover is restored, checked by length.

use crate::common;

use common::{config, node_dir, ranks, scratch, serial};
use frame::comm::Comm;
use frame::config::Interval;
use frame::internals::level::catalog::{self, Severity};
use frame::{Checkpointer, Config, Level};
use std::path::{Path, PathBuf};

const JOB: &str = "held";
const NEWEST: u64 = 3;
/// The file that spans chunks (64 KiB each: four for rank 0, five for
/// rank 1), and one that is empty.
const NAMES: [&str; 2] = ["state.bin", "empty.dat"];
const CHUNK: usize = 64 * 1024;

/// Rank `rank`'s file at `step`.
fn content(rank: usize, step: u64) -> Vec<u8> {
    (0..200_003 + 79_919 * rank)
        .map(|i| ((i as u64).wrapping_mul(0x9e37) ^ step << 3 ^ rank as u64) as u8)
        .collect()
}

/// Two nodes of one rank; level 2 every `l2` checkpoints (0: off).
fn cfg(base: &Path, node: u32, l2: u64) -> Config {
    let mut c = config(&node_dir(base, node), JOB);
    c.retention.keep_last = 3;
    c.l2.interval = Interval::Calls(l2);
    c
}

/// Checkpoints of files 1..=NEWEST (step k in checkpoint k), then a
/// "crash" (no finalize).
fn write_job(base: &Path, l2: u64) {
    let base = base.to_path_buf();
    ranks(2, 1, move |comm| {
        let r = comm.rank();
        let mut ckpt = Checkpointer::init(&cfg(&base, comm.node(), l2), &comm).unwrap();
        let step = ckpt.protect(0, 0u64);
        for k in 1..=NEWEST {
            step.set(k);
            ckpt.begin_checkpoint(Level::L1).unwrap();
            std::fs::write(ckpt.checkpoint_file(NAMES[0]).unwrap(), content(r, k)).unwrap();
            ckpt.checkpoint_file(NAMES[1]).unwrap();
            assert_eq!(ckpt.end_checkpoint().unwrap(), k);
        }
        if l2 > 0 {
            ckpt.wait_for_promotions().unwrap();
        }
    });
    frame::internals::manager::inline::stop(JOB);
}

/// What recovery restored on every rank (checked bit for bit), or the
/// error.
fn recover(base: &Path, l2: u64) -> Result<u64, String> {
    let base = base.to_path_buf();
    let out = ranks(2, 1, move |comm| {
        let r = comm.rank();
        let c = cfg(&base, comm.node(), l2);
        let mut ckpt = Checkpointer::init(&c, &comm).map_err(|e| e.to_string())?;
        let step = ckpt.protect(0, 0u64);
        if !ckpt.recovering() {
            return Err("started fresh".to_string());
        }
        let id = ckpt.recover().map_err(|e| e.to_string())?;
        assert_eq!(step.get(), id, "checkpoint {id} holds step {}", step.get());
        let file = std::fs::read(ckpt.recovered_file(NAMES[0]).unwrap()).unwrap();
        assert!(
            file == content(r, id),
            "rank {r}: checkpoint {id}'s file differs"
        );
        let empty = std::fs::read(ckpt.recovered_file(NAMES[1]).unwrap()).unwrap();
        assert!(empty.is_empty(), "rank {r}: the empty file is not");
        Ok(id)
    });
    frame::internals::manager::inline::stop(JOB);
    assert_eq!(out[0], out[1], "ranks disagree");
    out[0].clone()
}

fn l1_ckpt(base: &Path, node: u32, id: u64) -> PathBuf {
    node_dir(base, node).join(format!("{JOB}/l1/ckpt-{id:020}"))
}

/// Rank `node`'s held directory of checkpoint `id` (one rank per node).
fn held(base: &Path, node: u32, id: u64) -> PathBuf {
    l1_ckpt(base, node, id).join(format!("rank-{node:06}.files"))
}

/// The damage `verify` reports, as text.
fn damage(base: &Path) -> Vec<String> {
    let report = catalog::verify(&catalog::scan(base).unwrap());
    report
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Damage)
        .map(|f| format!("{}: {}", f.path.display(), f.message))
        .collect()
}

#[test]
fn a_checkpoint_that_stays_on_its_node_holds_its_files_and_one_that_leaves_saves_them() {
    let _g = serial();
    let dir = scratch();
    let pristine = dir.path().join("pristine");
    // Level 2 every second checkpoint: 1 and 3 stay, 2 goes.
    write_job(&pristine, 2);
    for node in 0..2u32 {
        for (id, stays) in [(1, true), (2, false), (3, true)] {
            let held = held(&pristine, node, id);
            assert_eq!(held.join(NAMES[0]).is_file(), stays, "{}", held.display());
            assert_eq!(held.join(".seal").is_file(), stays, "{}", held.display());
            let l2 = node_dir(&pristine, node).join(format!("{JOB}/l2/ckpt-{id:020}"));
            assert_eq!(l2.is_dir(), !stays, "{}", l2.display());
        }
        // The program's directory is empty: its files moved or went.
        let files = node_dir(&pristine, node).join(format!("{JOB}/l1/files/rank-{node:06}"));
        assert!(
            common::files_under(&files).is_empty(),
            "{}",
            files.display()
        );
    }
    let d = damage(&pristine);
    assert!(d.is_empty(), "verify: {d:#?}");
    tools_see_and_remove_held_files(&pristine, dir.path());
    // The newest, held, restores from level 1.
    let copy = dir.path().join("whole");
    common::copy_tree(&pristine, &copy);
    assert_eq!(recover(&copy, 2), Ok(3));
    // With node 1 lost, the newest that left the node restores from its
    // partner's copy.
    let copy = dir.path().join("lost");
    common::copy_tree(&pristine, &copy);
    std::fs::remove_dir_all(node_dir(&copy, 1)).unwrap();
    assert_eq!(recover(&copy, 2), Ok(2));
}

/// `frame ls` counts held files in a checkpoint's size, `frame drop`
/// removes them with their checkpoint, and `frame clean` removes the rest
/// (on a copy of `pristine` under `scratch`).
fn tools_see_and_remove_held_files(pristine: &Path, scratch: &Path) {
    let base = scratch.join("tools");
    common::copy_tree(pristine, &base);
    let tree = catalog::scan(&base).unwrap();
    let listed = catalog::list(&tree.levels);
    let size = |id: u64| listed.iter().find(|l| l.id == id).unwrap().bytes;
    let files: u64 = (0..2).map(|r| content(r, 1).len() as u64).sum();
    // Held (1, 3) and saved (2) files count alike.
    for id in 1..=NEWEST {
        assert!(size(id) > files, "checkpoint {id}: {} bytes", size(id));
    }
    let levels = catalog::of_job(&tree.levels, Some(JOB));
    catalog::drop_checkpoint(&levels, NEWEST).unwrap();
    for node in 0..2 {
        assert!(!l1_ckpt(&base, node, NEWEST).exists(), "node {node}");
        assert!(held(&base, node, 1).is_dir(), "node {node}");
    }
    let tree = catalog::scan(&base).unwrap();
    let removed = catalog::clean(&catalog::of_job(&tree.levels, Some(JOB))).unwrap();
    assert!(removed.iter().all(|r| r.kept.is_empty()), "{removed:#?}");
    for node in 0..2 {
        let left = common::files_under(&node_dir(&base, node));
        assert!(left.is_empty(), "node {node}: {left:#?}");
    }
}

type Mutation = Box<dyn Fn(&Path)>;

/// A damage to node 1's held files of the newest checkpoint, and whether
/// recovery still restores that checkpoint.
struct Case {
    name: String,
    newest_stays: bool,
    mutate: Mutation,
}

fn case(name: impl Into<String>, newest_stays: bool, mutate: impl Fn(&Path) + 'static) -> Case {
    Case {
        name: name.into(),
        newest_stays,
        mutate: Box::new(mutate),
    }
}

fn edit(path: &Path, f: impl FnOnce(&mut Vec<u8>)) {
    let mut bytes = std::fs::read(path).unwrap();
    f(&mut bytes);
    std::fs::write(path, bytes).unwrap();
}

/// A change to a seal's JSON.
type SealEdit = fn(&mut serde_json::Value);

fn edit_seal(base: &Path, f: impl FnOnce(&mut serde_json::Value)) {
    let path = held(base, 1, NEWEST).join(".seal");
    let mut seal: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    f(&mut seal);
    std::fs::write(path, serde_json::to_vec(&seal).unwrap()).unwrap();
}

fn replace_with_link(path: &Path) {
    let keep = path.with_extension("kept");
    std::fs::rename(path, &keep).unwrap();
    std::os::unix::fs::symlink(&keep, path).unwrap();
}

fn cases() -> Vec<Case> {
    let state = |b: &Path| held(b, 1, NEWEST).join(NAMES[0]);
    let mut all = Vec::new();
    let chunks = content(1, NEWEST).len().div_ceil(CHUNK);
    for k in 0..chunks {
        all.push(case(
            format!("a byte of chunk {k} of a held file"),
            false,
            move |b| edit(&state(b), |v| v[k * CHUNK + 17] ^= 0x40),
        ));
    }
    all.push(case("a held file one byte shorter", false, move |b| {
        edit(&state(b), |v| {
            v.pop();
        })
    }));
    all.push(case("a held file one byte longer", false, move |b| {
        edit(&state(b), |v| v.push(0))
    }));
    all.push(case("a held file removed", false, move |b| {
        std::fs::remove_file(state(b)).unwrap()
    }));
    all.push(case("the empty held file removed", false, |b| {
        std::fs::remove_file(held(b, 1, NEWEST).join(NAMES[1])).unwrap()
    }));
    all.push(case("the empty held file written to", false, |b| {
        std::fs::write(held(b, 1, NEWEST).join(NAMES[1]), b"x").unwrap()
    }));
    all.push(case(
        "a held file is a link to its own bytes",
        false,
        move |b| replace_with_link(&state(b)),
    ));
    all.push(case("a held file is a FIFO", false, move |b| {
        std::fs::remove_file(state(b)).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            state(b),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
    }));
    all.push(case("the held directory removed", false, |b| {
        std::fs::remove_dir_all(held(b, 1, NEWEST)).unwrap()
    }));
    all.push(case(
        "the held directory is a link to its files",
        false,
        |b| replace_with_link(&held(b, 1, NEWEST)),
    ));
    all.push(case("the seal is a link to itself moved", false, |b| {
        replace_with_link(&held(b, 1, NEWEST).join(".seal"))
    }));
    all.push(case("the seal is not JSON", false, |b| {
        std::fs::write(held(b, 1, NEWEST).join(".seal"), b"{\"chunk\": 655").unwrap()
    }));
    all.push(case("the seal is empty", false, |b| {
        std::fs::write(held(b, 1, NEWEST).join(".seal"), b"").unwrap()
    }));
    all.push(case(
        "the seal is longer than its files' CRCs can be",
        false,
        |b| {
            edit(&held(b, 1, NEWEST).join(".seal"), |v| {
                v.extend(std::iter::repeat_n(b' ', 1 << 20))
            })
        },
    ));
    let seal_edits: Vec<(&str, SealEdit)> = vec![
        ("its chunk size below the smallest", |s| {
            s["chunk"] = 1.into()
        }),
        ("its chunk size doubled", |s| {
            s["chunk"] = (2 * CHUNK).into()
        }),
        ("its chunk size above the largest", |s| {
            s["chunk"] = (1u64 << 31).into()
        }),
        ("its chunk size a string", |s| s["chunk"] = "65536".into()),
        ("no files", |s| s["files"] = serde_json::json!([])),
        ("the files in another order", |s| {
            let f = s["files"].as_array_mut().unwrap();
            f.reverse();
        }),
        ("a file renamed", |s| {
            s["files"][0]["name"] = "other.bin".into()
        }),
        ("a file's length plus one", |s| {
            let n = s["files"][0]["len"].as_u64().unwrap();
            s["files"][0]["len"] = (n + 1).into();
        }),
        ("a CRC too few", |s| {
            s["files"][0]["crcs"].as_array_mut().unwrap().pop();
        }),
        ("a CRC too many", |s| {
            s["files"][0]["crcs"].as_array_mut().unwrap().push(0.into());
        }),
        ("a CRC for the empty file", |s| {
            s["files"][1]["crcs"] = serde_json::json!([0]);
        }),
        ("an unknown key", |s| s["extra"] = true.into()),
        ("an unknown key of a file", |s| {
            s["files"][0]["extra"] = true.into()
        }),
        ("a file's CRCs missing", |s| {
            s["files"][0].as_object_mut().unwrap().remove("crcs");
        }),
    ];
    for (what, f) in seal_edits {
        all.push(case(format!("the seal with {what}"), false, move |b| {
            edit_seal(b, f)
        }));
    }
    for k in 0..chunks {
        all.push(case(
            format!("the seal's CRC of chunk {k} changed"),
            false,
            move |b| {
                edit_seal(b, |s| {
                    let c = s["files"][0]["crcs"][k].as_u64().unwrap();
                    s["files"][0]["crcs"][k] = (c ^ 1).into();
                })
            },
        ));
    }
    // Restorable: checked by length, or untouched.
    all.push(case(
        "the seal removed (its rank stopped while sealing)",
        true,
        |b| std::fs::remove_file(held(b, 1, NEWEST).join(".seal")).unwrap(),
    ));
    all.push(case("a seal temporary left beside the seal", true, |b| {
        std::fs::write(held(b, 1, NEWEST).join("..seal.tmp-1"), b"{").unwrap()
    }));
    all.push(case("a file the table does not name", true, |b| {
        std::fs::write(held(b, 1, NEWEST).join("stray.bin"), b"stray").unwrap()
    }));
    all
}

#[test]
fn every_damage_to_a_held_file_or_its_seal_falls_back_and_is_reported() {
    let _g = serial();
    let dir = scratch();
    let pristine = dir.path().join("pristine");
    write_job(&pristine, 0);
    let d = damage(&pristine);
    assert!(d.is_empty(), "verify: {d:#?}");
    let all = cases();
    let n = all.len();
    for (i, c) in all.into_iter().enumerate() {
        let base = dir.path().join(format!("case-{i}"));
        common::copy_tree(&pristine, &base);
        (c.mutate)(&base);
        let d = damage(&base);
        let got = recover(&base, 0);
        if c.newest_stays {
            assert!(d.is_empty(), "{}: no damage expected: {d:#?}", c.name);
            assert_eq!(got, Ok(NEWEST), "{}", c.name);
        } else {
            assert!(
                d.iter().any(|t| t.contains("rank-000001.files")),
                "{}: verify must report the held directory: {d:#?}",
                c.name
            );
            assert_eq!(got, Ok(NEWEST - 1), "{}", c.name);
        }
        std::fs::remove_dir_all(&base).ok();
    }
    eprintln!("{n} damages of held files and seals, each verified and recovered");
}
