use super::*;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;

fn scratch() -> tempfile::TempDir {
    crate::testing::scratch()
}

#[test]
fn directories_are_created_private_and_reopened() {
    let t = scratch();
    let path = t.path().join("a/b/c");
    let d = Dir::open_or_create(&path).unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
    let sub = d.sub("x", true).unwrap();
    assert_eq!(sub.path(), path.join("x"));
    assert!(d.try_sub("missing").unwrap().is_none());
    assert_eq!(d.entries().unwrap(), vec![("x".to_string(), Kind::Dir)]);
}

#[test]
fn symbolic_links_are_never_followed() {
    let t = scratch();
    let d = Dir::open_or_create(&t.path().join("d")).unwrap();
    let target = t.path().join("target");
    std::fs::create_dir(&target).unwrap();
    std::fs::write(t.path().join("secret"), b"keep").unwrap();
    std::os::unix::fs::symlink(&target, d.join("link-dir")).unwrap();
    std::os::unix::fs::symlink(t.path().join("secret"), d.join("link-file")).unwrap();
    std::os::unix::fs::symlink(&target, t.path().join("root-link")).unwrap();

    let e = d.sub("link-dir", true).unwrap_err();
    assert!(e.to_string().contains("symbolic link"), "{e}");
    let e = Dir::open_or_create(&t.path().join("root-link")).unwrap_err();
    assert!(e.to_string().contains("symbolic link"), "{e}");
    let e = d.open_read("link-file").unwrap_err();
    assert!(e.to_string().contains("symbolic link"), "{e}");
    // Creating over a planted link fails instead of writing its target...
    assert!(d.create_new("link-file").is_err());
    // ...and replacing removes the link itself, not its target.
    d.write_atomic("link-file", b"new", "t").unwrap();
    assert_eq!(std::fs::read(t.path().join("secret")).unwrap(), b"keep");
    assert_eq!(std::fs::read(d.join("link-file")).unwrap(), b"new");
    // A temporary name planted as a link is replaced, not followed.
    std::os::unix::fs::symlink(t.path().join("secret"), d.join(".f.tmp-1")).unwrap();
    d.write_atomic("f", b"x", "1").unwrap();
    assert_eq!(std::fs::read(t.path().join("secret")).unwrap(), b"keep");
}

#[test]
fn directories_writable_by_others_or_owned_by_others_are_refused() {
    let t = scratch();
    let open = t.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let e = Dir::open(&open).unwrap_err();
    assert!(e.to_string().contains("writable by other users"), "{e}");
    assert!(e.to_string().contains("mode 0777"), "{e}");

    if my_uid() == 0 {
        let theirs = t.path().join("theirs");
        std::fs::create_dir(&theirs).unwrap();
        std::os::unix::fs::chown(&theirs, Some(4242), Some(4242)).unwrap();
        let e = Dir::open(&theirs).unwrap_err();
        assert!(e.to_string().contains("owned by uid 4242"), "{e}");
        // A file someone else owns is not read either.
        let d = Dir::open_or_create(&t.path().join("mine")).unwrap();
        std::fs::write(d.join("f"), b"x").unwrap();
        std::os::unix::fs::chown(d.join("f"), Some(4242), None).unwrap();
        assert!(d
            .open_read("f")
            .unwrap_err()
            .to_string()
            .contains("uid 4242"));
    }
}

#[test]
fn bases_must_be_owned_by_us_or_root_and_sticky_if_shared() {
    let t = scratch();
    check_base(t.path()).unwrap();
    check_base(Path::new("/tmp")).unwrap();
    let shared = t.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    assert!(check_base(&shared)
        .unwrap_err()
        .to_string()
        .contains("sticky"));
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    check_base(&shared).unwrap();
}

#[test]
fn a_shared_sticky_directory_gets_a_private_one_of_this_user_inside() {
    let t = scratch();
    let shared = t.path().join("shm");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let mine = shared.join(format!("frame-{}", my_uid()));
    assert_eq!(private_root(&shared).unwrap(), mine);
    let mode = std::fs::symlink_metadata(&mine)
        .unwrap()
        .permissions()
        .mode()
        & 0o7777;
    assert_eq!(mode, 0o700);
    // Again: the same directory, nothing changed.
    assert_eq!(private_root(&shared).unwrap(), mine);
    Dir::open(&mine).unwrap();
    // A private directory, or a missing one, is used as it is.
    assert_eq!(private_root(t.path()).unwrap(), t.path());
    let missing = t.path().join("missing");
    assert_eq!(private_root(&missing).unwrap(), missing);
    assert!(!missing.exists());
}

#[test]
fn what_another_user_planted_in_a_shared_directory_is_refused() {
    let t = scratch();
    let shared = t.path().join("shm");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let mine = shared.join(format!("frame-{}", my_uid()));
    // A link where the private directory goes.
    let elsewhere = t.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &mine).unwrap();
    let e = private_root(&shared).unwrap_err().to_string();
    assert!(e.contains("link"), "{e}");
    std::fs::remove_file(&mine).unwrap();
    // A file, and a directory others can write to.
    std::fs::write(&mine, b"").unwrap();
    assert!(private_root(&shared).is_err());
    std::fs::remove_file(&mine).unwrap();
    std::fs::create_dir(&mine).unwrap();
    std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o777)).unwrap();
    let e = private_root(&shared).unwrap_err().to_string();
    assert!(e.contains("writable by other users"), "{e}");
    // Another user's (when the tests can give it away).
    if rustix::process::geteuid().is_root() {
        std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::os::unix::fs::chown(&mine, Some(4242), None).unwrap();
        let e = private_root(&shared).unwrap_err().to_string();
        assert!(e.contains("uid 4242"), "{e}");
    }
}

#[test]
fn a_directory_others_can_write_without_the_sticky_bit_is_refused_without_advice_to_chmod_it() {
    let t = scratch();
    for mode in [0o777, 0o775, 0o757] {
        let open = t.path().join(format!("open-{mode:o}"));
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(mode)).unwrap();
        let e = private_root(&open).unwrap_err().to_string();
        assert!(e.contains("without the sticky bit"), "{e}");
        assert!(!e.contains("chmod"), "{e}");
        assert!(!open.join(format!("frame-{}", my_uid())).exists());
        let e = Dir::open(&open).unwrap_err().to_string();
        assert!(
            e.contains("writable by other users") && !e.contains("chmod"),
            "{e}"
        );
    }
    // A link to a shared directory is not followed.
    let link = t.path().join("link");
    std::os::unix::fs::symlink("/tmp", &link).unwrap();
    assert!(private_root(&link)
        .unwrap_err()
        .to_string()
        .contains("symbolic link"));
}

#[test]
fn exclusive_creation_and_capped_reads() {
    let t = scratch();
    let d = Dir::open_or_create(t.path()).unwrap();
    let mut f = d.create_new("a").unwrap();
    f.write_all(b"0123456789").unwrap();
    assert!(d.create_new("a").is_err());
    let mode = std::fs::metadata(d.join("a")).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert_eq!(d.read_capped("a", 10).unwrap(), b"0123456789");
    let e = d.read_capped("a", 9).unwrap_err();
    assert!(e.to_string().contains("larger than"), "{e}");
    d.remove_file("a").unwrap();
    d.remove_file("a").unwrap();
    assert!(d.kind("a").is_none());
}

#[test]
fn a_fifo_is_refused_without_blocking() {
    let t = scratch();
    let d = Dir::open_or_create(t.path()).unwrap();
    nix::unistd::mkfifo(&d.join("pipe"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    let e = d.open_read("pipe").unwrap_err();
    assert!(e.to_string().contains("not a regular file"), "{e}");
}

#[test]
fn locks_exclude_other_holders_until_dropped() {
    let t = scratch();
    let d = Dir::open_or_create(t.path()).unwrap();
    let held = d.lock("l", "rank 0 of job x").unwrap();
    assert!(d.is_locked("l"));
    let e = d.lock("l", "rank 0 of job x").unwrap_err();
    assert!(matches!(e, FsError::Locked { .. }));
    assert!(e.to_string().contains("rank 0 of job x"), "{e}");
    drop(held);
    assert!(!d.is_locked("l"));
    let _again = d.lock("l", "rank 0 of job x").unwrap();
}
