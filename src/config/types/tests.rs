use super::*;

#[test]
fn interval_spellings() {
    assert_eq!(Interval::parse("12"), Ok(Interval::Calls(12)));
    assert_eq!(
        Interval::parse("90s"),
        Ok(Interval::Every(Duration::from_secs(90)))
    );
    assert_eq!(
        Interval::parse("2min"),
        Ok(Interval::Every(Duration::from_secs(120)))
    );
    assert!(Interval::parse("soon").is_err());
    assert!(Interval::Calls(0).is_zero());
}

#[test]
fn paths_expand_the_user_id() {
    let uid = crate::safefs::my_uid();
    assert_eq!(
        expand_user("/dev/shm/frame-{uid}/x"),
        std::path::PathBuf::from(format!("/dev/shm/frame-{uid}/x"))
    );
    let cfg = crate::Config::default();
    assert!(cfg.storage.local_dir.ends_with(format!("frame-{uid}")));
}
