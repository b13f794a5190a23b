use super::*;

fn pair(a: &Secret, b: &Secret, ca: Channel, cb: Channel) -> (io::Result<()>, io::Result<()>) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (mut x, mut y) = tokio::net::UnixStream::pair().unwrap();
        let (r1, r2) = tokio::join!(
            accept(&mut x, a, ca),
            connect_within(&mut y, b, cb, HANDSHAKE_TIMEOUT)
        );
        (r1, r2)
    })
}

#[test]
fn both_sides_prove_the_secret() {
    let s = Secret::generate().unwrap();
    let (a, c) = pair(&s, &s, Channel::Data, Channel::Data);
    assert!(a.is_ok() && c.is_ok());
    let other = Secret::generate().unwrap();
    let (a, _) = pair(&s, &other, Channel::Data, Channel::Data);
    assert_eq!(a.unwrap_err().kind(), io::ErrorKind::PermissionDenied);
    // A proof made for one kind of connection is refused for another.
    let (a, _) = pair(&s, &s, Channel::Node, Channel::Data);
    assert!(a.is_err());
}

#[test]
fn an_impostor_acceptor_is_refused_by_the_connector() {
    let s = Secret::generate().unwrap();
    let other = Secret::generate().unwrap();
    let (_, c) = pair(&other, &s, Channel::Rank, Channel::Rank);
    assert!(c.is_err());
}

#[test]
fn a_silent_peer_times_out() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    let s = Secret::generate().unwrap();
    let r = rt.block_on(async {
        let (mut x, _y) = tokio::net::UnixStream::pair().unwrap();
        accept(&mut x, &s, Channel::Data).await
    });
    assert_eq!(r.unwrap_err().kind(), io::ErrorKind::TimedOut);
}

#[test]
fn secrets_round_trip_through_hex_and_never_print() {
    let s = Secret::generate().unwrap();
    assert_eq!(Secret::from_hex(&s.to_hex()), Some(s.clone()));
    assert_eq!(Secret::from_hex("zz"), None);
    assert_eq!(format!("{s:?}"), "Secret(..)");
}
