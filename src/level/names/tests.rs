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
}
