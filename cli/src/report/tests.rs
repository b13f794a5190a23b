//! Reports from metrics lines as the three writers produce them.

use super::*;

const LINES: &str = r#"{"event":"checkpoint","job":"j","checkpoint":1,"blocked_us_max":2000,"blocked_us_mean":1500.0,"raw_bytes":1,"stored_bytes":1,"promoted":[2]}
{"event":"promotion","job":"j","checkpoint":1,"level":2,"node":0,"ok":true,"micros":5000,"bytes_in":1,"bytes_out":1,"error":null}
{"failure":1,"mode":"online","kind":"node","epoch":2,"failed_ranks":[1],"failed_nodes":[1],"detected_ns":1,"reinit_sent_ns":2,"replacements_started_ns":3,"barrier_ns":4,"runtime_recovery_ms":7.5}
{"event":"recovery","job":"j","epoch":2,"failed_nodes":[1],"failed_ranks":[1],"strategy":"frame","level":2,"checkpoint":1,"rounds":1,"identify_ms":0.5,"fetch_ms":3.0,"load_ms":1.0,"application_recovery_ms":4.5}
not json
"#;

#[test]
fn a_runtime_record_and_a_recovery_line_make_one_failure() {
    let mut r = Report::default();
    r.add(Path::new("a.jsonl"), LINES);
    assert_eq!(r.failures.len(), 1);
    let f = &r.failures[0];
    assert_eq!(
        (f.record.level, f.record.rounds, f.mode.as_str()),
        (2, 1, "online")
    );
    assert_eq!(f.runtime_ms, Some(7.5));
    assert!((f.full_ms() - 12.0).abs() < 1e-9);
    assert_eq!(r.checkpoint_ms, vec![2.0]);
    assert_eq!(r.transform_ms[0], vec![5.0]);
    assert_eq!(r.skipped, 1);
    let table = r.table();
    assert!(table.contains("L2") && table.contains("12.00"), "{table}");
}

/// With both timelines (runtimes and libraries that record them), each
/// phase ends where the next begins, counted from the detection.
#[test]
fn a_recovery_with_both_timelines_shows_its_phases() {
    let ms = 1_000_000u64;
    let runtime = format!(
        r#"{{"failure":1,"mode":"online","kind":"rank","epoch":2,"failed_ranks":[3],"failed_nodes":[],"detected_ns":{},"reinit_sent_ns":{},"replacements_started_ns":{},"barrier_ns":{},"runtime_recovery_ms":9.0,"first_ready_ns":{},"last_ready_ns":{},"root_cpu_ms":1.25,"root_messages":40}}"#,
        100 * ms,
        101 * ms,
        103 * ms,
        109 * ms,
        104 * ms,
        108 * ms
    );
    let recovery = format!(
        r#"{{"event":"recovery","job":"j","epoch":2,"failed_nodes":[],"failed_ranks":[3],"strategy":"frame","level":1,"checkpoint":4,"rounds":1,"identify_ms":0.5,"fetch_ms":0.0,"load_ms":1.5,"application_recovery_ms":2.0,"released_ns":{},"reentry_ms":3.0,"resumed_ns":{},"ranks_cpu_ms":77.5}}"#,
        111 * ms,
        116 * ms
    );
    let mut r = Report::default();
    r.add(Path::new("p.jsonl"), &format!("{runtime}\n{recovery}\n"));
    let table = r.table();
    let row = table
        .lines()
        .skip_while(|l| !l.starts_with("recovery phases"))
        .nth(2)
        .unwrap_or_else(|| panic!("no phases row: {table}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    // decide 1, unwind 7, release 1, deliver 2, reentry 3, identify 0.5,
    // fetch 0, load 1.5, total 16 | root CPU, ranks CPU, root messages.
    assert_eq!(
        cells,
        [
            "1", "2", "1.00", "7.00", "1.00", "2.00", "3.00", "0.50", "0.00", "1.50", "16.00", "|",
            "1.25", "77.50", "40"
        ],
        "{table}"
    );
    // Records without timelines make no phases table.
    let mut old = Report::default();
    old.add(Path::new("a.jsonl"), LINES);
    assert!(!old.table().contains("recovery phases"));
}

#[test]
fn a_recovery_without_its_runtime_record_counts_its_application_time() {
    let mut r = Report::default();
    let line = LINES
        .lines()
        .nth(3)
        .unwrap()
        .replace("\"epoch\":2", "\"epoch\":9");
    r.add(Path::new("b.jsonl"), &line);
    assert_eq!(r.failures[0].mode, "none");
    assert!((r.failures[0].full_ms() - 4.5).abs() < 1e-9);
}

#[test]
fn the_plot_holds_a_bar_per_series_and_level() {
    let mut r = Report::default();
    for (strategy, level, app) in [
        ("frame", 2, 4.5),
        ("iterative", 2, 9.0),
        ("iterative", 4, 30.0),
    ] {
        let line = LINES
            .lines()
            .nth(3)
            .unwrap()
            .replace(
                "\"strategy\":\"frame\"",
                &format!("\"strategy\":\"{strategy}\""),
            )
            .replace("\"level\":2", &format!("\"level\":{level}"))
            .replace(
                "\"application_recovery_ms\":4.5",
                &format!("\"application_recovery_ms\":{app}"),
            );
        r.add(Path::new("c.jsonl"), &line);
    }
    let s = plot::series(&r);
    assert_eq!(s["frame, none"], [None, Some(4.5), None, None]);
    assert_eq!(s["iterative, none"], [None, Some(9.0), None, Some(30.0)]);
    let doc = svg(&r).unwrap();
    assert!(doc.starts_with("<svg"), "{doc}");
    for text in ["frame, none", "iterative, none", "L2 failure", "L4 failure"] {
        assert!(doc.contains(text), "no {text:?} in the plot");
    }
    // One filled rectangle per bar (three) plus the legend's two swatches.
    let bars = doc.matches("<rect").count();
    assert!(bars >= 5, "{bars} rectangles");
}

/// A logged recovery's runtime record meets its replacement's rejoin
/// record (same rank and epoch); a global restart made instead is listed
/// with its reason.
#[test]
fn a_logged_recovery_is_shown_with_its_replacements_figures() {
    let lines = r#"{"event":"runtime_recovery","failure":1,"mode":"logged","kind":"rank","epoch":1,"failed_ranks":[3],"failed_nodes":[],"detected_ns":1,"reinit_sent_ns":2,"replacements_started_ns":3,"barrier_ns":4,"runtime_recovery_ms":0.25}
{"event":"rejoin","job":"j","epoch":1,"rank":3,"checkpoint":5,"restore_ms":1.5,"recompute_ms":42.75,"caught_up_at":6}
{"event":"rejoin","job":"j","epoch":1,"rank":2,"checkpoint":5,"restore_ms":9.0,"recompute_ms":99.0,"caught_up_at":6}
{"event":"idle","failure":1,"rank":0,"wall_ms":1500.0,"cpu_ms":10.0}
{"event":"idle","failure":1,"rank":1,"wall_ms":1500.0,"cpu_ms":0.0}
{"event":"idle","failure":7,"rank":1,"wall_ms":9999.0,"cpu_ms":0.0}
{"event":"runtime_recovery","failure":2,"mode":"online","kind":"rank","epoch":2,"failed_ranks":[1],"failed_nodes":[],"detected_ns":1,"reinit_sent_ns":2,"replacements_started_ns":3,"barrier_ns":4,"runtime_recovery_ms":0.5,"fallback":"a second failure before the next checkpoint committed"}
"#;
    let mut r = Report::default();
    r.add(Path::new("c.jsonl"), lines);
    assert_eq!(r.logged.len(), 1);
    let ranks: Vec<u32> = r.logged[0].rejoins.iter().map(|j| j.rank).collect();
    assert_eq!(ranks, [3]);
    assert_eq!(r.fallbacks.len(), 1);
    let table = r.table();
    assert!(
        table.contains("42.75") && !table.contains("99.00"),
        "{table}"
    );
    assert!(
        table.contains("failure 2 restarted globally: a second failure"),
        "{table}"
    );
}

/// A logged recovery's helpers and replaying ranks (same failure number)
/// give its parts, the busiest part's CPU, the ranks that sent logs and
/// the largest log; another failure's records are not counted.
#[test]
fn a_logged_recovery_shows_its_team_and_the_logs_sent() {
    let lines = r#"{"event":"runtime_recovery","failure":1,"mode":"logged","kind":"rank","epoch":1,"failed_ranks":[3],"failed_nodes":[],"detected_ns":1,"reinit_sent_ns":2,"replacements_started_ns":3,"barrier_ns":4,"runtime_recovery_ms":0.25}
{"event":"rejoin","job":"j","epoch":1,"rank":3,"checkpoint":5,"restore_ms":1.5,"recompute_ms":42.75,"caught_up_at":6,"recompute_cpu_ms":20.5}
{"event":"help","failure":1,"rank":3,"part":1,"parts":3,"wall_ms":40.0,"cpu_ms":21.25}
{"event":"help","failure":1,"rank":3,"part":2,"parts":3,"wall_ms":40.0,"cpu_ms":19.0}
{"event":"help","failure":4,"rank":3,"part":1,"parts":3,"wall_ms":40.0,"cpu_ms":555.0}
{"event":"replay","failure":1,"rank":1,"to":3,"messages":12,"bytes":4096,"log_bytes":5120}
{"event":"replay","failure":1,"rank":2,"to":3,"messages":12,"bytes":4096,"log_bytes":6144}
{"event":"replay","failure":4,"rank":2,"to":3,"messages":1,"bytes":1,"log_bytes":99999}
"#;
    let mut r = Report::default();
    r.add(Path::new("t.jsonl"), lines);
    assert_eq!(r.logged.len(), 1);
    let l = &r.logged[0];
    assert_eq!(l.team_cpu_ms(), (3, Some(21.25)));
    assert_eq!(l.replays.len(), 2);
    let (table, cells) = row_with(&r, "42.75");
    // parts, CPU per part, sent logs, log KiB
    assert_eq!(cells[7..11], ["3", "21.25", "2", "6.0"], "{table}");
}

/// A node's logged recovery: both replacements' records, the slowest's
/// times, their helpers among the parts; the replacements' answers to
/// each other are not logs sent.
#[test]
fn a_nodes_logged_recovery_shows_both_replacements() {
    let lines = r#"{"event":"runtime_recovery","failure":1,"mode":"logged","kind":"node","epoch":1,"failed_ranks":[2,3],"failed_nodes":[1],"detected_ns":1,"reinit_sent_ns":2,"replacements_started_ns":3,"barrier_ns":4,"runtime_recovery_ms":0.25}
{"event":"rejoin","job":"j","epoch":1,"rank":3,"checkpoint":5,"restore_ms":2.5,"recompute_ms":40.5,"caught_up_at":6,"recompute_cpu_ms":20.5}
{"event":"rejoin","job":"j","epoch":1,"rank":2,"checkpoint":5,"restore_ms":1.5,"recompute_ms":42.75,"caught_up_at":6,"recompute_cpu_ms":19.5}
{"event":"help","failure":1,"rank":2,"part":1,"parts":2,"wall_ms":40.0,"cpu_ms":22.25}
{"event":"help","failure":1,"rank":3,"part":1,"parts":2,"wall_ms":40.0,"cpu_ms":18.0}
{"event":"replay","failure":1,"rank":1,"to":2,"messages":12,"bytes":4096,"log_bytes":5120}
{"event":"replay","failure":1,"rank":3,"to":2,"messages":1,"bytes":4096,"log_bytes":9216}
"#;
    let mut r = Report::default();
    r.add(Path::new("t.jsonl"), lines);
    assert_eq!(r.logged.len(), 1);
    let l = &r.logged[0];
    let ranks: Vec<u32> = l.rejoins.iter().map(|j| j.rank).collect();
    assert_eq!(ranks, [2, 3]);
    assert_eq!(l.team_cpu_ms(), (4, Some(22.25)));
    let (table, cells) = row_with(&r, "42.75");
    // ranks, then ckpt, restore, recompute (the slowest), parts, CPU per
    // part, sent logs, log KiB
    assert_eq!(cells[1], "2,3", "{table}");
    assert_eq!(
        cells[4..11],
        ["5", "2.50", "42.75", "4", "22.25", "1", "5.0"],
        "{table}"
    );
}

/// The report's table, and the cells of its row holding `needle`.
fn row_with(r: &Report, needle: &str) -> (String, Vec<String>) {
    let table = r.table();
    let row = table
        .lines()
        .find(|x| x.contains(needle))
        .unwrap_or_else(|| panic!("{table}"));
    let cells = row.split_whitespace().map(str::to_string).collect();
    (table, cells)
}

#[test]
fn a_cone_recovery_shows_its_roles_and_a_fallback_its_reason() {
    let rec = |rank: u32, role: &str, steps: u32, wall: f64| {
        format!(
            r#"{{"event":"cone","job":"j","epoch":2,"rank":{rank},"role":"{role}","steps":{steps},"checkpoint":1,"from":10,"target":12,"failed":[1],"wall_ms":{wall},"cpu_ms":0.5}}"#
        )
    };
    let lines = [
        rec(1, "restored", 2, 8.0),
        rec(0, "recompute", 1, 5.0),
        rec(2, "supply", 0, 3.0),
        rec(3, "idle", 0, 1000.0),
        r#"{"event":"cone","job":"j","epoch":3,"rank":0,"role":"global","steps":0,"checkpoint":2,"from":0,"target":0,"failed":[1],"fallback":"the cone covers all","wall_ms":0.0,"cpu_ms":0.0}"#.into(),
    ]
    .join("\n");
    let mut r = Report::default();
    r.add(Path::new("c.jsonl"), &lines);
    assert_eq!(r.cones.len(), 1);
    let c = &r.cones[0];
    assert_eq!(
        (
            c.count("restored"),
            c.count("recompute"),
            c.count("supply"),
            c.count("idle")
        ),
        (1, 1, 1, 1)
    );
    assert_eq!(c.recomputed(), 3);
    assert_eq!(c.recompute_ms(), Some((8.0, 0.5)));
    assert_eq!(c.idle_ms(), (1003.0, 1.0));
    assert_eq!(
        r.cone_fallbacks,
        vec![(3, "the cone covers all".to_string())]
    );
    let table = r.table();
    assert!(
        table.contains("cone recoveries") && table.contains("10-12"),
        "{table}"
    );
    assert!(
        table.contains("cone recovery in epoch 3 restarted globally: the cone covers all"),
        "{table}"
    );
}
