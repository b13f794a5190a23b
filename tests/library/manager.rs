//! A manager driven directly through its socket: the policy of a full
//! queue (skip, or make the submitter wait), refusal of peers that do
//! not know the job's secret, and the level-4 fence: a write of an epoch
//! (or run) the job has left is refused and writes nothing.

use crate::common;

use common::scratch;
use frame::comm::net::{Bind, Endpoint};
use frame::comm::{Comm, LocalComm};
use frame::config::WhenFull;
use frame::internals::auth::Secret;
use frame::internals::level::L4Write;
use frame::internals::manager::{Client, Manager, Options, Progress, Reply, Request, Task};
use frame::internals::topology::{Rule, Topology};
use frame::Level;
use std::collections::BTreeMap;
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

const JOB: &str = "queue";

/// Writes checkpoint 1 of a 2-rank job (ranks on nodes 0 and 1) into `dir`
/// and returns its stamp.
fn level1_checkpoint(dir: &Path) -> u64 {
    let mut cfg = common::config(dir, JOB);
    cfg.retention.keep_on_finalize = true;
    let dir2 = dir.to_path_buf();
    common::ranks(2, 1, move |comm: LocalComm| {
        let mut ckpt = frame::Checkpointer::init(&cfg, &comm).unwrap();
        let data = ckpt.protect(0, vec![comm.rank() as u64; 1000]);
        drop(data);
        ckpt.checkpoint().unwrap();
    });
    let record = dir2
        .join(JOB)
        .join("l1/ckpt-00000000000000000001/rank-000000.meta.json");
    let meta =
        frame::internals::format::Metadata::from_json(&std::fs::read(&record).unwrap(), &record)
            .unwrap();
    meta.stamp
}

/// A partner that accepts connections and never answers: a promotion to
/// level 2 then waits in the handshake until the connection is dropped.
struct Stuck {
    endpoint: Endpoint,
    release: mpsc::Sender<()>,
}

fn stuck_partner(dir: &Path) -> Stuck {
    let path = dir.join("stuck.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let (release, wait) = mpsc::channel::<()>();
    std::thread::spawn(move || {
        let Ok((conn, _)) = listener.accept() else {
            return;
        };
        let _ = wait.recv_timeout(Duration::from_secs(60));
        drop(conn);
    });
    Stuck {
        endpoint: Endpoint::Unix(path),
        release,
    }
}

fn task(id: u64, stamp: u64, partner: &Endpoint) -> Box<Task> {
    Box::new(Task {
        job_id: JOB.into(),
        id,
        stamp,
        round: 0,
        levels: vec![(Level::L2, Rule::new("partner", [("copies", 1)]))],
        node: 0,
        topology: Topology::new(vec![0, 1]).unwrap(),
        peers: BTreeMap::from([(1, partner.clone())]),
        global_dir: "unused".into(),
        l4: L4Write::Differential {
            block: 1 << 16,
            full_every: 8,
        },
        blob_lens: BTreeMap::new(),
        metrics: None,
        fence: None,
    })
}

fn start(dir: &Path, when_full: WhenFull, secret: &Secret) -> Manager {
    Manager::start(Options {
        node: 0,
        local_dir: dir.to_path_buf(),
        queue: 1,
        when_full,
        bind: Bind::Unix(dir.join("manager.sock")),
        secret: secret.clone(),
        peer_listener: None,
    })
    .unwrap()
}

#[test]
fn a_full_queue_skips_under_the_skip_policy() {
    let dir = scratch();
    let stamp = level1_checkpoint(dir.path());
    let secret = Secret::generate().unwrap();
    let manager = start(dir.path(), WhenFull::Skip, &secret);
    let stuck = stuck_partner(dir.path());
    let mut client = Client::connect(manager.endpoint(), &secret).unwrap();
    let first = client
        .call(&Request::Submit(task(1, stamp, &stuck.endpoint)))
        .unwrap();
    assert!(matches!(first, Reply::Accepted), "{first:?}");
    // The queue (one promotion) is full while the first one hangs.
    let second = client
        .call(&Request::Submit(task(1, stamp, &stuck.endpoint)))
        .unwrap();
    assert!(matches!(second, Reply::Skipped(_)), "{second:?}");
    let _ = stuck.release.send(());
    assert!(matches!(client.call(&Request::Drain).unwrap(), Reply::Ok));
    // The hung promotion failed (its partner went away), and said why in
    // words that name the partner's node.
    let status = client
        .call(&Request::Status {
            job_id: JOB.into(),
            keys: vec![(1, Level::L2)],
        })
        .unwrap();
    let Reply::Status(p) = status else {
        panic!("{status:?}")
    };
    assert!(
        matches!(&p[0], Progress::Failed(why) if why.starts_with("node 1's manager does not answer")),
        "{p:?}"
    );
}

#[test]
fn a_full_queue_makes_the_submitter_wait_under_the_wait_policy() {
    let dir = scratch();
    let stamp = level1_checkpoint(dir.path());
    let secret = Secret::generate().unwrap();
    let manager = start(dir.path(), WhenFull::Wait, &secret);
    let stuck = stuck_partner(dir.path());
    let mut client = Client::connect(manager.endpoint(), &secret).unwrap();
    let first = client
        .call(&Request::Submit(task(1, stamp, &stuck.endpoint)))
        .unwrap();
    assert!(matches!(first, Reply::Accepted), "{first:?}");
    let (tx, rx) = mpsc::channel();
    let endpoint = manager.endpoint().clone();
    let secret2 = secret.clone();
    let partner = stuck.endpoint.clone();
    std::thread::spawn(move || {
        let mut c = Client::connect(&endpoint, &secret2).unwrap();
        let _ = tx.send(c.call(&Request::Submit(task(1, stamp, &partner))).unwrap());
    });
    // While the first promotion hangs, the second submission gets no answer.
    assert!(rx.recv_timeout(Duration::from_millis(500)).is_err());
    let _ = stuck.release.send(());
    let second = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the waiting submission was answered");
    assert!(matches!(second, Reply::Accepted), "{second:?}");
    assert!(matches!(client.call(&Request::Drain).unwrap(), Reply::Ok));
}

#[test]
fn a_peer_without_the_secret_is_refused() {
    let dir = scratch();
    let secret = Secret::generate().unwrap();
    let manager = start(dir.path(), WhenFull::Wait, &secret);
    let other = Secret::generate().unwrap();
    let refused = Client::connect(manager.endpoint(), &other);
    assert!(refused.is_err());
    // The manager still serves the job.
    let mut ok = Client::connect(manager.endpoint(), &secret).unwrap();
    assert!(matches!(ok.call(&Request::Drain).unwrap(), Reply::Ok));
}

/// The status of checkpoint 1 at level 4 once the manager drained.
fn level_4_status(client: &mut Client) -> Progress {
    assert!(matches!(client.call(&Request::Drain).unwrap(), Reply::Ok));
    let status = client
        .call(&Request::Status {
            job_id: JOB.into(),
            keys: vec![(1, Level::L4)],
        })
        .unwrap();
    let Reply::Status(mut p) = status else {
        panic!("{status:?}")
    };
    p.remove(0)
}

#[test]
fn a_level_4_write_of_an_epoch_the_job_left_is_refused_and_writes_nothing() {
    use frame::internals::level::{Fence, GlobalStore};
    let dir = scratch();
    let stamp = level1_checkpoint(dir.path());
    let secret = Secret::generate().unwrap();
    let manager = start(dir.path(), WhenFull::Wait, &secret);
    let mut client = Client::connect(manager.endpoint(), &secret).unwrap();
    let global = dir.path().join("global");
    let launch = 1_000_000;
    // The job recovered into epoch 2: its ranks moved the fence.
    let store = GlobalStore::open(&global, JOB, u32::MAX).unwrap();
    store.advance_fence(Fence { launch, epoch: 2 }).unwrap();
    let manifests = || {
        common::files_under(&global)
            .into_iter()
            .filter(|p| p.to_string_lossy().ends_with(".l4.json"))
            .count()
    };
    let l4 = |fence: Fence| {
        let mut t = task(1, stamp, &Endpoint::Unix(dir.path().join("none.sock")));
        t.levels = vec![(Level::L4, Rule::new("global", []))];
        t.global_dir = global.clone();
        t.fence = Some(fence);
        t
    };
    // A manager of epoch 1 (frozen across the recovery, thawed now), and
    // one of an older run of the job: refused, nothing written.
    for old in [
        Fence { launch, epoch: 1 },
        Fence {
            launch: launch - 1,
            epoch: 9,
        },
    ] {
        let reply = client.call(&Request::Submit(l4(old))).unwrap();
        assert!(matches!(reply, Reply::Accepted), "{reply:?}");
        let p = level_4_status(&mut client);
        assert!(
            matches!(&p, Progress::Failed(why) if why.contains("belongs to epoch") && why.contains("moved on to epoch 2")),
            "{old:?}: {p:?}"
        );
        assert_eq!(manifests(), 0, "{old:?} wrote a manifest");
    }
    // The job's own epoch writes; a manager of a later epoch is not
    // refused, and leaves the fence where it is (only a run's rank 0
    // moves it).
    for new in [Fence { launch, epoch: 2 }, Fence { launch, epoch: 4 }] {
        client.call(&Request::Submit(l4(new))).unwrap();
        assert_eq!(level_4_status(&mut client), Progress::Done, "{new:?}");
    }
    assert_eq!(manifests(), 1);
    // A later run starts: its rank 0 moves the fence on, setting the
    // uncommitted checkpoint aside.
    store
        .advance_fence(Fence {
            launch: launch + 1,
            epoch: 1,
        })
        .unwrap();
    assert_eq!(manifests(), 0, "the uncommitted checkpoint stayed in place");
    let p = {
        client
            .call(&Request::Submit(l4(Fence { launch, epoch: 3 })))
            .unwrap();
        level_4_status(&mut client)
    };
    assert!(
        matches!(&p, Progress::Failed(why) if why.contains("of a later run")),
        "{p:?}"
    );
}
