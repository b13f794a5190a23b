use super::*;

/// Every key of FTI 1.6's template at its documented default, in the mixed
/// case FTI's own files use, with comments of both kinds.
const FULL: &str = "\
; an FTI configuration with every key
[Basic]
Head = 0                 ; inline post-processing
Node_size = 2
Ckpt_dir = /tmp/fti-local
Glbl_dir = /tmp/fti-global
Meta_dir = /tmp/fti-meta
Ckpt_L1 = 3
Ckpt_L2 = 5
Ckpt_L3 = 7
Ckpt_L4 = 11
Dcp_L4 = 0
Inline_L2 = 1
Inline_L3 = 1
Inline_L4 = 1
Keep_last_ckpt = 0
Keep_L4_ckpt = 0
Group_size = 4
Max_sync_intv = 0
Ckpt_io = 1
Enable_staging = 0
Enable_dcp = 0
Dcp_mode = 0
Dcp_block_size = 16384
Verbosity = 2

[Restart]
# the run is not a restart
Failure = 0
Exec_ID = XXXX-XX-XX_XX-XX-XX

[Injection]
rank = 0
number = 0
position = 0
frequency = 0

[Advanced]
Block_size = 1024
Transfer_size = 16
Mpi_tag = 2612
General_tag = 2612
Ckpt_tag = 711
Stage_tag = 406
Final_tag = 3107
Lustre_striping_unit = 4194304
Lustre_striping_factor = -1
Lustre_striping_offset = -1
Local_test = 1
Fast_forward = 1
";

fn minutes(m: u64) -> Interval {
    Interval::Every(Duration::from_secs(m * 60))
}

#[test]
fn every_key_of_the_template_is_read_without_warnings() {
    let fti = FtiFile::parse(FULL, "full.fti").unwrap();
    assert!(fti.warnings.is_empty(), "{:?}", fti.warnings);
    let c = &fti.config;
    assert!(!fti.head);
    assert_eq!(fti.node_size, 2);
    assert!(fti.local_test);
    assert_eq!(c.topology.ranks_per_node, 2);
    assert_eq!(c.storage.local_dir, Path::new("/tmp/fti-local"));
    assert_eq!(c.storage.global_dir, Path::new("/tmp/fti-global"));
    assert_eq!(c.snapshot.interval, minutes(3));
    assert_eq!(c.l2.interval, minutes(5));
    assert_eq!(c.l3.interval, minutes(7));
    assert_eq!(c.l4.interval, minutes(11));
    assert_eq!(fti.inline, [true; 3]);
    assert!(!c.retention.keep_on_finalize);
    assert_eq!((c.l3.group_size, c.l3.parity), (4, 2));
    assert!(!c.l4.differential);
    assert_eq!(fti.verbosity, 2);
    assert!(!fti.restart);
    assert!(fti.snapshots);
    assert_eq!(c.snapshot.chunk_size, ByteSize::kib(1024));
    assert_eq!(c.l4.chunk_size, ByteSize::mib(16));
}

#[test]
fn sections_and_keys_match_in_any_case() {
    let upper = "[BASIC]\nHEAD = 1\nNODE_SIZE = 4\n[ADVANCED]\nLOCAL_TEST = 1\n";
    let lower = "[basic]\nhead = 1\nnode_size = 4\n[advanced]\nlocal_test = 1\n";
    for text in [upper, lower] {
        let fti = FtiFile::parse(text, "case.fti").unwrap();
        assert!(fti.head, "{text}");
        assert_eq!(fti.node_size, 4);
        assert_eq!(fti.config.topology.ranks_per_node, 4);
    }
}

#[test]
fn defaults_follow_ftis_documentation() {
    let fti = FtiFile::parse("", "empty.fti").unwrap();
    assert!(!fti.head);
    assert_eq!(fti.node_size, 2);
    assert!(!fti.local_test);
    assert_eq!(fti.config.topology.ranks_per_node, 0);
    assert_eq!(fti.config.snapshot.interval, minutes(3));
    assert_eq!(fti.config.l4.interval, minutes(11));
    assert_eq!(fti.config.job.id, "fti");
}

#[test]
fn fti_programs_keep_one_checkpoint_above_level_1_unless_told_otherwise() {
    use crate::config::LevelRetention;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.fti");
    std::fs::write(&path, "[basic]\nckpt_l2 = 1\n").unwrap();
    let none: [(&str, &str); 0] = [];
    let fti = FtiFile::load(&path, none).unwrap();
    assert_eq!(fti.config.retention.keep_last, 1);
    assert_eq!(fti.config.retention.levels, LevelRetention::Newest);
    let fti = FtiFile::load(&path, [("FRAME_RETENTION_LEVELS", "ordered")]).unwrap();
    assert_eq!(fti.config.retention.levels, LevelRetention::Ordered);
}

#[test]
fn each_unimplemented_key_set_away_from_its_default_is_warned_about_once() {
    for (section, key, usage) in KEYS {
        let Use::Unsupported(default) = usage else {
            continue;
        };
        let value = if *default == "1" { "2" } else { "1" };
        let text = format!("[{section}]\n{key} = {value}\n");
        let fti = FtiFile::parse(&text, "x.fti").unwrap();
        assert_eq!(fti.warnings.len(), 1, "{key}: {:?}", fti.warnings);
        assert!(
            fti.warnings[0].contains(&format!("[{section}] {key} = {value}")),
            "{:?}",
            fti.warnings
        );
        let at_default = format!("[{section}]\n{key} = {default}\n");
        assert!(
            FtiFile::parse(&at_default, "x.fti")
                .unwrap()
                .warnings
                .is_empty(),
            "{key}"
        );
    }
}

#[test]
fn unknown_keys_and_sections_are_warned_about() {
    let fti = FtiFile::parse(
        "stray = 1\n[Basic]\nCkpt_dri = /x\n[Extra]\na = 1\n",
        "u.fti",
    )
    .unwrap();
    let all = fti.warnings.join("\n");
    assert_eq!(fti.warnings.len(), 3, "{all}");
    assert!(all.contains("`stray` is outside any section"), "{all}");
    assert!(all.contains("[Basic] Ckpt_dri is not a key"), "{all}");
    assert!(all.contains("section [Extra]"), "{all}");
}

#[test]
fn bad_values_name_the_file_and_key() {
    for (text, key, what) in [
        ("[basic]\nhead = 2\n", "[basic] head", "outside 0..=1"),
        (
            "[basic]\nnode_size = two\n",
            "[basic] node_size",
            "not an integer",
        ),
        ("[basic]\nnode_size = 0\n", "[basic] node_size", "outside"),
        (
            "[basic]\nhead = 1\nnode_size = 1\n",
            "[basic] node_size",
            "at least 2",
        ),
        ("[basic]\nckpt_l2 = -1\n", "[basic] ckpt_l2", "outside"),
        ("[basic]\ngroup_size = 1\n", "[basic] group_size", "outside"),
        (
            "[basic]\nckpt_dir =\n",
            "[basic] ckpt_dir",
            "must not be empty",
        ),
        ("[restart]\nfailure = 9\n", "[restart] failure", "outside"),
        (
            "[advanced]\nlocal_test = yes\n",
            "[advanced] local_test",
            "not an integer",
        ),
        (
            "[advanced]\nblock_size = 1\n",
            "[advanced] block_size",
            "outside",
        ),
    ] {
        let e = FtiFile::parse(text, "/etc/bad.fti")
            .unwrap_err()
            .to_string();
        assert!(e.contains("/etc/bad.fti"), "{text}: {e}");
        assert!(e.contains(key), "{text}: {e}");
        assert!(e.contains(what), "{text}: {e}");
    }
}

#[test]
fn malformed_and_missing_files_are_clear_errors() {
    let e = FtiFile::parse("[basic]\nhead = 0\n[advanced", "/x/broken.fti").unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, ConfigError::IniSyntax { line: 3, .. }), "{msg}");
    assert!(msg.contains("/x/broken.fti, line 3"), "{msg}");
    let e = FtiFile::read("/nonexistent/config.fti")
        .unwrap_err()
        .to_string();
    assert!(e.contains("/nonexistent/config.fti"), "{e}");
}

#[test]
fn the_levels_follow_their_minutes_and_zero_turns_one_off() {
    let fti = FtiFile::parse(
        "[basic]\nckpt_l1 = 0\nckpt_l2 = 0\nckpt_l3 = 0\nckpt_l4 = 10\n",
        "l.fti",
    )
    .unwrap();
    assert!(fti.snapshots);
    assert_eq!(fti.config.snapshot.interval, minutes(10));
    assert!(fti.config.l2.interval.is_zero() && fti.config.l3.interval.is_zero());
    assert_eq!(fti.config.l4.interval, minutes(10));
    let off = FtiFile::parse(
        "[basic]\nckpt_l1 = 0\nckpt_l2 = 0\nckpt_l3 = 0\nckpt_l4 = 0\n",
        "o.fti",
    )
    .unwrap();
    assert!(!off.snapshots);
}

#[test]
fn settings_beyond_the_checkpoints_are_kept() {
    let text = "[basic]\nhead = 1\nnode_size = 3\ninline_l3 = 0\nkeep_last_ckpt = 1\n\
                group_size = 8\nenable_dcp = 1\nverbosity = 3\n[restart]\nfailure = 1\n";
    let fti = FtiFile::parse(text, "s.fti").unwrap();
    assert!(fti.head && fti.restart);
    assert_eq!(fti.inline, [true, false, true]);
    assert!(fti.config.retention.keep_on_finalize && fti.config.l4.differential);
    assert_eq!((fti.config.l3.group_size, fti.config.l3.parity), (8, 4));
    assert_eq!(fti.verbosity, 3);
}

#[test]
fn frames_environment_overrides_apply_on_top() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.fti");
    std::fs::write(&path, FULL).unwrap();
    let env = [
        ("FRAME_SNAPSHOT_INTERVAL", "20"),
        ("FRAME_L2_INTERVAL", "1"),
        ("HOME", "/x"),
    ];
    let fti = FtiFile::load(&path, env).unwrap();
    assert_eq!(fti.config.snapshot.interval, Interval::Calls(20));
    assert_eq!(fti.config.l2.interval, Interval::Calls(1));
    assert_eq!(fti.config.l3.interval, minutes(7));
    let e = FtiFile::load(&path, [("FRAME_L3_GROUP_SIZE", "x")])
        .unwrap_err()
        .to_string();
    assert!(e.contains("FRAME_L3_GROUP_SIZE"), "{e}");
}

#[test]
fn the_toml_conversion_reads_back_as_the_same_configuration() {
    let text = "[basic]\nhead = 1\nnode_size = 3\nckpt_l2 = 2\nenable_dcp = 1\n[advanced]\nlocal_test = 1\n";
    let fti = FtiFile::parse(text, "t.fti").unwrap();
    let toml = fti.to_toml();
    assert!(toml.contains("(head): yes"), "{toml}");
    let back = Config::from_toml_str(&toml, "converted.toml").unwrap();
    assert_eq!(back, fti.config);
}

#[test]
fn errors_in_frames_checks_name_the_fti_file() {
    let e = FtiFile::parse(
        "[basic]\ngroup_size = 64\n[advanced]\nblock_size = 2000000\n",
        "/f.fti",
    );
    let e = e.unwrap_err().to_string();
    assert!(e.contains("/f.fti") && e.contains("block_size"), "{e}");
}

#[test]
fn frame_section_turns_the_enabled_levels_to_automatic_intervals() {
    let text = FULL
        .replace("Ckpt_L3 = 7", "Ckpt_L3 = 0")
        .replace("Ckpt_L4 = 11", "Ckpt_L4 = 0")
        + "\n[Frame]\nMTBF = 2h, 1day\n";
    let fti = FtiFile::parse(&text, "auto.fti").unwrap();
    assert!(fti.warnings.is_empty(), "{:?}", fti.warnings);
    let c = &fti.config;
    assert_eq!(c.snapshot.interval, Interval::Auto);
    assert_eq!(c.l2.interval, Interval::Auto);
    assert!(c.l3.interval.is_zero() && c.l4.interval.is_zero());
    assert_eq!(
        c.auto.mtbf,
        vec![Duration::from_secs(7200), Duration::from_secs(86400)]
    );
    // Without the section FTI's minutes stay.
    let plain = FtiFile::parse(FULL, "plain.fti").unwrap();
    assert_eq!(plain.config.snapshot.interval, minutes(3));
    assert_eq!(plain.config.l4.interval, minutes(11));
}

#[test]
fn frame_section_errors_name_the_file_and_key() {
    for (section, expect) in [
        ("MTBF = 2h, 1d", "ckpt_l4 enables level 4"),
        ("MTBF = 2h, soon, 1w, 1y", "entry 2 (`soon`)"),
        ("MTBF = 2h, 0s, 1w, 1y", "entry 2 (level 2) is zero"),
        ("MTBF = 1h, 2h, 3h, 4h, 5h", "has 5 entries"),
    ] {
        let text = format!("{FULL}\n[frame]\n{section}\n");
        let err = FtiFile::parse(&text, "bad.fti").unwrap_err().to_string();
        assert!(
            err.contains("bad.fti") && err.contains("[frame] mtbf") && err.contains(expect),
            "{section}: {err}"
        );
    }
    let off = FULL
        .replace("Ckpt_L1 = 3", "Ckpt_L1 = 0")
        .replace("Ckpt_L2 = 5", "Ckpt_L2 = 0")
        .replace("Ckpt_L3 = 7", "Ckpt_L3 = 0")
        .replace("Ckpt_L4 = 11", "Ckpt_L4 = 0")
        + "[frame]\nmtbf = 1h\n";
    let err = FtiFile::parse(&off, "off.fti").unwrap_err().to_string();
    assert!(err.contains("no level is enabled"), "{err}");
    let stray = format!("{FULL}\n[frame]\nmtbf = 1h, 2h, 3h, 4h\nperiod = 5\n");
    let fti = FtiFile::parse(&stray, "stray.fti").unwrap();
    assert!(
        fti.warnings.iter().any(|w| w.contains("[frame] period")),
        "{:?}",
        fti.warnings
    );
}

/// A file that starts with a UTF-8 byte-order mark (as some editors write
/// them) keeps its first section; FTI's keys that its template leaves out
/// (dCP's stack, HDF5 single files, heads kept alive, the variable id
/// limit, GPU buffers) draw no warning at their defaults, and one when set
/// to what frame does not do.
/// A section given twice is one section, the last value of a key counting
/// (as FTI reads it).
#[test]
fn a_byte_order_mark_and_keys_outside_the_template() {
    let text = format!(
        "\u{feff}{FULL}[Basic]\nDcp_stack_size = 5\nH5_single_file_enable = 0\n\
         h5_single_file_dir = /tmp/h5\nh5_single_file_prefix = run\nh5_single_file_inline = 1\n\
         h5_single_file_keep = 0\nkeep_heads_alive = 0\nmax_var_id = 102400\n\
         [Injection]\nindex = 0\n[Advanced]\ngpu_host_bufsize = 33554432\n"
    );
    let fti = FtiFile::parse(&text, "bom.fti").unwrap();
    assert_eq!(fti.node_size, 2);
    assert_eq!(
        fti.config.storage.local_dir,
        std::path::Path::new("/tmp/fti-local")
    );
    assert!(fti.warnings.is_empty(), "{:?}", fti.warnings);
    let set = text.replace("keep_heads_alive = 0", "keep_heads_alive = 1");
    let fti = FtiFile::parse(&set, "bom.fti").unwrap();
    assert_eq!(fti.warnings.len(), 1, "{:?}", fti.warnings);
    assert!(
        fti.warnings[0].contains("keep_heads_alive = 1"),
        "{:?}",
        fti.warnings
    );
    let again = format!("{FULL}[Basic]\nNode_size = 4\nNode_size = 8\n");
    assert_eq!(FtiFile::parse(&again, "twice.fti").unwrap().node_size, 8);
}

#[test]
fn dcp_keys_set_the_differential_level_4() {
    let text = "[basic]\nckpt_l4 = 30\nenable_dcp = 1\ndcp_l4 = 10\ndcp_mode = 1\n\
                dcp_block_size = 4096\ndcp_stack_size = 3\n";
    let fti = FtiFile::parse(text, "d.fti").unwrap();
    let l4 = &fti.config.l4;
    assert!(l4.differential);
    assert_eq!((l4.block_size.as_u64(), l4.full_every), (4096, 3));
    // The shorter of the two level-4 intervals.
    assert_eq!(l4.interval, minutes(10));
    assert!(fti.warnings.is_empty(), "{:?}", fti.warnings);
    // dCP off: FTI's keys change nothing, FTI's placeholder block size too.
    let off = FtiFile::parse(
        "[basic]\nckpt_l4 = 30\nenable_dcp = 0\ndcp_l4 = 10\ndcp_block_size = -1\n",
        "o.fti",
    )
    .unwrap();
    assert!(!off.config.l4.differential);
    assert_eq!(off.config.l4.interval, minutes(30));
    let err = FtiFile::parse("[basic]\nenable_dcp = 1\ndcp_block_size = 100\n", "b.fti")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("dcp_block_size") && err.contains("b.fti"),
        "{err}"
    );
}
