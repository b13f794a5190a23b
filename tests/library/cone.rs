//! Cone recovery with real processes: `frame run --recovery cone` on
//! heat2d (8 ranks in a 2 x 4 process grid, a checkpoint every 10 steps, a
//! reduction every step). A rank or a whole node is SIGKILLed mid-interval;
//! only the failed ranks restore their live grids, the ranks the paper's
//! rule puts in the failure's cone recompute from temporary copies, the
//! others keep their live grids; what the cone cannot recover restarts
//! globally and says why. Every run ends with the fault-free checksum, bit
//! for bit.

use crate::common;

use common::heat2d::Heat2d;
use common::{final_checksum, scratch, serial, Job};
use frame::internals::recovery::{grid, Cone, Role};
use std::collections::BTreeMap;
use std::path::Path;

const GRID: [&str; 8] = ["--nx", "64", "--ny", "64", "--steps", "60", "--every", "10"];
const SHAPE: [&str; 4] = ["--nodes", "4", "--ranks-per-node", "2"];

/// heat2d under `frame run` with `args`, heat2d's `extra` options and
/// environment `env`; the ranks write their metrics into the run's file.
fn run(dir: &Path, args: &[&str], extra: &[&str], env: &[(&str, Option<&str>)]) -> Job {
    let job = (Heat2d::new(GRID).args(extra).metrics_in(dir).vars(env))
        .frame_run(dir, &[&SHAPE[..], args].concat());
    assert!(job.status.success(), "{}", job.out);
    job
}

/// heat2d with `--recovery cone` and `args`, heat2d's `extra`: its
/// checksum must be `want`.
fn in_cone(dir: &Path, want: &str, args: &[&str], extra: &[&str]) -> Job {
    let args = [&["--recovery", "cone"][..], args].concat();
    let job = run(dir, &args, extra, &[]);
    assert_eq!(final_checksum(&job.out), want, "{}", job.out);
    job
}

/// [`in_cone`] with rank 1 dying after step `at`.
fn rank_1_dies(dir: &Path, want: &str, at: &str, args: &[&str]) -> Job {
    in_cone(dir, want, args, &["--die-at", at, "--die-rank", "1"])
}

/// The fault-free checksum.
fn reference(dir: &Path) -> String {
    final_checksum(&run(dir, &[], &[], &[]).out)
}

/// Each rank's role and steps in the cone recoveries of epoch `epoch`.
fn roles(job: &Job, epoch: u64) -> BTreeMap<u64, (String, u64)> {
    (job.metrics.iter())
        .filter(|m| m["event"] == "cone" && m["epoch"] == epoch && m["fallback"].is_null())
        .filter_map(|m| {
            let role = m["role"].as_str()?.to_string();
            Some((m["rank"].as_u64()?, (role, m["steps"].as_u64()?)))
        })
        .collect()
}

/// The steps from the checkpoint to where every rank resumed in the cone
/// recovery of `epoch`: the failed rank died after step `died`, and the
/// survivors resume there, or one step before when the interruption
/// caught one of them still in that step (the reduction every step keeps
/// them within one).
fn gap(job: &Job, epoch: u64, died: u64) -> u32 {
    let m = (job.metrics.iter())
        .find(|m| m["event"] == "cone" && m["epoch"] == epoch && m["fallback"].is_null())
        .unwrap_or_else(|| panic!("no cone record in epoch {epoch}:\n{}", job.out));
    let (from, target) = (m["from"].as_u64().unwrap(), m["target"].as_u64().unwrap());
    assert!(target == died || target + 1 == died, "{m}");
    u32::try_from(target - from).unwrap()
}

/// What the paper's rule says each of the 8 ranks does when `failed` are
/// lost `gap` steps after the checkpoint.
fn rule(failed: &[usize], gap: u32) -> BTreeMap<u64, (String, u64)> {
    let cone = Cone::new(&grid(2, 4), failed, gap).unwrap();
    (0..8)
        .map(|r| {
            let role = match cone.role(r) {
                Role::Recompute(n) if failed.contains(&r) => ("restored", n),
                Role::Recompute(n) => ("recompute", n),
                Role::Supply => ("supply", 0),
                Role::Idle => ("idle", 0),
            };
            (r as u64, (role.0.to_string(), u64::from(role.1)))
        })
        .collect()
}

/// The ranks that restored their live grids (in the cone or globally).
fn restored(out: &str) -> Vec<u64> {
    let mut ranks: Vec<u64> = out
        .lines()
        .filter_map(|l| l.strip_prefix("heat2d: rank "))
        .filter(|l| l.contains(" restored "))
        .filter_map(|l| l.split(' ').next()?.parse().ok())
        .collect();
    ranks.sort();
    ranks
}

/// Rank 1 dies after step 12 (checkpoint 1 holds step 10): it restores and
/// recomputes 2 steps; its neighbours 0, 2 and 5 recompute 1 from copies;
/// 3, 4 and 6 supply theirs; rank 7 keeps its live grid (or, when a
/// survivor had not finished step 12 when interrupted, the cone of 1
/// step). Nobody but rank 1 reloads its live grid.
#[test]
fn a_killed_rank_recovers_in_its_cone() {
    let _g = serial();
    let dir = scratch();
    let want = reference(dir.path());
    let job = rank_1_dies(dir.path(), &want, "12", &[]);
    assert_eq!(roles(&job, 2), rule(&[1], gap(&job, 2, 12)), "{}", job.out);
    assert_eq!(restored(&job.out), vec![1], "{}", job.out);
    assert!(!job.out.contains("every rank goes back"), "{}", job.out);
    let runtime: Vec<_> = (job.metrics.iter())
        .filter(|m| m["event"] == "runtime_recovery")
        .collect();
    assert_eq!(runtime.len(), 1, "{}", job.out);
    assert_eq!(runtime[0]["mode"], "cone");
    // The report shows it.
    let (status, text, err) = common::run(
        std::process::Command::new(common::frame_bin())
            .arg("report")
            .arg(dir.path().join("metrics.jsonl")),
        std::time::Duration::from_secs(60),
    );
    assert!(status.success(), "{err}");
    assert!(text.contains("cone recoveries"), "{text}");
}

/// Node 3 (ranks 6 and 7) dies with its storage after step 11, once the
/// managers promoted checkpoint 1 to level 2: both restart on the spare
/// node from their partner's copies and recompute 1 step; 2, 3 and 5
/// supply; 0, 1 and 4 keep their live grids.
#[test]
fn a_killed_node_recovers_in_its_cone_from_level_2() {
    let _g = serial();
    let dir = scratch();
    let env = [("FRAME_L2_INTERVAL", Some("1"))];
    let want = final_checksum(&run(dir.path(), &[], &[], &env).out);
    let job = run(
        dir.path(),
        &["--recovery", "cone", "--spare-nodes", "1"],
        &[
            "--die-at",
            "11",
            "--die-node",
            "3",
            "--die-after-promotions",
        ],
        &env,
    );
    assert_eq!(final_checksum(&job.out), want, "{}", job.out);
    assert_eq!(
        roles(&job, 2),
        rule(&[6, 7], gap(&job, 2, 11)),
        "{}",
        job.out
    );
    assert_eq!(restored(&job.out), vec![6, 7], "{}", job.out);
    let levels: Vec<u64> = (job.metrics.iter())
        .filter(|m| m["event"] == "recovery")
        .filter_map(|m| m["level"].as_u64())
        .collect();
    assert_eq!(levels, vec![2], "{}", job.out);
}

/// What a cone cannot recover restarts globally, says why on rank 0 and
/// in the metrics, and ends bit for bit: a cone over every rank (5 steps
/// lost: rank 1 reaches all within 3), and a failure before the first
/// checkpoint (the job starts over); a rank of the cone dying during the
/// recovery makes a second cone recovery with both ranks failed.
#[test]
fn what_the_cone_cannot_recover_restarts_globally() {
    let _g = serial();
    let dir = scratch();
    let want = reference(dir.path());
    let job = rank_1_dies(dir.path(), &want, "15", &[]);
    // 5 steps lost (or 4): rank 1 reaches every rank within 3.
    let why = "covers all 8 ranks: every rank would recompute";
    assert!(
        job.out
            .contains("every rank goes back: the cone of rank(s) [1] over ")
            && job.out.contains(why),
        "{}",
        job.out
    );
    let fallback: Vec<&str> = (job.metrics.iter())
        .filter(|m| m["event"] == "cone")
        .filter_map(|m| m["fallback"].as_str())
        .collect();
    assert_eq!(fallback.len(), 1, "{}", job.out);
    assert!(fallback[0].contains(why), "{fallback:?}");
    assert_eq!(
        restored(&job.out),
        (0..8).collect::<Vec<_>>(),
        "{}",
        job.out
    );

    let job = rank_1_dies(dir.path(), &want, "5", &[]);
    assert!(job.out.contains("starting at step 0"), "{}", job.out);

    let job = rank_1_dies(dir.path(), &want, "12", &["--inject", "rank:2@reinit=1"]);
    assert_eq!(
        roles(&job, 3),
        rule(&[1, 2], gap(&job, 3, 12)),
        "{}",
        job.out
    );
}
