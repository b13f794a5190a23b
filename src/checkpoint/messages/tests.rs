use super::*;
use crate::comm::{Bytes, Comm, CommResult, LocalComm, NodeId, Rank, RuntimeLink};
use crate::config::{Config, Interval};
use crate::Checkpointer;

/// One rank whose communicator reports fixed message counts, as a logging
/// communicator does.
struct Counting {
    inner: LocalComm,
    counts: MessageCounts,
}

impl Comm for Counting {
    fn rank(&self) -> Rank {
        self.inner.rank()
    }
    fn size(&self) -> usize {
        self.inner.size()
    }
    fn node(&self) -> NodeId {
        self.inner.node()
    }
    fn send_tagged(&self, dest: Rank, tag: u64, data: &[u8]) -> CommResult<()> {
        self.inner.send_tagged(dest, tag, data)
    }
    fn recv_tagged(&self, src: Rank, tag: u64) -> CommResult<Bytes> {
        self.inner.recv_tagged(src, tag)
    }
    fn link(&self) -> &dyn RuntimeLink {
        self
    }
}

impl RuntimeLink for Counting {
    fn message_counts(&self) -> Option<MessageCounts> {
        Some(self.counts.clone())
    }
}

fn config(dir: &std::path::Path) -> Config {
    let mut cfg = Config::default();
    cfg.storage.local_dir = dir.to_path_buf();
    cfg.snapshot.interval = Interval::Calls(1);
    cfg
}

/// A checkpoint written through a logging communicator keeps its counts
/// in their own region, checksummed with the rest; a later run through a
/// communicator without a log restores the program's regions as usual.
#[test]
fn a_checkpoint_keeps_the_message_counts_beside_the_programs_regions() {
    let dir = crate::testing::scratch();
    let cfg = config(dir.path());
    let counts = MessageCounts {
        window: 3,
        sent: vec![0, 17],
        received: vec![0, 12],
    };
    let comm = Counting {
        inner: LocalComm::world(1, 1).pop().unwrap(),
        counts: counts.clone(),
    };
    let mut ckpt = Checkpointer::init(&cfg, &comm).unwrap();
    let value = ckpt.protect(0, 41u64);
    value.set(42);
    let id = ckpt.snapshot().unwrap().unwrap();
    let (file, meta) = ckpt.store.open_checkpoint(id).unwrap();
    let stored = meta.regions.iter().find(|r| r.id == REGION).unwrap();
    let mut bytes = vec![0u8; stored.count as usize];
    file.load_region(REGION, &mut bytes).unwrap();
    assert_eq!(
        serde_json::from_slice::<MessageCounts>(&bytes).unwrap(),
        counts
    );
    drop((file, ckpt));
    let plain = LocalComm::world(1, 1).pop().unwrap();
    let mut ckpt = Checkpointer::init(&cfg, &plain).unwrap();
    let value = ckpt.protect(0, 0u64);
    assert_eq!(ckpt.recover().unwrap(), id);
    assert_eq!(value.get(), 42);
}

#[test]
fn a_program_cannot_protect_the_regions_frame_keeps_for_a_logging_job() {
    let dir = crate::testing::scratch();
    let comm = Counting {
        inner: LocalComm::world(1, 1).pop().unwrap(),
        counts: MessageCounts::default(),
    };
    for reserved in RESERVED {
        let mut ckpt = Checkpointer::init(&config(dir.path()), &comm).unwrap();
        let _mine = ckpt.protect(reserved, 1u64);
        let err = ckpt.snapshot().unwrap_err().to_string();
        assert!(err.contains("reserved by frame"), "{reserved}: {err}");
    }
}
