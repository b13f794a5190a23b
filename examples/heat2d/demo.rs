//! The README demo: heat2d on six virtual nodes plus two spares with all
//! four levels, run once without a failure and then once per level with a
//! failure only that level (and the ones above it) can repair. Each run
//! writes its metrics to its own file; at the end the demo prints the five
//! recovery metrics of each failure, the level each recovery used, and the
//! final checksums against the fault-free reference.

use crate::{launch_once, Args};
use anyhow::{bail, Context as _};
use frame::config::Config;
use frame_cli::report::{median, Report};
use frame_runtime::LaunchArgs;
use std::path::Path;
use std::time::Duration;

/// One run of the demo.
struct Case {
    /// What fails, for people.
    title: &'static str,
    /// The injection, as `frame run --inject` takes it.
    inject: Option<&'static str>,
    /// The level the recovery must use.
    level: Option<u8>,
}

/// Six nodes of one rank each, partners 0→1→…→5→0, Reed-Solomon groups
/// {0,1,2} and {3,4,5} with one parity share each.
const NODES: usize = 6;
const SPARES: usize = 2;
const GROUP: u32 = 3;

const CASES: [Case; 5] = [
    Case {
        title: "no failure (reference)",
        inject: None,
        level: None,
    },
    Case {
        title: "rank 2 killed",
        inject: Some("rank:2@iter=1234"),
        level: Some(1),
    },
    Case {
        title: "node 1 killed",
        inject: Some("node:1@iter=1234"),
        level: Some(2),
    },
    Case {
        title: "node 2 and its partner 3 killed",
        inject: Some("node:2,3@iter=1234"),
        level: Some(3),
    },
    Case {
        title: "nodes 0 and 1 of one group killed",
        inject: Some("node:0,1@iter=1234"),
        level: Some(4),
    },
];

/// What one run left behind.
struct Outcome {
    case: &'static Case,
    checksum: String,
    report: Report,
}

/// Runs the demo in a temporary directory with `config` (the shipped
/// four-level configuration) adapted to the demo's nodes.
pub fn run(args: &Args, template: &LaunchArgs, levels: &str) -> anyhow::Result<()> {
    let dir = tempfile::Builder::new().prefix("heat2d-demo-").tempdir()?;
    // The nodes' local directories go in a RAM disk of their own (removed
    // with everything else at the end), not in the user's default one.
    let local = tempfile::Builder::new()
        .prefix("heat2d-demo-")
        .tempdir_in("/dev/shm")
        .or_else(|_| {
            tempfile::Builder::new()
                .prefix("heat2d-demo-local-")
                .tempdir()
        })?;
    let mut cfg = Config::from_toml_str(levels, "config/levels.toml")?;
    cfg.storage.local_dir = local.path().to_path_buf();
    cfg.storage.global_dir = dir.path().join("global");
    cfg.l3.group_size = GROUP;
    eprintln!(
        "heat2d demo: {NODES} nodes of one rank + {SPARES} spares; L2 partner = next node, \
         L3 groups of {GROUP} nodes with {} parity, L4 in {}",
        cfg.l3.parity,
        cfg.storage.global_dir.display()
    );
    let mut outcomes = Vec::new();
    for (i, case) in CASES.iter().enumerate() {
        eprintln!(
            "\nheat2d demo: run {} of {}: {}",
            i + 1,
            CASES.len(),
            case.title
        );
        let metrics = dir.path().join(format!("metrics-{i}.jsonl"));
        let checksum = dir.path().join(format!("checksum-{i}"));
        cfg.metrics.file = metrics.clone();
        let config = dir.path().join(format!("config-{i}.toml"));
        std::fs::write(&config, toml::to_string(&cfg)?)?;
        let mut launch = template.clone();
        launch.config = Some(config);
        launch.nodes = Some(NODES);
        launch.ranks_per_node = Some(1);
        launch.spare_nodes = SPARES;
        launch.metrics = Some(metrics.clone());
        launch.progress = Duration::from_millis(250);
        launch.inject = case
            .inject
            .map(|s| s.parse().map_err(anyhow::Error::msg))
            .transpose()?
            .into_iter()
            .collect();
        let rank_args = vec![
            "--steps".into(),
            args.size.steps.to_string().into(),
            "--checksum-file".into(),
            checksum.clone().into_os_string(),
        ];
        let run_cfg = Config::load(launch.config.as_deref())?;
        launch_once(args, &run_cfg, launch, rank_args)?;
        outcomes.push(Outcome {
            case,
            checksum: read(&checksum).with_context(|| format!("run `{}`", case.title))?,
            report: Report::read(&[metrics])?,
        });
    }
    summarize(&outcomes)
}

fn read(path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("no checksum in {}", path.display()))
}

fn ms(v: Option<f64>) -> String {
    v.map_or("-".into(), |x| format!("{x:.2}"))
}

/// Prints the metrics table and the checksums; fails if a recovery used
/// another level than its case expects or a checksum differs.
fn summarize(outcomes: &[Outcome]) -> anyhow::Result<()> {
    let mut wrong = Vec::new();
    println!();
    println!(
        "{:<34} {:>5} {:>6} {:>9} {:>22} {:>9} {:>11} {:>9}",
        "", "", "", "ckpt", "transformation", "runtime", "application", "full"
    );
    println!(
        "{:<34} {:>5} {:>6} {:>9} {:>22} {:>9} {:>11} {:>9}",
        "failure",
        "level",
        "rounds",
        "overhead",
        "L2 / L3 / L4",
        "recovery",
        "recovery",
        "recovery"
    );
    for o in outcomes {
        let r = &o.report;
        let transform = r
            .transform_ms
            .iter()
            .map(|t| ms(median(t)))
            .collect::<Vec<_>>()
            .join(" / ");
        let failure = r.failures.first();
        let (level, rounds) = failure.map_or(("-".into(), "-".into()), |f| {
            (format!("L{}", f.record.level), f.record.rounds.to_string())
        });
        println!(
            "{:<34} {:>5} {:>6} {:>9} {:>22} {:>9} {:>11} {:>9}",
            o.case.title,
            level,
            rounds,
            ms(median(&r.checkpoint_ms)),
            transform,
            ms(failure.and_then(|f| f.runtime_ms)),
            ms(failure.map(|f| f.record.application_recovery_ms)),
            ms(failure.map(|f| f.full_ms())),
        );
        let used = failure.map(|f| f.record.level);
        if used != o.case.level {
            wrong.push(format!(
                "`{}` recovered from {}, expected {}",
                o.case.title,
                used.map_or("nothing".into(), |l| format!("L{l}")),
                o.case
                    .level
                    .map_or("no recovery".into(), |l| format!("L{l}"))
            ));
        }
    }
    println!(
        "(milliseconds: checkpoint overhead is the median time the slowest rank was blocked per \
         checkpoint; transformation the median promotion time per node; recovery times are the \
         slowest rank's)"
    );
    println!();
    let reference = &outcomes[0].checksum;
    for o in outcomes {
        println!("final checksum {:<34} {}", o.case.title, o.checksum);
    }
    if outcomes.iter().any(|o| o.checksum != *reference) {
        bail!("the checksums differ");
    }
    if !wrong.is_empty() {
        bail!("{}", wrong.join("; "));
    }
    println!("equal: yes, every recovered run computed exactly what the fault-free run did");
    Ok(())
}
