//! Loading, overriding and validating configurations.
use super::*;
use crate::config::{Interval, Strategy};
use std::time::Duration;

const NO_ENV: [(&str, &str); 0] = [];

#[test]
fn defaults_are_valid() {
    Config::default().validate().unwrap();
    let cfg = Config::load_with_env(None, NO_ENV).unwrap();
    assert_eq!(cfg, Config::default());
    assert_eq!(cfg.source_of("job.id"), Source::Default);
}

#[test]
fn malformed_toml_names_file_and_line() {
    let err = Config::from_toml_str("[job]\nid = \"x\"\n[snapshot\n", "job.toml").unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, ConfigError::Syntax { line: 3, .. }), "{msg}");
    assert!(msg.starts_with("job.toml, line 3"), "{msg}");
}

#[test]
fn unknown_key_is_named() {
    let err = Config::from_toml_str("[retention]\nkeep_lst = 3\n", "a.toml").unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("retention.keep_lst"), "{msg}");
    assert!(msg.contains("a.toml"), "{msg}");
    let err = Config::from_toml_str("[colour]\nx = 1\n", "a.toml").unwrap_err();
    assert!(err.to_string().contains("colour"), "{err}");
}

#[test]
fn wrong_type_names_key_file_and_line() {
    let text = "[snapshot]\ncompression = \"zstd\"\ncompression_level = \"high\"\n";
    let err = Config::from_toml_str(text, "b.toml").unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.starts_with("b.toml, line 3: key `snapshot.compression_level`"),
        "{msg}"
    );
    let err = Config::from_toml_str("[snapshot]\ncompression = \"lz4\"\n", "b.toml").unwrap_err();
    assert!(err.to_string().contains("snapshot.compression"), "{err}");
}

#[test]
fn out_of_range_values_are_rejected_with_key() {
    for (text, key) in [
        ("[job]\nid = \"../etc\"\n", "job.id"),
        ("[job]\nid = \"\"\n", "job.id"),
        ("[snapshot]\ninterval = 0\n", "snapshot.interval"),
        ("[snapshot]\ninterval = \"whenever\"\n", "snapshot.interval"),
        (
            "[snapshot]\nchunk_size = \"1 KiB\"\n",
            "snapshot.chunk_size",
        ),
        (
            "[snapshot]\ncompression = \"zstd\"\ncompression_level = 99\n",
            "snapshot.compression_level",
        ),
        ("[retention]\nkeep_last = 0\n", "retention.keep_last"),
        ("[retention]\nlevels = \"sideways\"\n", "retention.levels"),
        ("[storage]\nlocal_dir = \"\"\n", "storage.local_dir"),
        ("[ulfm]\nmax_failures = 0\n", "ulfm.max_failures"),
        ("[ulfm]\nmax_failures = 1000001\n", "ulfm.max_failures"),
    ] {
        let err = Config::from_toml_str(text, "c.toml").unwrap_err();
        assert!(err.to_string().contains(key), "{text}: {err}");
        assert!(err.to_string().contains("c.toml"), "{text}: {err}");
    }
}

#[test]
fn file_values_and_sizes_parse() {
    let text = "[snapshot]\ninterval = \"5min\"\nchunk_size = \"1 MiB\"\n[storage]\nlocal_dir = \"/tmp/x\"\n";
    let cfg = Config::from_toml_str(text, "d.toml").unwrap();
    assert_eq!(
        cfg.snapshot.interval,
        Interval::Every(Duration::from_secs(300))
    );
    assert_eq!(cfg.chunk_bytes(), 1 << 20);
    assert_eq!(cfg.storage.local_dir, PathBuf::from("/tmp/x"));
    assert_eq!(
        cfg.source_of("storage.local_dir"),
        Source::File("d.toml".into())
    );
    let cfg = Config::from_toml_str("[snapshot]\nchunk_size = 131072\n", "d.toml").unwrap();
    assert_eq!(cfg.chunk_bytes(), 131072);
}

#[test]
fn environment_overrides_file_and_is_named_in_errors() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("job.toml");
    std::fs::write(
        &file,
        "[job]\nid = \"from-file\"\n[retention]\nkeep_last = 3\n",
    )
    .unwrap();
    let env = [
        ("FRAME_JOB_ID", "from-env"),
        ("FRAME_SNAPSHOT_INTERVAL", "7"),
        ("FRAME_SNAPSHOT_CHUNK_SIZE", "262144"),
        ("FRAME_RETENTION_KEEP_ON_FINALIZE", "true"),
        ("FRAME_RANK", "3"),
    ];
    let cfg = Config::load_with_env(Some(&file), env).unwrap();
    assert_eq!(cfg.job.id, "from-env");
    assert_eq!(cfg.retention.keep_last, 3);
    assert!(cfg.retention.keep_on_finalize);
    assert_eq!(cfg.snapshot.interval, Interval::Calls(7));
    assert_eq!(cfg.chunk_bytes(), 262144);
    assert_eq!(cfg.source_of("job.id"), Source::Env("FRAME_JOB_ID".into()));
    assert_eq!(
        cfg.source_of("retention.keep_last"),
        Source::File(file.clone())
    );

    let err =
        Config::load_with_env(Some(&file), [("FRAME_RETENTION_KEEP_LAST", "many")]).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("FRAME_RETENTION_KEEP_LAST") && msg.contains("retention.keep_last"),
        "{msg}"
    );

    let err = Config::load_with_env(None, [("FRAME_RETENTION_KEEP_LAST", "0")]).unwrap_err();
    assert!(
        err.to_string().contains("FRAME_RETENTION_KEEP_LAST"),
        "{err}"
    );

    let err = Config::load_with_env(None, [("FRAME_SNAPSHOT_INTERVL", "3")]).unwrap_err();
    assert!(err.to_string().contains("FRAME_SNAPSHOT_INTERVL"), "{err}");
}

#[test]
fn config_file_from_environment_and_missing_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("e.toml");
    std::fs::write(&file, "[job]\nid = \"via-env-file\"\n").unwrap();
    let cfg = Config::load_with_env(None, [(crate::env::CONFIG, file.to_str().unwrap())]).unwrap();
    assert_eq!(cfg.job.id, "via-env-file");
    let missing = dir.path().join("nope.toml");
    let err = Config::load_with_env(Some(&missing), NO_ENV).unwrap_err();
    assert!(matches!(err, ConfigError::Read { .. }));
    assert!(err.to_string().contains("nope.toml"), "{err}");
}

#[test]
fn shipped_default_file_matches_built_in_defaults() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/default.toml");
    let cfg = Config::from_file(&path).unwrap();
    let expected = Config::default();
    assert_eq!(cfg, expected);
    // Every key is present in the shipped file.
    for (key, _) in known_keys() {
        assert_eq!(
            cfg.source_of(&key),
            Source::File(path.clone()),
            "{key} missing"
        );
    }
}

#[test]
fn a_value_the_program_changed_is_reported_as_set_by_the_program() {
    let mut cfg = Config::default();
    assert_eq!(cfg.source_of("storage.local_dir"), Source::Default);
    cfg.storage.local_dir = "/elsewhere".into();
    assert_eq!(cfg.source_of("storage.local_dir"), Source::Program);
    assert!(cfg
        .describe("storage.local_dir")
        .contains("set by the program"));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.toml");
    std::fs::write(&file, "[retention]\nkeep_last = 5\n").unwrap();
    let mut cfg = Config::load_with_env(Some(&file), NO_ENV).unwrap();
    assert_eq!(
        cfg.source_of("retention.keep_last"),
        Source::File(file.clone())
    );
    cfg.retention.keep_last = 6;
    assert_eq!(cfg.source_of("retention.keep_last"), Source::Program);
    assert_eq!(cfg.source_of("snapshot.interval"), Source::Default);
}

#[test]
fn automatic_intervals_need_their_failure_rates() {
    let cfg = Config::from_toml_str(
        "[snapshot]\ninterval = \"auto\"\n[l2]\ninterval = \"auto\"\n[auto]\nmtbf = [\"2h\", \"3d\"]\n",
        "auto.toml",
    )
    .unwrap();
    assert_eq!(cfg.snapshot.interval, Interval::Auto);
    assert_eq!(cfg.auto.mtbf[1], std::time::Duration::from_secs(3 * 86400));
    for (text, key, what) in [
        ("[l2]\ninterval = \"auto\"\n", "l2.interval", "snapshot.interval = \"auto\" too"),
        (
            "[snapshot]\ninterval = \"auto\"\n[l3]\ninterval = \"auto\"\n[auto]\nmtbf = [\"1h\", \"2h\"]\n",
            "auto.mtbf",
            "no entry for level 3",
        ),
        ("[auto]\nmtbf = []\n", "auto.mtbf", "1 to 4"),
        ("[auto]\nmtbf = [\"1h\", \"0s\"]\n", "auto.mtbf", "entry 2 (level 2) is zero"),
        ("[auto]\nmtbf = [\"soon\"]\n", "auto.mtbf", "not a duration"),
    ] {
        let e = Config::from_toml_str(text, "auto.toml").unwrap_err().to_string();
        assert!(e.contains(key) && e.contains(what), "{text}: {e}");
    }
    let env = Config::load_with_env(None, [("FRAME_SNAPSHOT_INTERVAL", "auto")]).unwrap();
    assert_eq!(env.snapshot.interval, Interval::Auto);
}

#[test]
fn the_failure_aware_strategy_has_two_names() {
    for name in ["frame", "failure-aware"] {
        let cfg: Config = toml::from_str(&format!("[recovery]\nstrategy = \"{name}\"")).unwrap();
        assert_eq!(cfg.recovery.strategy, Strategy::FailureAware);
    }
    assert_eq!(Strategy::FailureAware.name(), "frame");
    let written = toml::to_string(&Config::default()).unwrap();
    assert!(written.contains("strategy = \"frame\""), "{written}");
}

#[test]
fn every_recovery_mode_reads_back_by_its_name_and_from_the_environment() {
    use crate::config::RecoveryMode;
    for mode in [
        RecoveryMode::Global,
        RecoveryMode::Logged,
        RecoveryMode::Cone,
    ] {
        let text = format!("[recovery]\nmode = \"{}\"", mode.name());
        let cfg: Config = toml::from_str(&text).unwrap();
        assert_eq!(cfg.recovery.mode, mode);
        let env = Config::load_with_env(None, [("FRAME_RECOVERY_MODE", mode.name())]).unwrap();
        assert_eq!(env.recovery.mode, mode);
    }
    let err = Config::load_with_env(None, [("FRAME_RECOVERY_MODE", "cones")]).unwrap_err();
    assert!(err.to_string().contains("FRAME_RECOVERY_MODE"), "{err}");
}

#[test]
fn level_retention_is_read_from_the_file_and_the_environment() {
    use crate::config::LevelRetention;
    use crate::Level::{L1, L2, L3, L4};
    assert_eq!(Config::default().retention.levels, LevelRetention::Each);
    let cfg = Config::from_toml_str("[retention]\nlevels = \"ordered\"\n", "r.toml").unwrap();
    assert_eq!(cfg.retention.levels, LevelRetention::Ordered);
    let cfg = Config::load_with_env(None, [("FRAME_RETENTION_LEVELS", "newest")]).unwrap();
    assert_eq!(cfg.retention.levels, LevelRetention::Newest);
    let err = Config::load_with_env(None, [("FRAME_RETENTION_LEVELS", "all")]).unwrap_err();
    assert!(err.to_string().contains("FRAME_RETENTION_LEVELS"), "{err}");
    // Which node-local levels a commit at each level retires below it.
    let cases = [
        (LevelRetention::Each, [vec![], vec![], vec![], vec![]]),
        (
            LevelRetention::Ordered,
            [vec![], vec![], vec![L2], vec![L2, L3]],
        ),
        (
            LevelRetention::Newest,
            [vec![], vec![L3], vec![L2], vec![L2, L3]],
        ),
    ];
    for (policy, by_level) in cases {
        for (level, want) in [L1, L2, L3, L4].into_iter().zip(by_level) {
            assert_eq!(policy.retired_by(level), want, "{policy:?} at {level:?}");
        }
    }
}
