use super::*;

#[test]
fn names_are_taken_below_the_prefix() {
    let (cwd, prefix) = (Path::new("/run/job"), Path::new("/run/job"));
    assert_eq!(below_prefix("a.ckpt", cwd, prefix).unwrap(), "a.ckpt");
    assert_eq!(
        below_prefix("./ckpt.3/../ckpt.4/rank_1", cwd, prefix).unwrap(),
        "ckpt.4/rank_1"
    );
    assert_eq!(
        below_prefix("/run/job/out/x", Path::new("/"), prefix).unwrap(),
        "out/x"
    );
    assert_eq!(
        below_prefix("x", Path::new("/run/job/sub"), Path::new("/run/job/./")).unwrap(),
        "sub/x"
    );
    for bad in ["../x", "/etc/passwd", "", "."] {
        assert!(below_prefix(bad, cwd, prefix).is_err(), "{bad}");
    }
}
