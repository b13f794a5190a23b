use super::*;

#[test]
fn names_parse_back() {
    assert_eq!(parse_rank_file(&data_file(12)), Some(RankFile::Data(12)));
    assert_eq!(
        parse_rank_file("rank-3.meta.json"),
        Some(RankFile::Record(3))
    );
    assert_eq!(parse_rank_file("rank-x.fck"), None);
    assert_eq!(parse_rank_file(".rank-1.meta.json.tmp-1"), None);
    assert_eq!(parse_ckpt_dir(&ckpt_dir(42)), Some(42));
    assert_eq!(parse_ckpt_dir("ckpt-"), None);
    assert!(is_temporary(&temporary(&record_file(3), 3)));
    assert!(is_temporary(&temporary(POINTER, 0)));
    assert!(is_lock(&lock_file(7)));
    assert_eq!(parse_held_dir(&held_dir(5)), Some(5));
    assert_eq!(parse_held_dir("rank-.files"), None);
    assert_eq!(parse_rank_file(&held_dir(5)), None);
    assert!(
        check_file_name(SEAL).is_err(),
        "no program's file is the seal"
    );
}

#[test]
fn a_programs_file_name_is_one_plain_component() {
    for good in ["restart.dat", "a", "rank 3 state.bin", &"x".repeat(255)] {
        assert_eq!(check_file_name(good), Ok(()), "{good}");
    }
    for bad in [
        "",
        ".",
        "..",
        ".hidden",
        "a/b",
        "/abs",
        "nul\0byte",
        &"x".repeat(256),
    ] {
        let err = check_file_name(bad).expect_err(bad).to_string();
        assert!(err.starts_with("file name "), "{err}");
    }
}
