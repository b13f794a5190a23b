//! Connections kept from one epoch's communicator to the next.

use super::*;

/// A communicator of the next epoch takes over the connections of the
/// one before to peers at the same address, connects anew to a peer at a
/// new one, and connects anew once when a kept connection is broken.
#[test]
fn the_next_epoch_reuses_connections_to_peers_that_stayed() {
    let w = world(3, false);
    let _guard = w.rt.enter();
    let _deadline = crate::testing::Deadline::new(Duration::from_secs(60));
    let links = Links::new();
    let held = |c: &NetComm, r: usize| c.peer(r).link.is_some();
    let a = w.comm(0, 1).with_links(Arc::clone(&links));
    let (b, c) = (w.comm(1, 1), w.comm(2, 1));
    a.send(1, 1, b"one").unwrap();
    a.send(2, 1, b"one").unwrap();
    assert_eq!(&b.recv(0, 1).unwrap()[..], b"one");
    assert_eq!(&c.recv(0, 1).unwrap()[..], b"one");
    drop(a);
    // Epoch 2: rank 2 listens elsewhere (a replacement).
    let mut table = (*w.table).clone();
    let dir = tempfile::tempdir().unwrap();
    let hub2 = Hub::new();
    table[2] =
        w.rt.block_on(listen(
            Bind::Unix(dir.path().join("new.sock")),
            Arc::clone(&hub2),
            Arc::clone(&w.security),
        ))
        .unwrap();
    let table = Arc::new(table);
    let at = |rank: usize, hub: &Arc<Hub>| {
        NetComm::new(
            rank,
            0,
            2,
            Arc::clone(hub),
            Arc::clone(&table),
            Arc::clone(&w.security),
        )
    };
    let a = at(0, &w.hubs[0]).with_links(Arc::clone(&links));
    assert!(held(&a, 1), "the connection to rank 1 is kept");
    assert!(!held(&a, 2), "none to rank 2's new address");
    let (b, c) = (at(1, &w.hubs[1]), at(2, &hub2));
    a.send(1, 2, b"two").unwrap();
    a.send(2, 2, b"two").unwrap();
    assert_eq!(&b.recv(0, 2).unwrap()[..], b"two");
    assert_eq!(&c.recv(0, 2).unwrap()[..], b"two");
    drop(a);
    // Epoch 3: the kept connection to rank 1 is broken (its reading end
    // shut); the send connects anew and arrives.
    let a = NetComm::new(
        0,
        0,
        3,
        Arc::clone(&w.hubs[0]),
        Arc::clone(&table),
        Arc::clone(&w.security),
    )
    .with_links(Arc::clone(&links));
    if let Some(Link::Unix(s)) = a.peer(1).link.as_ref() {
        s.shutdown(std::net::Shutdown::Write).unwrap();
    } else {
        panic!("the connection to rank 1 was not kept");
    }
    let b = NetComm::new(
        1,
        0,
        3,
        Arc::clone(&w.hubs[1]),
        Arc::clone(&table),
        Arc::clone(&w.security),
    );
    a.send(1, 3, b"three").unwrap();
    assert_eq!(&b.recv(0, 3).unwrap()[..], b"three");
}
