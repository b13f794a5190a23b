//! Localised (logged) recovery with real processes: `frame run --recovery
//! logged` on heat2d, ranks SIGKILLed at many points of an interval, the
//! replacement alone going back to its checkpoint while the survivors wait
//! without rolling back, and every documented fallback to a global restart.
//! Each run ends with the fault-free checksum, bit for bit.

use crate::common;

use common::heat2d::Heat2d;
use common::{scratch, serial, Job};
use std::path::Path;

/// 4 ranks, 300 steps, a checkpoint every 25.
const GRID: [&str; 8] = [
    "--nx", "96", "--ny", "80", "--steps", "300", "--every", "25",
];

/// `--nodes 2 --ranks-per-node 2 --recovery logged` followed by `extra`.
fn logged<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    [
        "--nodes",
        "2",
        "--ranks-per-node",
        "2",
        "--recovery",
        "logged",
    ]
    .into_iter()
    .chain(extra.iter().copied())
    .collect()
}

fn checksum(job: &Job) -> String {
    job.out
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("final checksum: "))
        .unwrap_or_else(|| panic!("no checksum in:\n{}", job.out))
        .to_string()
}

/// heat2d under `frame run ARGS`; the ranks write their metrics into the
/// runtime's file.
fn heat(dir: &Path, args: &[&str], grid: &[&str]) -> Job {
    let began = std::time::Instant::now();
    let job = Heat2d::new(grid).metrics_in(dir).frame_run(dir, args);
    eprintln!("{args:?}: {:.2} s", began.elapsed().as_secs_f64());
    assert!(job.status.success(), "{}", job.out);
    job
}

/// The ranks that went back to a checkpoint, in the order they said so.
fn restored(job: &Job) -> Vec<u64> {
    job.out
        .lines()
        .filter_map(|l| l.strip_prefix("heat2d: rank "))
        .filter(|l| l.contains(" restored checkpoint "))
        .filter_map(|l| l.split(' ').next()?.parse().ok())
        .collect()
}

/// The recovery records' modes and fallback reasons.
fn modes(job: &Job) -> Vec<(String, Option<String>)> {
    job.metrics
        .iter()
        .filter(|m| m["event"] == "runtime_recovery")
        .map(|m| {
            (
                m["mode"].as_str().unwrap_or("").to_string(),
                m["fallback"].as_str().map(str::to_string),
            )
        })
        .collect()
}

/// The fallback reasons the recovery records give.
fn fallbacks(job: &Job) -> Vec<String> {
    modes(job).into_iter().filter_map(|(_, f)| f).collect()
}

/// The job ended with `want` after exactly one global restart instead of
/// a logged recovery, for a reason saying each of `why`.
fn assert_fell_back(job: &Job, want: &str, why: &[&str]) {
    assert_eq!(checksum(job), want, "{}", job.out);
    let fell_back = fallbacks(job);
    assert!(
        fell_back.len() == 1 && why.iter().all(|w| fell_back[0].contains(w)),
        "{fell_back:?}\n{}",
        job.out
    );
}

/// Every rank killed at an iteration inside the interval, at the
/// iteration right after a checkpoint and at the last one: only its
/// replacement restores (the survivors never roll back), in the same
/// epoch, and the result is the fault-free one.
#[test]
fn only_the_replacement_of_a_killed_rank_goes_back() {
    let _g = serial();
    let dir = scratch();
    let clean = heat(dir.path(), &logged(&[]), &GRID);
    let want = checksum(&clean);
    for (rank, iter) in [
        (0u64, 140u64),
        (1, 126),
        (2, 149),
        (3, 299),
        (1, 125),
        (2, 26),
    ] {
        let inject = format!("rank:{rank}@iter={iter}");
        let job = heat(dir.path(), &logged(&["--inject", &inject]), &GRID);
        assert_eq!(checksum(&job), want, "{inject}:\n{}", job.out);
        assert_eq!(restored(&job), [rank], "{inject}:\n{}", job.out);
        assert_eq!(modes(&job), [("logged".into(), None)], "{inject}");
        assert!(!job.out.contains("REINITED"), "{inject}:\n{}", job.out);
        assert!(
            job.out.contains("entered RESTARTED in epoch 1"),
            "{}",
            job.out
        );
        // The replacement's own record: what it restored, until when it
        // recomputed.
        let rejoin: Vec<_> = job
            .metrics
            .iter()
            .filter(|m| m["event"] == "rejoin")
            .collect();
        assert_eq!(rejoin.len(), 1, "{inject}: {:?}", job.metrics);
        let (restored, caught_up) = (iter / 25, iter / 25 + 1);
        assert_eq!(rejoin[0]["rank"], rank, "{inject}");
        assert_eq!(rejoin[0]["checkpoint"], restored, "{inject}");
        assert_eq!(rejoin[0]["caught_up_at"], caught_up, "{inject}");
        // The others idled until that checkpoint, their hooks called.
        let mut idle: Vec<u64> = job
            .metrics
            .iter()
            .filter(|m| m["event"] == "idle")
            .filter_map(|m| m["rank"].as_u64())
            .collect();
        idle.sort_unstable();
        let others: Vec<u64> = (0..4).filter(|r| *r != rank).collect();
        assert_eq!(idle, others, "{inject}: {:?}", job.metrics);
        // Each of them sent the replacement what it had lost, from its log.
        let replays = records(&job, "replay");
        let mut sent: Vec<u64> = replays.iter().filter_map(|r| r["rank"].as_u64()).collect();
        sent.sort_unstable();
        assert_eq!(sent, others, "{inject}: {replays:?}");
        for r in &replays {
            assert_eq!(r["to"], rank, "{inject}: {r}");
            assert!(
                r["log_bytes"].as_u64() >= r["bytes"].as_u64(),
                "{inject}: {r}"
            );
        }
        // Its neighbours sent it halos: messages and bytes.
        assert!(
            replays
                .iter()
                .filter(|r| r["bytes"].as_u64() > Some(0))
                .count()
                >= 2,
            "{inject}: {replays:?}"
        );
        for r in others {
            for what in ["waits for", "is done waiting for"] {
                let line = format!("heat2d: rank {r} {what} another rank's recovery");
                assert!(job.out.contains(&line), "{inject}: {line}\n{}", job.out);
            }
        }
    }
}

/// Kills at times that fall anywhere, commits of checkpoints included (a
/// checkpoint every 5 steps): each recovers bit for bit, in logged mode.
#[test]
fn kills_at_any_moment_of_the_commit_protocol_recover_bit_exactly() {
    let _g = serial();
    let dir = scratch();
    kills_at_times(
        dir.path(),
        &logged(&[]),
        &[(1, 40), (2, 95), (3, 150), (0, 205)],
    );
}

/// heat2d under `frame run BASE` with a checkpoint every 5 of 4000 steps,
/// each rank of `kills` killed at its time (ms) in a run of its own: the
/// fault-free checksum every time; a kill before the first checkpoint
/// restarts globally, any other is logged and only the killed rank goes
/// back.
fn kills_at_times(dir: &Path, base: &[&str], kills: &[(u64, u64)]) {
    let grid = [
        "--nx", "128", "--ny", "128", "--steps", "4000", "--every", "5",
    ];
    let want = checksum(&heat(dir, base, &grid));
    for (rank, ms) in kills {
        let inject = format!("rank:{rank}@{ms}ms");
        let args = [base, &["--inject", &inject]].concat();
        let job = heat(dir, &args, &grid);
        assert_eq!(checksum(&job), want, "{inject}:\n{}", job.out);
        match modes(&job).as_slice() {
            [(mode, None)] if mode == "logged" => {
                assert_eq!(restored(&job), [*rank], "{inject}:\n{}", job.out)
            }
            [(mode, Some(why))] if mode == "online" => {
                assert!(why.contains("no checkpoint committed yet"), "{why}")
            }
            other => panic!("{inject}: {other:?}\n{}", job.out),
        }
    }
}

/// What a logged recovery cannot handle restarts globally, says why in
/// the output and the metrics, and ends with the same checksum.
#[test]
fn what_a_logged_recovery_cannot_handle_restarts_globally() {
    let _g = serial();
    let dir = scratch();
    let want = checksum(&heat(dir.path(), &logged(&[]), &GRID));
    let cases: [(&[&str], &str); 4] = [
        // The log of the interval outgrows its bound: a survivor says so.
        (
            &["--log-limit", "4KiB", "--inject", "rank:1@iter=140"],
            "outgrew the log's limit of 4096 bytes",
        ),
        // Two failures in one interval.
        (
            &["--inject", "rank:1@iter=140", "--inject", "rank:2@iter=145"],
            "a second failure before the next checkpoint committed",
        ),
        // The recomputing replacement itself fails.
        (
            &["--inject", "rank:1@iter=140", "--inject", "rank:1@iter=146"],
            "a second failure before the next checkpoint committed",
        ),
        // Before the first checkpoint there is nothing to rejoin from.
        (
            &["--inject", "rank:2@iter=3"],
            "no checkpoint committed yet in this epoch",
        ),
    ];
    for (args, why) in cases {
        let job = heat(dir.path(), &logged(args), &GRID);
        assert_fell_back(&job, &want, &[why]);
        assert!(
            job.out.contains("frame: restarting globally: "),
            "{}",
            job.out
        );
        // After the global restart every rank went back (to the
        // beginning, before the first checkpoint).
        assert!(
            restored(&job).len() >= 4 || job.out.contains("REINITED (epoch 2); starting at step 0"),
            "{args:?}:\n{}",
            job.out
        );
    }
}

/// `[recovery] mode = "logged"` in the configuration selects the mode;
/// a replacement whose promotions are timed cannot rejoin alone and asks
/// for a global restart, naming the key (node failures: see
/// `localised_nodes.rs`).
#[test]
fn the_configuration_chooses_the_mode_and_levels_above_1_fall_back() {
    let _g = serial();
    let dir = scratch();
    let want = checksum(&heat(dir.path(), &logged(&[]), &GRID));
    let config = dir.path().join("logged.toml");
    std::fs::write(
        &config,
        "[recovery]\nmode = \"logged\"\nidle_governor = \"powersave\"\n",
    )
    .unwrap();
    let config = config.to_str().unwrap();
    let args = ["--nodes", "2", "--ranks-per-node", "2", "--config", config];
    let inject = [&args[..], &["--inject", "rank:3@iter=140"]].concat();
    let job = heat(dir.path(), &inject, &GRID);
    assert_eq!(checksum(&job), want);
    assert_eq!(modes(&job), [("logged".into(), None)], "{}", job.out);
    // Virtual nodes share the machine's CPUs: the governor is left alone,
    // and each node whose ranks all waited says so.
    let left = "recovery.idle_governor left alone: a virtual node shares";
    assert!(job.out.contains(left), "{}", job.out);

    let timed = dir.path().join("timed.toml");
    std::fs::write(
        &timed,
        "[recovery]\nmode = \"logged\"\n[l2]\ninterval = \"1h\"\n",
    )
    .unwrap();
    let timed = timed.to_str().unwrap();
    let args = [
        "--nodes",
        "2",
        "--ranks-per-node",
        "2",
        "--config",
        timed,
        "--inject",
        "rank:3@iter=140",
    ];
    let job = heat(dir.path(), &args, &GRID);
    assert_fell_back(&job, &want, &["rank 3 cannot rejoin", "l2.interval"]);

    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        "[recovery]\nmode = \"logged\"\nlog_limit = \"1 KiB\"\n",
    )
    .unwrap();
    let bad = bad.to_str().unwrap();
    let job = Heat2d::new(GRID).frame_run(
        dir.path(),
        &["--nodes", "2", "--ranks-per-node", "2", "--config", bad],
    );
    assert!(!job.status.success());
    assert!(job.out.contains("recovery.log_limit"), "{}", job.out);
    let job = Heat2d::new(GRID).frame_run(dir.path(), &logged(&["--idle-governor", "Power Save"]));
    assert!(!job.status.success());
    assert!(
        job.out.contains("--idle-governor \"Power Save\"") && job.out.contains("cpufreq"),
        "{}",
        job.out
    );
}

/// The records of one event.
fn records<'a>(job: &'a Job, event: &str) -> Vec<&'a serde_json::Value> {
    job.metrics.iter().filter(|m| m["event"] == event).collect()
}

/// With `--spares K` the replacement shares its steps up to its next
/// checkpoint with K - 1 helpers, each stepping one strip of its block:
/// the result is the fault-free one, only the replacement restored, and
/// each helper (parts 1 to K - 1, once each) has its record. A helper
/// that dies takes its team with it: a global restart, the same result.
/// Asking for helpers outside logged mode is an error naming the flag.
#[test]
fn helpers_share_a_replacements_recomputation() {
    let _g = serial();
    let dir = scratch();
    let want = checksum(&heat(dir.path(), &logged(&[]), &GRID));
    for (rank, iter, k) in [(1u64, 140u64, 2u32), (2, 126, 5), (0, 26, 3), (3, 299, 2)] {
        let (inject, spares) = (format!("rank:{rank}@iter={iter}"), k.to_string());
        let job = heat(
            dir.path(),
            &logged(&["--inject", &inject, "--spares", &spares]),
            &GRID,
        );
        let case = format!("{inject} --spares {k}");
        assert_eq!(checksum(&job), want, "{case}:\n{}", job.out);
        assert_eq!(restored(&job), [rank], "{case}:\n{}", job.out);
        assert_eq!(modes(&job), [("logged".into(), None)], "{case}");
        // The steps up to the next checkpoint (every 25), shared.
        let line = format!(
            "heat2d: rank {rank} shares 25 steps with {} helper(s)",
            k - 1
        );
        assert!(job.out.contains(&line), "{case}: {line}\n{}", job.out);
        let rejoin = records(&job, "rejoin");
        assert_eq!(rejoin.len(), 1, "{case}: {:?}", job.metrics);
        assert_eq!(rejoin[0]["caught_up_at"], iter / 25 + 1, "{case}");
        let help = records(&job, "help");
        let mut parts: Vec<u64> = help.iter().filter_map(|h| h["part"].as_u64()).collect();
        parts.sort_unstable();
        assert_eq!(parts, (1..k as u64).collect::<Vec<_>>(), "{case}: {help:?}");
        for h in &help {
            assert_eq!(h["rank"], rank, "{case}: {h}");
            assert_eq!(h["parts"], k, "{case}: {h}");
            let part = h["part"].as_u64().unwrap_or(0);
            let line = format!("heat2d: helper {part} of rank {rank} stepped rows ");
            assert!(job.out.contains(&line), "{case}: {line}\n{}", job.out);
        }
    }
    let dies = [&GRID[..], &["--helper-dies-after", "4"]].concat();
    let job = heat(
        dir.path(),
        &logged(&["--inject", "rank:2@iter=140", "--spares", "3"]),
        &dies,
    );
    assert_fell_back(
        &job,
        &want,
        &["a second failure before the next checkpoint"],
    );
    assert!(
        job.out.contains("heat2d: helper 1 of rank 2 dying"),
        "{}",
        job.out
    );

    let job = Heat2d::new(GRID).frame_run(
        dir.path(),
        &["--nodes", "2", "--ranks-per-node", "2", "--spares", "2"],
    );
    assert!(!job.status.success());
    assert!(
        job.out
            .contains("--spares 2: helpers share only a logged recovery"),
        "{}",
        job.out
    );
    let job = Heat2d::new(GRID).frame_run(dir.path(), &logged(&["--spares", "65"]));
    assert!(!job.status.success());
    assert!(job.out.contains("recovery.spares"), "{}", job.out);
}

/// A team loses a member at every step of its shared recomputation: the
/// first helper dies before its first step and after each of its 25
/// steps, and the replacement is killed again at each step after its
/// first failure: each restarts globally as the interval's second
/// failure. Killed again once the next checkpoint committed, it is a new
/// logged recovery. Every case ends with the fault-free checksum.
#[test]
fn a_team_member_lost_at_any_step_restarts_globally_bit_exactly() {
    let _g = serial();
    let dir = scratch();
    let want = checksum(&heat(dir.path(), &logged(&[]), &GRID));
    let second = "a second failure before the next checkpoint committed";
    // Rank 2 dies at step 140: its replacement shares steps 126 to 150.
    for after in 0..=25u64 {
        let steps = after.to_string();
        let grid = [&GRID[..], &["--helper-dies-after", &steps]].concat();
        let args = logged(&["--inject", "rank:2@iter=140", "--spares", "3"]);
        let job = heat(dir.path(), &args, &grid);
        assert_fell_back(&job, &want, &[second]);
        assert!(
            job.out.contains("heat2d: helper 1 of rank 2 dying"),
            "helper dies after {after}:\n{}",
            job.out
        );
    }
    // Its iterations 141 to 149 are shared; from 150 on, checkpoint 6
    // (step 150) committed: a new interval, a new logged recovery.
    for again in 141..=160u64 {
        let inject = format!("rank:2@iter={again}");
        let args = logged(&[
            "--inject",
            "rank:2@iter=140",
            "--inject",
            &inject,
            "--spares",
            "3",
        ]);
        let job = heat(dir.path(), &args, &GRID);
        if again < 150 {
            assert_fell_back(&job, &want, &[second]);
        } else {
            assert_eq!(checksum(&job), want, "{inject}:\n{}", job.out);
            let logged = ("logged".to_string(), None);
            assert_eq!(modes(&job), [logged.clone(), logged], "{inject}");
        }
    }
}

/// With levels 2 and 3 promoting every other checkpoint (level 3 in one
/// group of the two nodes) and level 4 every third, each rank killed
/// inside an interval (the node leaders 0 and 2 among them) is a logged
/// recovery: its replacement takes up the promotion bookkeeping saved
/// with its checkpoint, goes through the commit with the others' answers
/// (level 3's rounds included), and the job ends bit-exact with the three
/// levels still committing after it.
#[test]
fn with_levels_2_to_4_a_killed_rank_is_still_a_logged_recovery() {
    let _g = serial();
    let dir = scratch();
    let levels = dir.path().join("l2.toml");
    let global = dir.path().join("global");
    std::fs::write(
        &levels,
        format!(
            "[storage]\nglobal_dir = {:?}\n[recovery]\nmode = \"logged\"\n[l2]\ninterval = 2\n[l3]\ninterval = 2\ngroup_size = 2\n[l4]\ninterval = 3\n",
            global.display().to_string()
        ),
    )
    .unwrap();
    let levels = levels.to_str().unwrap();
    let base = ["--nodes", "2", "--ranks-per-node", "2", "--config", levels];
    let want = checksum(&heat(dir.path(), &base, &GRID));
    for (rank, iter) in [(0u64, 140u64), (1, 126), (2, 176), (3, 230)] {
        let inject = format!("rank:{rank}@iter={iter}");
        let args = [&base[..], &["--inject", &inject]].concat();
        let job = heat(dir.path(), &args, &GRID);
        assert_eq!(checksum(&job), want, "{inject}:\n{}", job.out);
        assert_eq!(restored(&job), [rank], "{inject}:\n{}", job.out);
        assert_eq!(
            modes(&job),
            [("logged".into(), None)],
            "{inject}:\n{}",
            job.out
        );
        // Level 2 committed checkpoints after the one restored, on both
        // nodes.
        let after: Vec<_> = records(&job, "promotion")
            .into_iter()
            .filter(|p| p["level"] == 2 && p["ok"] == true)
            .filter(|p| p["checkpoint"].as_u64() > Some(iter / 25 + 1))
            .collect();
        assert!(after.len() >= 2, "{inject}: {:?}", job.metrics);
        // And levels 3 (both nodes' parts) and 4.
        for (level, least) in [(3, 2), (4, 1)] {
            let n = records(&job, "promotion")
                .into_iter()
                .filter(|p| p["level"] == level && p["ok"] == true)
                .filter(|p| p["checkpoint"].as_u64() > Some(iter / 25 + 1))
                .count();
            assert!(n >= least, "{inject}: level {level}: {:?}", job.metrics);
        }
        assert!(!job.out.contains("twice"), "{inject}:\n{}", job.out);
    }
    // Kills at times that fall anywhere, commits and promotions included.
    kills_at_times(dir.path(), &base, &[(2, 60), (0, 115), (3, 170), (1, 225)]);
}
