use super::*;

#[test]
fn the_command_line_carries_no_secret_and_quotes_paths() {
    let cmd = remote_command(Path::new("/opt/my frame/bin/frame")).unwrap();
    assert!(cmd.contains("'/opt/my frame/bin/frame'"), "{cmd}");
    assert!(
        cmd.contains("FRAME_RT_ROLE=daemon FRAME_RT_HANDOFF=stdin"),
        "{cmd}"
    );
    assert!(!cmd.contains("SECRET"), "{cmd}");
}

#[test]
fn the_root_is_found_on_the_route_to_a_host() {
    // A named interface is used as it is.
    let a = root_for("10.1.2.3".parse().unwrap(), 7, "anything").unwrap();
    assert_eq!(a, "10.1.2.3:7".parse().unwrap());
    // Loopback routes to loopback.
    let a = root_for("0.0.0.0".parse().unwrap(), 7, "user@127.0.0.1").unwrap();
    assert_eq!(a, "127.0.0.1:7".parse().unwrap());
    let e = root_for("0.0.0.0".parse().unwrap(), 7, "no-such-host.invalid").unwrap_err();
    assert!(
        e.contains("no-such-host.invalid") && e.contains("--bind"),
        "{e}"
    );
}

#[test]
fn the_tail_keeps_the_last_lines() {
    let t = Tail::default();
    t.push(b"one\ntwo\n\nthree\nfour");
    assert_eq!(t.lines(), "two / three / four");
    t.push(&vec![b'x'; 2 * TAIL]);
    assert_eq!(t.lines().len(), TAIL);
}
