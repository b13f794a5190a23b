use super::*;

fn load(program: &[Setting], env: &[(&str, &str)]) -> Result<ScrConf, ConfigError> {
    ScrConf::load(program, env.iter().copied(), Path::new("/work/run"))
}

#[test]
fn defaults_are_scrs_with_the_cache_used() {
    let scr = load(&[], &[]).unwrap();
    assert_eq!(scr.prefix, Path::new("/work/run"));
    assert_eq!(scr.config.storage.local_dir, Path::new("/dev/shm"));
    assert_eq!(scr.config.storage.global_dir, Path::new("/work/run/.scr"));
    assert_eq!(scr.config.retention.keep_last, 1);
    assert!(scr.config.retention.keep_on_finalize);
    // XOR over sets of 8 nodes, a flush every 10th checkpoint.
    assert_eq!(scr.config.l3.scheme, L3Scheme::Xor);
    assert_eq!(scr.config.l3.group_size, 8);
    assert_eq!(scr.config.l3.parity, 1);
    assert_eq!(scr.config.l3.interval, Interval::Calls(1));
    assert!(scr.config.l2.interval.is_zero());
    assert_eq!(scr.config.l4.interval, Interval::Calls(10));
    assert!(!scr.bypass);
    assert_eq!(scr.checkpoint_interval, 0);
    assert_eq!(scr.checkpoint_seconds, 0);
    assert_eq!(scr.current, None);
    assert!(scr.warnings.is_empty(), "{:?}", scr.warnings);
    assert_eq!(scr.config.job.id, job_id(Path::new("/work/run")));
}

#[test]
fn each_copy_type_picks_its_level() {
    let of = |t: &str| load(&[Setting::program("SCR_COPY_TYPE", t)], &[]).unwrap();
    let single = of("single");
    assert!(single.config.l2.interval.is_zero() && single.config.l3.interval.is_zero());
    let partner = of("PARTNER");
    assert_eq!(partner.config.l2.interval, Interval::Calls(1));
    assert!(partner.config.l3.interval.is_zero());
    let rs = load(
        &[
            Setting::program("SCR_COPY_TYPE", "RS"),
            Setting::program("SCR_SET_SIZE", "4"),
            Setting::program("SCR_SET_FAILURES", "3"),
        ],
        &[],
    )
    .unwrap();
    assert_eq!(rs.config.l3.scheme, L3Scheme::ReedSolomon);
    assert_eq!((rs.config.l3.group_size, rs.config.l3.parity), (4, 3));
    let err = load(&[Setting::program("SCR_COPY_TYPE", "MIRROR")], &[])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("SCR_COPY_TYPE") && err.contains("MIRROR"),
        "{err}"
    );
}

#[test]
fn the_environment_wins_over_the_file_which_wins_over_the_program() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("my.conf");
    std::fs::write(
        &file,
        "# mine\nSCR_FLUSH=3\nSCR_CACHE_SIZE = 2 # two\nscr_set_size=4\n",
    )
    .unwrap();
    let conf = file.to_str().unwrap();
    let program = [
        Setting::program("SCR_FLUSH", "7"),
        Setting::program("SCR_CACHE_SIZE", "5"),
        Setting::program("SCR_HALT_SECONDS", "60"),
    ];
    let env = [("SCR_CONF_FILE", conf), ("SCR_CACHE_SIZE", "4")];
    let scr = load(&program, &env).unwrap();
    assert_eq!(scr.config.l4.interval, Interval::Calls(3));
    assert_eq!(scr.config.retention.keep_last, 4);
    assert_eq!(scr.config.l3.group_size, 4);
    assert_eq!(scr.halt_seconds, 60);
    assert_eq!(scr.value("scr_flush"), Some("3"));
    assert_eq!(scr.config.source_of("l4.interval"), Source::File(file));
    assert_eq!(
        scr.config.source_of("retention.keep_last"),
        Source::Env("SCR_CACHE_SIZE".into())
    );
}

#[test]
fn the_prefixs_scrconf_is_read_when_no_file_is_named() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(".scrconf"), "SCR_COPY_TYPE=PARTNER\n").unwrap();
    let prefix = dir.path().to_str().unwrap();
    let scr = load(&[], &[("SCR_PREFIX", prefix)]).unwrap();
    assert_eq!(scr.config.l2.interval, Interval::Calls(1));
}

#[test]
fn a_bad_key_or_value_names_it_and_where_it_was_set() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.conf");
    std::fs::write(&file, "SCR_FLUSHH=3\n").unwrap();
    let err = load(&[], &[("SCR_CONF_FILE", file.to_str().unwrap())])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("SCR_FLUSHH") && err.contains("bad.conf"),
        "{err}"
    );
    let err = load(&[], &[("SCR_FLUSH", "often")])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("environment variable SCR_FLUSH") && err.contains("often"),
        "{err}"
    );
    let err = load(&[Setting::program("SCR_CACHE_SIZE", "0")], &[])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("SCR_CACHE_SIZE") && err.contains("outside"),
        "{err}"
    );
    let err = load(&[Setting::program("SCR_BOGUS", "1")], &[])
        .unwrap_err()
        .to_string();
    assert!(err.contains("SCR_BOGUS"), "{err}");
    std::fs::write(&file, "SCR_FLUSH 3\n").unwrap();
    let err = load(&[], &[("SCR_CONF_FILE", file.to_str().unwrap())])
        .unwrap_err()
        .to_string();
    assert!(err.contains("line 1"), "{err}");
    let missing = dir.path().join("none.conf");
    let err = load(&[], &[("SCR_CONF_FILE", missing.to_str().unwrap())])
        .unwrap_err()
        .to_string();
    assert!(err.contains("none.conf"), "{err}");
}

#[test]
fn unknown_variables_and_unimplemented_keys_are_warned_about() {
    let scr = load(
        &[Setting::program("SCR_HOP_DISTANCE", "2")],
        &[("SCR_JOB_NAME", "x")],
    )
    .unwrap();
    assert_eq!(scr.warnings.len(), 2, "{:?}", scr.warnings);
    assert!(scr.warnings.iter().any(|w| w.contains("SCR_JOB_NAME")));
    assert!(scr.warnings.iter().any(|w| w.contains("SCR_HOP_DISTANCE")));
}

#[test]
fn descriptor_lines_are_warned_about_by_line() {
    let (settings, descriptors) = parse_file(
        "SCR_FLUSH=1\nCKPT=0 INTERVAL=1 TYPE=XOR\nSTORE=/dev/shm COUNT=1\n",
        Path::new("f"),
    )
    .unwrap();
    assert_eq!(settings.len(), 1);
    assert_eq!(descriptors, vec![2, 3]);
}

#[test]
fn frame_variables_override_frame_keys() {
    let scr = load(&[], &[("FRAME_TOPOLOGY_RANKS_PER_NODE", "2")]).unwrap();
    assert_eq!(scr.config.topology.ranks_per_node, 2);
}

#[test]
fn prefixes_give_distinct_job_ids_and_one_prefix_spelt_two_ways_one() {
    assert_ne!(job_id(Path::new("/a")), job_id(Path::new("/b")));
    assert_eq!(job_id(Path::new("/a")), job_id(Path::new("/a")));
    let id = |p: &str| load(&[], &[("SCR_PREFIX", p)]).unwrap().config.job.id;
    assert_eq!(id("/p/run/"), id("/p/run"));
    assert_eq!(id("/p/x/../run/."), id("/p/run"));
    assert_eq!(id("run"), id("/work/run/run"));
}

#[test]
fn a_prefix_size_of_0_keeps_as_many_as_frame_can() {
    let scr = load(&[Setting::program("SCR_PREFIX_SIZE", "0")], &[]).unwrap();
    assert_eq!(scr.config.l4.keep_last, crate::config::MAX_KEEP_LAST);
}
