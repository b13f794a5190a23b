use super::*;

const NO_ENV: [(&str, &str); 0] = [];

fn parse(text: &str, env: &[(&str, &str)]) -> Result<VelocFile, ConfigError> {
    VelocFile::parse(text, "heat.cfg", env.iter().copied())
}

#[test]
fn scratch_persistent_and_the_intervals_become_frames_levels() {
    let text = "# heat\nscratch = /dev/shm/scratch\npersistent = /pfs/ckpt ; the PFS\n\
                mode = sync\nec_interval = 30\npersistent_interval = 0\n\
                max_versions = 3\nscratch_versions = 2\n";
    let v = parse(text, &[]).unwrap();
    assert!(v.synchronous);
    assert_eq!(v.config.storage.local_dir, Path::new("/dev/shm/scratch"));
    assert_eq!(v.config.storage.global_dir, Path::new("/pfs/ckpt"));
    assert_eq!(
        v.config.l3.interval,
        Interval::Every(Duration::from_secs(30))
    );
    assert_eq!(v.config.l3.scheme, L3Scheme::Xor);
    assert_eq!(v.config.l4.interval, Interval::Calls(1));
    assert_eq!(
        (v.config.l4.keep_last, v.config.retention.keep_last),
        (3, 2)
    );
    assert!(v.config.retention.keep_on_finalize);
    assert!(v.warnings.is_empty());
    assert_eq!(
        v.config.source_of("l3.interval"),
        Source::File(PathBuf::from("heat.cfg"))
    );
}

#[test]
fn without_persistent_level_4_is_off_and_minus_one_turns_a_level_off() {
    let v = parse("scratch=/s\nmode=async\nec_interval=-1\n", &NO_ENV).unwrap();
    assert!(!v.synchronous);
    assert!(v.config.l3.interval.is_zero() && v.config.l4.interval.is_zero());
    // Unset: every checkpoint.
    let v = parse("scratch=/s\nmode=async\n", &NO_ENV).unwrap();
    assert_eq!(v.config.l3.interval, Interval::Calls(1));
}

#[test]
fn the_environment_overrides_the_file() {
    let env = [
        ("VELOC_MODE", "sync"),
        ("VELOC_EC_INTERVAL", "-1"),
        ("FRAME_TOPOLOGY_RANKS_PER_NODE", "2"),
    ];
    let v = parse("scratch=/s\nmode=async\n", &env).unwrap();
    assert!(v.synchronous);
    assert!(v.config.l3.interval.is_zero());
    assert_eq!(v.config.topology.ranks_per_node, 2);
    assert_eq!(
        v.config.source_of("l3.interval"),
        Source::Env("VELOC_EC_INTERVAL".into())
    );
}

#[test]
fn missing_unknown_and_bad_keys_name_the_key_and_where() {
    let err = parse("scratch=/s\n", &NO_ENV).unwrap_err().to_string();
    assert!(
        err.contains("mode") && err.contains("missing") && err.contains("heat.cfg"),
        "{err}"
    );
    let err = parse("mode=sync\n", &NO_ENV).unwrap_err().to_string();
    assert!(err.contains("scratch") && err.contains("missing"), "{err}");
    let err = parse("scratch=/s\nmode=fast\n", &NO_ENV)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("heat.cfg, line 2") && err.contains("fast"),
        "{err}"
    );
    let err = parse("scratch=/s\nmode=sync\nscrach=/t\n", &NO_ENV)
        .unwrap_err()
        .to_string();
    assert!(err.contains("line 3") && err.contains("scrach"), "{err}");
    let err = parse("scratch=/s\nmode=sync\n", &[("VELOC_EC_INTERVAL", "soon")])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("VELOC_EC_INTERVAL") && err.contains("soon"),
        "{err}"
    );
    let err = parse("scratch /s\n", &NO_ENV).unwrap_err().to_string();
    assert!(err.contains("line 1"), "{err}");
}

#[test]
fn unimplemented_keys_are_warned_about() {
    let v = parse(
        "scratch=/s\nmode=sync\naxl_type=bbapi\nchksum=true\n",
        &NO_ENV,
    )
    .unwrap();
    assert_eq!(v.warnings.len(), 1, "{:?}", v.warnings);
    assert!(v.warnings[0].contains("axl_type"));
}
