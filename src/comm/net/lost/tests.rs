use super::*;

#[test]
fn only_silence_counts_as_lost() {
    for kind in [
        io::ErrorKind::TimedOut,
        io::ErrorKind::HostUnreachable,
        io::ErrorKind::NetworkUnreachable,
    ] {
        assert!(unanswered(&io::Error::from(kind)), "{kind:?}");
    }
    for kind in [
        io::ErrorKind::ConnectionReset,
        io::ErrorKind::ConnectionRefused,
        io::ErrorKind::BrokenPipe,
        io::ErrorKind::UnexpectedEof,
    ] {
        assert!(!unanswered(&io::Error::from(kind)), "{kind:?}");
    }
    assert!(unanswered(&io::Error::from_raw_os_error(libc_etimedout())));
}

/// ETIMEDOUT, as a kernel reports a connection its user timeout ended.
fn libc_etimedout() -> i32 {
    rustix::io::Errno::TIMEDOUT.raw_os_error()
}

#[test]
fn a_connection_is_watched() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let s = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
    watch(&s, Duration::from_secs(8)).unwrap();
    assert_eq!(sockopt::tcp_user_timeout(&s).unwrap(), 8000);
    assert!(sockopt::socket_keepalive(&s).unwrap());
    assert_eq!(sockopt::tcp_keepidle(&s).unwrap(), Duration::from_secs(2));
}
