//! The ranks' side of promotion against a manager that does not answer.

use super::Promotions;
use crate::auth::{Channel, Secret};
use crate::comm::net::{Endpoint, Hub, Limits, NetComm, Security};
use crate::comm::CommError;
use crate::config::Config;
use crate::error::Error;
use crate::level::Level;
use crate::manager::proto::{codec, join, split};
use crate::manager::{Link, Reply, Request};
use futures_util::{SinkExt, StreamExt};
use std::sync::{mpsc, Arc};
use std::time::Duration;

/// Long enough for anything that is not waiting out a manager.
const PATIENCE: Duration = Duration::from_secs(120);

/// A node's manager whose host froze while it held a request: it
/// authenticates, reads one request, says so on `got`, and answers it
/// (accepted) only when `answer` is sent or dropped.
fn frozen_manager(
    rt: &tokio::runtime::Runtime,
    socket: std::path::PathBuf,
    secret: Secret,
    got: mpsc::Sender<Request>,
    answer: tokio::sync::oneshot::Receiver<()>,
) {
    let listener = rt.block_on(async { tokio::net::UnixListener::bind(&socket) });
    let listener = listener.unwrap();
    rt.spawn(async move {
        let (mut stream, _) = listener.accept().await?;
        crate::auth::accept(&mut stream, &secret, Channel::Manager).await?;
        let mut conn = tokio_util::codec::Framed::new(stream, codec());
        let Some(frame) = conn.next().await else {
            return Ok(());
        };
        let (req, _) = split::<Request>(frame?)?;
        let _ = got.send(req);
        let _ = answer.await;
        conn.send(join(&Reply::Accepted, &[])).await?;
        std::io::Result::Ok(())
    });
}

/// The lowest rank of a node, asking its manager to promote a checkpoint,
/// waits for the manager's answer; a recovery that starts meanwhile (a
/// rank elsewhere died) must end the wait at once, so that the rank rolls
/// back with the others. Waiting for the manager instead (up to ten
/// minutes) outlived the runtime's patience with the rank, which killed
/// it, and the job went through a second recovery.
#[test]
fn a_rank_waiting_for_its_manager_rolls_back_when_a_recovery_starts() {
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let secret = Secret::generate().unwrap();
    let socket = dir.path().join("manager.sock");
    let (got_tx, got) = mpsc::channel();
    let (answer, held) = tokio::sync::oneshot::channel();
    frozen_manager(&rt, socket.clone(), secret.clone(), got_tx, held);

    let hub = Hub::new();
    let security = Arc::new(Security {
        secret: secret.clone(),
        limits: Limits::default(),
        lost_after: Duration::from_secs(10),
    });
    let table = Arc::new(vec![Endpoint::Unix(dir.path().join("rank0.sock"))]);
    let comm = NetComm::new(0, 0, 1, Arc::clone(&hub), table, security);
    let mut cfg = Config::default();
    cfg.job.id = "job".into();
    cfg.storage.local_dir = dir.path().to_path_buf();
    let link = Link {
        endpoint: Endpoint::Unix(socket),
        secret,
    };
    let mut promotions = Promotions::init(&cfg, &comm, Some(&link)).unwrap();
    assert!(promotions.is_leader());

    let (done_tx, done) = mpsc::channel();
    let asking = std::thread::spawn(move || {
        let asked = promotions.promote(&comm, 1, 1, 0, &[Level::L2]);
        let _ = done_tx.send(asked.map_err(|e| e.to_string()));
        // A second call does not wait for the manager either.
        promotions
            .call(&Request::Drain)
            .map(|r| r.map(|_| ()).map_err(|e| e.kind()))
    });
    let req = got
        .recv_timeout(PATIENCE)
        .expect("the manager got no request");
    assert!(matches!(req, Request::Submit(_)), "{req:?}");
    // The runtime starts a recovery into epoch 2.
    hub.interrupt(2);
    let asked = done.recv_timeout(PATIENCE);
    drop(answer);
    let again = asking.join().unwrap();
    let asked = asked.expect("the rank went on waiting for its manager after a recovery started");
    let stopped = Error::Comm(CommError::Interrupted { epoch: 2 }).to_string();
    assert_eq!(asked, Err(stopped));
    assert_eq!(again, Some(Err(std::io::ErrorKind::Interrupted)));
}
