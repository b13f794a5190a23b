//! Kill at every file-system call: for every rank and every crash point of
//! a run (init, recovery, snapshots, retention, finalize), the process is
//! SIGKILLed right before that call, and the next run must restore the
//! newest checkpoint every rank had completed (or start fresh when there was
//! none, or when the job was already finalizing), bit for bit, never refuse,
//! and `verify` must find no damage in what the kill left.
//!
//! The job: 3 ranks on 2 nodes (ranks 0 and 1 share node 0), a checkpoint at
//! every step, `keep_last = 2`, files removed at finalize. Each rank prints
//! what it committed and restored; the driver builds its oracle from those
//! lines. The sweep runs twice: with the state in a protected region, and
//! in a file each rank writes for a file checkpoint and reads back after
//! recovery.

use crate::common;

use common::kill_sweep::assert_no_damage;
use common::{config, is_child, ranks, scratch, self_as_child, serial};
use frame::comm::Comm;
use frame::Checkpointer;
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const RANKS: usize = 3;
const PER_NODE: usize = 2;
const STEPS: u64 = 4;
const CHILD_DEADLINE: Duration = Duration::from_secs(60);
/// The whole sweep's patience (see `common::Patience`): a hang is a failure.
const SWEEP_DEADLINE: Duration = Duration::from_secs(900);

/// A rank's state at `step`: deterministic, different for every rank and step.
fn state(rank: usize, step: u64) -> Vec<u64> {
    (0..10_000u64)
        .map(|i| (i ^ (rank as u64) << 40 ^ step << 20).wrapping_mul(0x9e37_79b9_7f4a_7c15))
        .collect()
}

/// A file at the top of a job's directory saying that its ranks keep
/// their state in a file of a file checkpoint, not in a region.
const FILES_MARKER: &str = "FILES";

/// The values of a state file.
fn from_file(path: &Path) -> Vec<u64> {
    let bytes = std::fs::read(path).expect("read the file");
    bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect()
}

fn child_dir() -> PathBuf {
    PathBuf::from(std::env::var_os("FRAME_TEST_DIR").expect("FRAME_TEST_DIR"))
}

#[test]
#[ignore = "runs as the child process of the sweeps"]
fn sweep_child() {
    if !is_child() {
        return;
    }
    let dir = child_dir();
    let files = dir.join(FILES_MARKER).exists();
    ranks(RANKS, PER_NODE, move |comm| {
        let r = comm.rank();
        let mut cfg = config(&dir.join(format!("node-{}", comm.node())), "sweep");
        cfg.retention.keep_last = 2;
        let mut ckpt = match Checkpointer::init(&cfg, &comm) {
            Ok(c) => c,
            Err(e) => {
                println!("@rank {r} error {}", e.to_string().replace('\n', " | "));
                panic!("init failed");
            }
        };
        let step = ckpt.protect(0, 0u64);
        let data = ckpt.protect(1, Vec::<u64>::new());
        if ckpt.recovering() {
            let id = ckpt.recover().expect("recover");
            let s = step.get();
            let restored = match files {
                true => from_file(&ckpt.recovered_file("state").expect("the file")),
                false => data.read().clone(),
            };
            assert!(
                restored == state(r, s),
                "rank {r}: checkpoint {id} restored data that is not step {s}'s"
            );
            println!("@rank {r} restored {id} step {s}");
        } else {
            *data.write() = state(r, 0);
            println!("@rank {r} fresh");
        }
        while step.get() < STEPS {
            step.set(step.get() + 1);
            let committed = if files {
                ckpt.begin_checkpoint(frame::Level::L1).expect("begin");
                let path = ckpt.checkpoint_file("state").expect("path");
                let bytes: Vec<u8> = state(r, step.get())
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect();
                std::fs::write(path, bytes).expect("write the file");
                Some(ckpt.end_checkpoint().expect("end"))
            } else {
                *data.write() = state(r, step.get());
                ckpt.snapshot().expect("snapshot")
            };
            if let Some(id) = committed {
                println!("@rank {r} committed {id} step {}", step.get());
            }
        }
        println!("@rank {r} finalizing");
        ckpt.finalize().expect("finalize");
        println!("@rank {r} done");
    });
}

/// What the ranks of one run said.
#[derive(Debug, Default)]
struct Log {
    /// Per rank: ids committed or restored, with their step.
    held: Vec<BTreeMap<u64, u64>>,
    /// Per rank: what it restored at the start (`None`: fresh or not yet).
    restored: Vec<Option<(u64, u64)>>,
    fresh: usize,
    finalizing: bool,
    done: usize,
    errors: Vec<String>,
}

fn parse(out: &str) -> Log {
    let mut log = Log {
        held: vec![BTreeMap::new(); RANKS],
        restored: vec![None; RANKS],
        ..Log::default()
    };
    for line in out.lines() {
        // Lines start at "@rank": the test harness may print before them.
        let Some(at) = line.find("@rank ") else {
            continue;
        };
        let line = &line[at + 1..];
        let w: Vec<&str> = line.split_whitespace().collect();
        let Some(r) = w.get(1).and_then(|r| r.parse::<usize>().ok()) else {
            continue;
        };
        if w.first() != Some(&"rank") || r >= RANKS {
            continue;
        }
        let num = |i: usize| w.get(i).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
        match w.get(2) {
            Some(&"committed") => {
                log.held[r].insert(num(3), num(5));
            }
            Some(&"restored") => {
                log.held[r].insert(num(3), num(5));
                log.restored[r] = Some((num(3), num(5)));
            }
            Some(&"fresh") => log.fresh += 1,
            Some(&"finalizing") => log.finalizing = true,
            Some(&"done") => log.done += 1,
            Some(&"error") => log.errors.push(line.to_string()),
            _ => {}
        }
    }
    log
}

/// What must hold after a kill, from the runs so far.
#[derive(Clone, Debug, Default)]
struct Oracle {
    /// Newest id every rank is known to have completed (and not yet removed).
    complete: Option<u64>,
    /// Largest id any rank may have started writing.
    started: u64,
    /// The job reached finalize: a fresh start is fine too.
    finalizing: bool,
    /// Steps of ids, as logged.
    steps: BTreeMap<u64, u64>,
}

impl Oracle {
    fn after(&self, log: &Log) -> Oracle {
        let mut next = self.clone();
        if log.fresh > 0 {
            // The run started over (the decision is collective, so one rank
            // saying so is enough): what came before no longer binds it.
            next.complete = None;
            next.finalizing = false;
            next.steps.clear();
        }
        let common: Option<u64> = log.held[0]
            .keys()
            .filter(|id| log.held.iter().all(|h| h.contains_key(id)))
            .max()
            .copied();
        next.complete = next.complete.max(common);
        for h in &log.held {
            for (id, step) in h {
                next.steps.insert(*id, *step);
                next.started = next.started.max(id + 1);
            }
        }
        // A fresh start numbers past leftovers: anything may have been begun
        // one id past the largest seen.
        next.started = next.started.max(next.complete.unwrap_or(0) + 1);
        // So does a restore (newer leftovers stay): its first checkpoint
        // may be one past the largest id any rank may have begun.
        if log.restored.iter().any(Option::is_some) {
            next.started = next.started.max(self.started + 1);
        }
        next.finalizing |= log.finalizing;
        next
    }

    /// Checks the run that followed the kill; returns what it restored.
    fn check(&self, log: &Log, out: &str, what: &str) {
        assert!(
            log.errors.is_empty(),
            "{what}: the next run refused:\n{out}"
        );
        assert_eq!(
            log.done, RANKS,
            "{what}: the next run did not finish:\n{out}"
        );
        let restored: BTreeSet<Option<(u64, u64)>> = log.restored.iter().copied().collect();
        assert_eq!(restored.len(), 1, "{what}: ranks disagree:\n{out}");
        match log.restored[0] {
            None => {
                assert_eq!(log.fresh, RANKS, "{what}:\n{out}");
                assert!(
                    self.complete.is_none() || self.finalizing,
                    "{what}: started fresh although checkpoint {:?} was complete:\n{out}",
                    self.complete
                );
            }
            Some((id, step)) => {
                if let Some(c) = self.complete {
                    assert!(
                        id >= c,
                        "{what}: restored {id}, older than the complete {c}:\n{out}"
                    );
                }
                assert!(
                    id <= self.started,
                    "{what}: restored {id}, never written:\n{out}"
                );
                if let Some(s) = self.steps.get(&id) {
                    assert_eq!(*s, step, "{what}: checkpoint {id} is from step {s}:\n{out}");
                }
            }
        }
    }
}

/// Runs the child on `dir`, with `env`; returns its status and output.
fn run_child(dir: &Path, env: &[(&str, String)]) -> (std::process::ExitStatus, String) {
    let mut cmd = self_as_child(concat!(module_path!(), "::sweep_child"));
    cmd.env("FRAME_TEST_DIR", dir);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let (status, out, err) = common::run(&mut cmd, CHILD_DEADLINE);
    (status, out + &err)
}

/// Crash points each rank passes in a run from the state in `dir` (the
/// run goes to the end; `dir` is left as it was).
fn count_points(dir: &Path, scratch: &Path) -> Vec<u64> {
    let work = scratch.join("count");
    common::copy_tree(dir, &work);
    let trace = scratch.join("trace");
    let _ = std::fs::remove_file(&trace);
    let (status, out) = run_child(&work, &[("FRAME_CRASH_TRACE", trace.display().to_string())]);
    assert!(status.success(), "counting run failed:\n{out}");
    let counts = common::kill_sweep::crash_points(&trace, RANKS);
    std::fs::remove_dir_all(&work).ok();
    counts
}

/// Kills a run from `start` at each crash point of each rank; checks the
/// next run against `oracle`. Returns the states left by the kills whose
/// name is in `keep` (rank, point).
fn sweep(
    start: &Path,
    oracle: &Oracle,
    scratch: &Path,
    label: &str,
    keep: &[(usize, u64)],
    patience: &mut common::Patience,
) -> (usize, Vec<(PathBuf, Oracle)>) {
    let counts = count_points(start, scratch);
    assert!(counts.iter().all(|c| *c > 0), "no crash points: {counts:?}");
    // A rank's crash points must not depend on how its threads interleave
    // with the other ranks' (two ranks share a node's directories), or a
    // kill at the last one would find a run that never reaches it.
    let again = count_points(start, scratch);
    assert_eq!(
        counts, again,
        "{label}: two runs from the same state passed different numbers of crash points"
    );
    let mut kept = Vec::new();
    let mut kills = 0;
    for (rank, &count) in counts.iter().enumerate() {
        for n in 1..=count {
            if let Some(why) = patience.exhausted() {
                panic!("sweep {label}: {why}");
            }
            let what = format!("{label}: rank {rank} killed at crash point {n} of {count}");
            let work = scratch.join(format!("{label}-{rank}-{n}"));
            common::copy_tree(start, &work);
            let (status, out) = run_child(&work, &[("FRAME_CRASH_AT", format!("{rank}:{n}"))]);
            assert_eq!(
                status.signal(),
                Some(9),
                "{what}: not killed ({status}):\n{out}"
            );
            kills += 1;
            let killed = oracle.after(&parse(&out));
            let what = format!("{what} (oracle {killed:?}; the killed run said:\n{out})");
            assert_no_damage(&work, &what);
            if keep.contains(&(rank, n)) {
                let copy = scratch.join(format!("{label}-kept-{rank}-{n}"));
                common::copy_tree(&work, &copy);
                kept.push((copy, killed.clone()));
            }
            let (status, next_out) = run_child(&work, &[]);
            assert!(status.success(), "{what}: the next run failed:\n{next_out}");
            killed.check(&parse(&next_out), &next_out, &what);
            std::fs::remove_dir_all(&work).ok();
        }
    }
    (kills, kept)
}

#[test]
fn kill_at_every_file_system_call_of_a_run_and_of_its_recovery() {
    kill_everywhere(false);
}

/// The same with the state in a file of a file checkpoint: the calls that
/// create, save, remove and restore the program's files are swept too.
#[test]
fn kill_at_every_file_system_call_of_a_file_checkpoint_job_and_of_its_recovery() {
    kill_everywhere(true);
}

fn kill_everywhere(files: bool) {
    let _g = serial();
    let mut patience = common::Patience::new(SWEEP_DEADLINE);
    let dir = scratch();
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    if files {
        std::fs::write(empty.join(FILES_MARKER), b"").unwrap();
    }
    let started = Instant::now();
    // A few kills of the first run are kept, to sweep the recovery run that
    // follows them too: in the middle of checkpoint writes, of retention,
    // and of finalize.
    let counts = count_points(&empty, dir.path());
    let keep: Vec<(usize, u64)> = vec![
        (1, counts[1] / 2),
        (2, counts[2] * 3 / 4),
        (0, counts[0] - 2),
    ];
    let (first, kept) = sweep(
        &empty,
        &Oracle::default(),
        dir.path(),
        "run",
        &keep,
        &mut patience,
    );
    let mut second = 0;
    for (i, (state, oracle)) in kept.iter().enumerate() {
        let (n, _) = sweep(
            state,
            oracle,
            dir.path(),
            &format!("recovery{i}"),
            &[],
            &mut patience,
        );
        second += n;
    }
    eprintln!(
        "killed {first} runs at every crash point ({counts:?} per rank) and {second} recovery runs, in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}
