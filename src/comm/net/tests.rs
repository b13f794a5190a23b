//! Multi-rank tests of the socket communicator, ranks as threads of the test.

use super::*;
use crate::comm::ReduceOp;
use std::sync::atomic::Ordering;
use std::time::Duration;

struct World {
    rt: tokio::runtime::Runtime,
    hubs: Vec<Arc<Hub>>,
    table: Arc<Vec<Endpoint>>,
    security: Arc<Security>,
    _dir: tempfile::TempDir,
}

fn world(n: usize, tcp: bool) -> World {
    world_with(n, tcp, Limits::default())
}

fn world_with(n: usize, tcp: bool, limits: Limits) -> World {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let hubs: Vec<Arc<Hub>> = (0..n).map(|_| Hub::new()).collect();
    let security = Arc::new(Security {
        secret: crate::auth::Secret::generate().unwrap(),
        limits,
        lost_after: super::LOST_AFTER,
    });
    let table = hubs
        .iter()
        .enumerate()
        .map(|(r, hub)| {
            let bind = if tcp {
                Bind::Tcp("127.0.0.1".parse().unwrap())
            } else {
                Bind::Unix(dir.path().join(format!("r{r}.sock")))
            };
            rt.block_on(listen(bind, Arc::clone(hub), Arc::clone(&security)))
                .unwrap()
        })
        .collect();
    World {
        rt,
        hubs,
        table: Arc::new(table),
        security,
        _dir: dir,
    }
}

impl World {
    fn comm(&self, rank: usize, epoch: u64) -> NetComm {
        NetComm::new(
            rank,
            rank as u32 / 2,
            epoch,
            Arc::clone(&self.hubs[rank]),
            Arc::clone(&self.table),
            Arc::clone(&self.security),
        )
    }

    /// Runs `f` on every rank (one thread each) in `epoch`.
    fn run<T: Send>(&self, epoch: u64, f: impl Fn(NetComm) -> T + Sync) -> Vec<T> {
        let _deadline = crate::testing::Deadline::new(Duration::from_secs(60));
        let _guard = self.rt.enter();
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..self.hubs.len())
                .map(|r| {
                    let comm = self.comm(r, epoch);
                    let f = &f;
                    s.spawn(move || f(comm))
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        })
    }
}

#[test]
fn collectives_work_over_unix_and_tcp_sockets() {
    for tcp in [false, true] {
        let w = world(5, tcp);
        let out = w.run(1, |c| {
            let mut v = [c.rank() as u64 + 1];
            c.all_reduce_u64(&mut v, ReduceOp::Sum).unwrap();
            let g = c.all_gather(&[c.rank() as u8]).unwrap();
            let mut b = if c.rank() == 2 {
                b"from two".to_vec()
            } else {
                Vec::new()
            };
            c.broadcast(&mut b, 2).unwrap();
            c.barrier().unwrap();
            (v[0], g.iter().map(|x| x[0]).collect::<Vec<_>>(), b)
        });
        for (sum, gathered, b) in out {
            assert_eq!(sum, 15);
            assert_eq!(gathered, vec![0, 1, 2, 3, 4]);
            assert_eq!(b, b"from two");
        }
    }
}

#[test]
fn large_messages_arrive_intact() {
    let w = world(2, false);
    let big: Vec<u8> = (0..(16 << 20)).map(|i: u32| (i % 251) as u8).collect();
    let out = w.run(1, |c| {
        if c.rank() == 0 {
            c.send(1, 9, &big).unwrap();
            c.recv(1, 10).unwrap().len()
        } else {
            let got = c.recv(0, 9).unwrap();
            assert!(got == big);
            c.send(0, 10, &got).unwrap();
            got.len()
        }
    });
    assert_eq!(out, vec![16 << 20, 16 << 20]);
}

#[test]
fn an_interrupt_wakes_blocked_calls_and_stops_new_ones() {
    let w = world(2, false);
    let hub = Arc::clone(&w.hubs[1]);
    let out = w.run(1, |c| {
        if c.rank() == 1 {
            // Blocks until the interrupt below.
            let e = c.recv(0, 1).unwrap_err();
            let s = c.send(0, 1, b"x").unwrap_err();
            (e.to_string(), s.to_string())
        } else {
            // Interrupt once rank 1's receive went to sleep (with a deadline).
            let until = std::time::Instant::now() + Duration::from_secs(30);
            while hub.sleepers.load(Ordering::Acquire) == 0 && std::time::Instant::now() < until {
                std::thread::yield_now();
            }
            assert!(
                hub.sleepers.load(Ordering::Acquire) > 0,
                "rank 1 never blocked"
            );
            hub.interrupt(2);
            (String::new(), String::new())
        }
    });
    assert_eq!(out[1].0, "interrupted by recovery (new epoch 2)");
    assert_eq!(out[1].1, "interrupted by recovery (new epoch 2)");
}

#[test]
fn messages_of_an_old_epoch_are_never_delivered_in_a_new_one() {
    let w = world(2, false);
    // Epoch 1: rank 0 sends, rank 1 never receives it.
    w.run(1, |c| {
        if c.rank() == 0 {
            c.send(1, 7, b"stale").unwrap();
        }
    });
    // Make sure the stale frame reached rank 1's hub before the epoch changes.
    w.run(1, |c| c.barrier().unwrap());
    w.hubs[1].interrupt(2);
    // Epoch 2: the same tag carries new content.
    let out = w.run(2, |c| {
        if c.rank() == 0 {
            c.send(1, 7, b"fresh").unwrap();
            Vec::new()
        } else {
            c.recv(0, 7).unwrap().to_vec()
        }
    });
    assert_eq!(out[1], b"fresh");
}

#[test]
fn messages_from_a_newer_epoch_wait_for_it() {
    let w = world(2, false);
    // Rank 0 already entered epoch 3 and sends; rank 1 is still in epoch 2.
    let _c1 = w.comm(1, 2);
    {
        let _g = w.rt.enter();
        w.comm(0, 3).send(1, 4, b"early").unwrap();
    }
    // Wait (with a deadline) until the frame reached rank 1's hub.
    let hub = &w.hubs[1];
    let state = hub.lock();
    let (state, timeout) = hub
        .ready
        .wait_timeout_while(state, Duration::from_secs(30), |s| s.queue.is_empty())
        .unwrap();
    assert!(!timeout.timed_out(), "the frame never arrived");
    drop(state);
    // Rank 1 enters epoch 3 and finds it.
    let got = w.comm(1, 3).recv(0, 4).unwrap();
    assert_eq!(&got[..], b"early");
}

#[test]
fn a_reader_stops_at_its_queue_cap_and_resumes_as_messages_are_taken() {
    const MSG: usize = 16 << 10;
    let limits = Limits {
        max_message: MSG as u64,
        max_queued: 64 << 10,
    };
    let w = world_with(2, false, limits);
    let _deadline = crate::testing::Deadline::new(Duration::from_secs(60));
    let _guard = w.rt.enter();
    let (a, b) = (w.comm(0, 1), w.comm(1, 1));
    let hub = Arc::clone(&w.hubs[1]);
    std::thread::scope(|s| {
        s.spawn(move || {
            for i in 0..64u8 {
                a.send(1, 7, &vec![i; MSG]).unwrap();
            }
            // Longer than the cap allows: refused before it is sent.
            assert!(matches!(
                a.send(1, 7, &vec![0; MSG + 1]),
                Err(CommError::Unsupported(_))
            ));
        });
        // Wait until the reader filled its budget, then check it stopped there.
        let until = std::time::Instant::now() + Duration::from_secs(30);
        while hub.queued_bytes() < (64 << 10) - MSG && std::time::Instant::now() < until {
            std::thread::yield_now();
        }
        let queued = hub.queued_bytes();
        assert!(
            queued >= (64 << 10) - MSG,
            "the reader never filled its queue"
        );
        assert!(queued <= 64 << 10, "{queued} bytes queued, cap 64 KiB");
        for i in 0..64u8 {
            let m = b.recv(0, 7).unwrap();
            assert!(m.len() == MSG && m.iter().all(|x| *x == i), "message {i}");
        }
    });
}

#[test]
fn a_peer_without_the_secret_cannot_connect() {
    for tcp in [false, true] {
        let w = world(2, tcp);
        let _guard = w.rt.enter();
        let stranger = Security {
            secret: crate::auth::Secret::generate().unwrap(),
            ..(*w.security).clone()
        };
        assert!(Link::connect(&w.table[1], &stranger).is_err(), "tcp: {tcp}");
        assert!(
            Link::connect(&w.table[1], &w.security).is_ok(),
            "tcp: {tcp}"
        );
        // The genuine peer still gets through.
        let (a, b) = (w.comm(0, 1), w.comm(1, 1));
        a.send(1, 7, b"genuine").unwrap();
        assert_eq!(&b.recv(0, 7).unwrap()[..], b"genuine");
        assert_eq!(w.hubs[1].queued_bytes(), 0);
    }
}

/// Rank 0 sends three logged messages; rank 1 takes the first, then gets
/// all three again (a replay): its hub drops the copies, and the next new
/// message comes after the three, not a copy.
#[test]
fn a_logging_communicator_numbers_its_messages_and_receivers_drop_copies() {
    let w = world(2, false);
    let _guard = w.rt.enter();
    let _deadline = crate::testing::Deadline::new(Duration::from_secs(60));
    let a = w.comm(0, 1).with_journal(1 << 20);
    let b = w.comm(1, 1).with_journal(1 << 20);
    for m in ["one", "two", "three"] {
        a.send(1, 5, m.as_bytes()).unwrap();
    }
    assert_eq!(&b.recv(0, 5).unwrap()[..], b"one");
    assert_eq!(a.replay_to(1, 0).unwrap().map(|r| r.0), Ok(3));
    a.send(1, 5, b"four").unwrap();
    for m in ["two", "three", "four"] {
        assert_eq!(&b.recv(0, 5).unwrap()[..], m.as_bytes());
    }
    assert_eq!(a.journal_bytes(), 15 + 4 * journal::ENTRY_COST);
    assert_eq!(a.message_counts().unwrap().sent, [0, 4]);
    assert_eq!(b.message_counts().unwrap().received, [4, 0]);
    // Without a log, nothing is numbered or kept.
    let plain = w.comm(0, 1);
    assert_eq!((plain.message_counts(), plain.journal_bytes()), (None, 0));
}

/// Rank 1 restores a checkpoint taken after one exchange, dies after the
/// next, and its replacement (a new process: a new hub and address) is
/// fed rank 0's messages since the checkpoint, while what it sends again
/// never reaches rank 0 twice.
#[test]
fn a_replacement_gets_the_messages_sent_since_its_checkpoint_and_none_twice() {
    let w = world(2, false);
    let _guard = w.rt.enter();
    let _deadline = crate::testing::Deadline::new(Duration::from_secs(60));
    let a = w.comm(0, 1).with_journal(1 << 20);
    let b = w.comm(1, 1).with_journal(1 << 20);
    a.send(1, 1, b"m1").unwrap();
    assert_eq!(&b.recv(0, 1).unwrap()[..], b"m1");
    b.send(0, 2, b"r1").unwrap();
    assert_eq!(&a.recv(1, 2).unwrap()[..], b"r1");
    // The checkpoint: rank 1 saves where it stands, both commit.
    let saved = b.message_counts().unwrap();
    a.note_committed(Some(1));
    b.note_committed(Some(1));
    a.send(1, 1, b"m2").unwrap();
    a.send(1, 1, b"m3").unwrap();
    assert_eq!(&b.recv(0, 1).unwrap()[..], b"m2");
    b.send(0, 2, b"r2").unwrap();
    assert_eq!(&a.recv(1, 2).unwrap()[..], b"r2");
    drop(b);
    // The replacement, restored from checkpoint 1.
    let hub = Hub::new();
    let dir = tempfile::tempdir().unwrap();
    let at =
        w.rt.block_on(listen(
            Bind::Unix(dir.path().join("again.sock")),
            Arc::clone(&hub),
            Arc::clone(&w.security),
        ))
        .unwrap();
    let mut table = (*w.table).clone();
    table[1] = at.clone();
    let again =
        NetComm::new(1, 0, 1, hub, Arc::new(table), Arc::clone(&w.security)).with_journal(1 << 20);
    again.resume_messages(&saved);
    a.replace_peer(1, at).unwrap();
    assert!(matches!(
        a.replay_to(1, 0).unwrap(),
        Err(Unreplayable::BeforeWindow {
            after: 0,
            kept_after: 1,
            window: 1,
            ..
        })
    ));
    assert_eq!(
        a.replay_to(1, saved.received[0]).unwrap().map(|r| r.0),
        Ok(2)
    );
    // It recomputes: gets m2, sends r2 again (dropped), then goes on.
    assert_eq!(&again.recv(0, 1).unwrap()[..], b"m2");
    again.send(0, 2, b"r2").unwrap();
    assert_eq!(&again.recv(0, 1).unwrap()[..], b"m3");
    again.send(0, 2, b"r3").unwrap();
    assert_eq!(&a.recv(1, 2).unwrap()[..], b"r3");
}

#[test]
fn a_window_that_outgrew_its_log_says_so_instead_of_replaying() {
    let w = world(2, false);
    let _guard = w.rt.enter();
    let _deadline = crate::testing::Deadline::new(Duration::from_secs(60));
    let limit = 8 + journal::ENTRY_COST;
    let a = w.comm(0, 1).with_journal(limit);
    a.send(1, 1, &[0; 6]).unwrap();
    a.send(1, 1, &[0; 6]).unwrap();
    let err = a.replay_to(1, 0).unwrap().unwrap_err();
    assert_eq!(err, Unreplayable::Overflowed { window: 0, limit });
    a.note_committed(Some(3));
    a.send(1, 1, &[0; 6]).unwrap();
    assert_eq!(a.replay_to(1, 2).unwrap().map(|r| r.0), Ok(1));
}

/// A checkpoint's counts only describe the messages a rank received if
/// it received each sender's in order: not while an earlier one waits.
#[test]
fn counts_are_refused_while_an_earlier_message_waits_behind_a_later_one() {
    let w = world(2, false);
    let _guard = w.rt.enter();
    let _deadline = crate::testing::Deadline::new(Duration::from_secs(60));
    let a = w.comm(0, 1).with_journal(1 << 20);
    let b = w.comm(1, 1).with_journal(1 << 20);
    a.send(1, 1, b"first").unwrap();
    a.send(1, 2, b"second").unwrap();
    assert_eq!(&b.recv(0, 2).unwrap()[..], b"second");
    assert_eq!(b.message_counts(), None);
    assert_eq!(&b.recv(0, 1).unwrap()[..], b"first");
    assert_eq!(b.message_counts().unwrap().received, [2, 0]);
}

/// Rank 1 dies (its process, listener and all, goes away) after a
/// checkpoint; rank 0 goes on sending to it (into its log only) and then
/// blocks on a message from it. The replacement only asks: rank 0 serves
/// the request inside its blocked receive, with the checkpoint's own
/// commit round, and gets its answer.
#[test]
fn a_blocked_survivor_serves_a_replacements_request_with_what_it_sent_the_dead_rank() {
    let w = world(1, false);
    let _guard = w.rt.enter();
    let _deadline = crate::testing::Deadline::new(Duration::from_secs(60));
    let dir = tempfile::tempdir().unwrap();
    let process = |name: &str| {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let hub = Hub::new();
        let at = rt
            .block_on(listen(
                Bind::Unix(dir.path().join(name)),
                Arc::clone(&hub),
                Arc::clone(&w.security),
            ))
            .unwrap();
        (rt, hub, at)
    };
    let (rt1, hub1, at1) = process("one.sock");
    let table = Arc::new(vec![w.table[0].clone(), at1.clone()]);
    let comm = |rank: usize, hub: &Arc<Hub>, table: &Arc<Vec<Endpoint>>| {
        NetComm::new(
            rank,
            0,
            1,
            Arc::clone(hub),
            Arc::clone(table),
            Arc::clone(&w.security),
        )
        .with_journal(1 << 20)
    };
    let a = comm(0, &w.hubs[0], &table);
    let b = comm(1, &hub1, &table).with_own_endpoint(at1);
    // The checkpoint: each marks its counts, then a commit round.
    a.message_counts().unwrap();
    let saved = b.message_counts().unwrap();
    a.send(1, 9, b"commit").unwrap();
    assert_eq!(&b.recv(0, 9).unwrap()[..], b"commit");
    a.note_committed(Some(1));
    b.note_committed(Some(1));
    a.send(1, 1, b"m1").unwrap();
    assert_eq!(&b.recv(0, 1).unwrap()[..], b"m1");
    // Rank 1's process dies.
    drop(b);
    rt1.shutdown_background();
    drop(hub1);
    // Its connection broke: the send only goes to the log.
    a.send(1, 1, b"m2").unwrap();
    let (rt2, hub2, at2) = process("two.sock");
    std::thread::scope(|s| {
        let waiting = s.spawn(|| a.recv(1, 2).map(|m| m.to_vec()));
        let mut again_table = (*table).clone();
        again_table[1] = at2.clone();
        let again = comm(1, &hub2, &Arc::new(again_table)).with_own_endpoint(at2);
        again.resume_messages(&saved);
        for (tag, m) in [(9, "commit"), (1, "m1"), (1, "m2")] {
            assert_eq!(&again.recv(0, tag).unwrap()[..], m.as_bytes());
        }
        again.send(0, 2, b"answer").unwrap();
        assert_eq!(waiting.join().unwrap().unwrap(), b"answer");
        // From now on rank 0 reaches the replacement directly.
        a.send(1, 1, b"m3").unwrap();
        assert_eq!(&again.recv(0, 1).unwrap()[..], b"m3");
    });
    drop(rt2);
}

/// A request the log cannot serve goes to the fallback, named.
#[test]
fn a_request_the_log_cannot_serve_goes_to_the_fallback() {
    let w = world(2, false);
    let _guard = w.rt.enter();
    let _deadline = crate::testing::Deadline::new(Duration::from_secs(60));
    let told: Arc<Mutex<Vec<String>>> = Arc::default();
    let (sink, hub) = (Arc::clone(&told), Arc::clone(&w.hubs[0]));
    // The runtime's part: a global recovery starts.
    let a = w
        .comm(0, 1)
        .with_journal(8 + journal::ENTRY_COST)
        .with_fallback(Arc::new(move |why: &str| {
            sink.lock().unwrap().push(why.to_string());
            hub.interrupt(2);
        }));
    a.send(1, 1, &[0; 6]).unwrap();
    a.send(1, 1, &[0; 6]).unwrap();
    let b = w
        .comm(1, 1)
        .with_journal(1 << 20)
        .with_own_endpoint(w.table[1].clone());
    b.resume_messages(&MessageCounts {
        window: 0,
        sent: vec![0, 0],
        received: vec![0, 0],
    });
    let err = a.recv(1, 1).unwrap_err();
    assert!(matches!(err, CommError::Interrupted { epoch: 2 }), "{err}");
    let told = told.lock().unwrap();
    assert_eq!(told.len(), 1, "{told:?}");
    assert!(
        told[0].contains("rank 1's replacement") && told[0].contains("limit"),
        "{}",
        told[0]
    );
}

/// A rank whose program finished (it makes no more calls) still serves a
/// replacement's request while it waits for the job's end.
#[test]
fn a_finished_rank_serves_a_request_while_it_waits() {
    let w = world(2, false);
    let _guard = w.rt.enter();
    let _deadline = crate::testing::Deadline::new(Duration::from_secs(60));
    let a = w.comm(0, 1).with_journal(1 << 20);
    a.send(1, 1, b"last words").unwrap();
    let b = w
        .comm(1, 1)
        .with_journal(1 << 20)
        .with_own_endpoint(w.table[1].clone());
    std::thread::scope(|s| {
        s.spawn(|| {
            b.resume_messages(&MessageCounts {
                window: 0,
                sent: vec![0, 0],
                received: vec![0, 0],
            })
        });
        // The wait ends when the request arrives, and serves it.
        a.serve_requests_within(Duration::from_secs(30)).unwrap();
        assert!(w.hubs[0].lock().requests.is_empty());
    });
    // The original and its replay: the hub keeps one.
    assert_eq!(&b.recv(0, 1).unwrap()[..], b"last words");
    assert_eq!(w.hubs[1].queued_bytes(), 0);
}

/// A program cannot send with the tag of replacements' requests.
#[test]
fn the_request_tag_is_refused_to_programs() {
    let w = world(2, false);
    let _guard = w.rt.enter();
    let a = w.comm(0, 1).with_journal(1 << 20);
    let err = a.send_tagged(1, u64::MAX, b"x").unwrap_err().to_string();
    assert!(err.contains("reserved by frame"), "{err}");
}

#[test]
fn a_receive_from_a_peer_the_network_lost_reports_it_once_and_waits_for_the_recovery() {
    let _deadline = crate::testing::Deadline::new(Duration::from_secs(60));
    let w = world(2, true);
    let _guard = w.rt.enter();
    let (tx, reports) = std::sync::mpsc::channel();
    let tx = Mutex::new(tx);
    let comm = w.comm(0, 1).with_lost_peers(Arc::new(move |peer| {
        let _ = tx.lock().unwrap().send(peer);
    }));
    let hub = Arc::clone(&w.hubs[0]);
    std::thread::scope(|s| {
        let waiting = s.spawn(|| comm.recv_tagged(1, 7));
        // A lost connection of an older epoch is no news.
        hub.mark_lost(1, 0);
        hub.mark_lost(1, 1);
        assert_eq!(reports.recv_timeout(Duration::from_secs(30)), Ok(1));
        hub.interrupt(2);
        assert!(matches!(
            waiting.join().unwrap(),
            Err(CommError::Interrupted { epoch: 2 })
        ));
    });
    // Reported once, however often it is found lost.
    comm.report_lost(1);
    assert!(reports.try_recv().is_err());
}

#[test]
fn a_new_epoch_forgets_the_peers_lost_before() {
    let hub = Hub::new();
    hub.begin_epoch(1);
    hub.mark_lost(3, 1);
    assert!(hub.lock().lost.contains(&(3, 1)));
    hub.begin_epoch(2);
    assert!(hub.lock().lost.is_empty());
    // A late mark of the old epoch is dropped.
    hub.mark_lost(3, 1);
    assert!(hub.lock().lost.is_empty());
}

mod links;
mod recovery_watch;
