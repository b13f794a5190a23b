//! The state between `VELOC_Init` and `VELOC_Finalize`, kept by the thread
//! that called `VELOC_Init`: the communicator (leaked for the session and
//! freed by [`Session::close`] once the checkpointer is gone), the
//! checkpointer, the program's regions, and the checkpoint or restart
//! begun.

use crate::status::Failure;
use frame_core::comm::Comm;
use frame_core::config::veloc::VelocFile;
use frame_core::config::Config;
use frame_core::{Checkpointer, RegionInfo};
use frame_interface::entry::{self, Abandon};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

/// A region the program protected: its address and size in bytes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Region {
    pub ptr: *mut u8,
    pub bytes: usize,
}

/// A checkpoint between `VELOC_Checkpoint_begin` and `_end`.
pub(crate) struct Begun {
    pub name: String,
    pub version: i64,
    /// The regions `VELOC_Checkpoint_mem` or `_selective` chose, as they
    /// were then.
    pub selection: Vec<(u32, Region)>,
    /// This rank's file, once routed.
    pub file: Option<PathBuf>,
    /// False once choosing its regions failed: ending it drops it.
    pub valid: bool,
}

/// A restart between `VELOC_Restart_begin` and `_end`.
pub(crate) struct Restarting {
    /// The regions the checkpoint holds on this rank.
    pub stored: Vec<RegionInfo>,
    /// Restored already (with the checkpoint's file), rather than region
    /// by region as the program asks.
    pub loaded: bool,
}

/// Who owns the communicator the checkpointer borrows.
pub(crate) enum Owned {
    Mpi(*mut frame_core::comm::mpi::MpiComm),
    Local(*mut frame_core::comm::LocalComm),
}

/// One program's libveloc.
pub(crate) struct Session {
    pub comm: &'static dyn Comm,
    pub owned: Owned,
    /// `None` only after making it again failed.
    pub ckpt: Option<Checkpointer<'static>>,
    /// frame's configuration the checkpointer was made with.
    pub config: Config,
    pub file: VelocFile,
    pub regions: BTreeMap<u32, Region>,
    /// The region ids in frame's registry now.
    pub in_frame: BTreeSet<u32>,
    pub begun: Option<Begun>,
    pub restarting: Option<Restarting>,
    /// Where rank 0 keeps the index of versions.
    pub index_dir: PathBuf,
    /// The epoch of frame's resilient function it began in, under
    /// `frame_run_ulfm` (see [`frame_interface::entry`]).
    pub epoch: Option<u64>,
}

thread_local! {
    static SESSION: RefCell<Option<Session>> = const { RefCell::new(None) };
}

/// Whether `VELOC_Init` was called (and `VELOC_Finalize` not yet) in
/// this entry of frame's resilient function, if one runs.
pub(crate) fn is_open() -> bool {
    SESSION.with(|s| {
        entry::forget_abandoned(s);
        s.borrow().is_some()
    })
}

/// Starts the session.
pub(crate) fn open(session: Session) {
    SESSION.with(|s| *s.borrow_mut() = Some(session));
}

/// The calls that begin and end the session.
const CALLS: entry::Calls = entry::Calls {
    init: "VELOC_Init",
    finalize: "VELOC_Finalize",
};

/// Ends the session, handing it over.
pub(crate) fn take() -> Result<Session, Failure> {
    SESSION.with(|s| entry::take(s, &CALLS))
}

/// Runs `f` on the session.
pub(crate) fn with<T>(f: impl FnOnce(&mut Session) -> Result<T, Failure>) -> Result<T, Failure> {
    SESSION.with(|s| f(&mut *entry::session(s, &CALLS)?))
}

impl Session {
    /// The program's rank.
    pub fn rank(&self) -> usize {
        self.comm.rank()
    }

    /// The checkpointer.
    pub fn ckpt(&mut self) -> Result<&mut Checkpointer<'static>, Failure> {
        self.ckpt.as_mut().ok_or_else(|| {
            Failure::new("libveloc could not go back to an older checkpoint (see the error before); call VELOC_Finalize")
        })
    }

    /// Agrees on a step every rank took. Collective.
    pub fn agree(&self, local: Result<(), String>) -> Result<(), Failure> {
        frame_interface::agree(self.comm, local)
    }

    /// Rank 0's `value`, on every rank. Collective.
    pub fn rank_0s(&self, value: u64) -> Result<u64, Failure> {
        frame_interface::rank_0s(self.comm, value)
    }

    /// Makes the checkpointer again to restore checkpoint `id`.
    /// Collective.
    pub fn restart_from(&mut self, id: u64) -> Result<(), Failure> {
        let mut cfg = self.config.clone();
        cfg.recovery.restart_from = id;
        cfg.mark_set_by_program("recovery.restart_from");
        if let Some(c) = self.ckpt.as_mut() {
            c.wait_for_promotions()?;
        }
        self.ckpt = None;
        self.in_frame.clear();
        self.ckpt = Some(Checkpointer::init(&cfg, self.comm)?);
        Ok(())
    }

    /// Ends the session: waits for the promotions in flight, keeps the
    /// checkpoints for the next run, then frees the communicator.
    pub fn close(self) -> Result<(), Failure> {
        let Session { ckpt, owned, .. } = self;
        let ended = ckpt.map_or(Ok(()), Checkpointer::finalize);
        // SAFETY: leaked from a Box by VELOC_Init; the checkpointer that
        // borrowed it is gone.
        unsafe {
            match owned {
                Owned::Mpi(p) => drop(Box::from_raw(p)),
                Owned::Local(p) => drop(Box::from_raw(p)),
            }
        }
        Ok(ended?)
    }
}

impl Abandon for Session {
    fn epoch(&self) -> Option<u64> {
        self.epoch
    }

    /// Stops the node's manager, then leaves the communicator to MPI
    /// (revoked: it spans a failed process), as frame does after a
    /// failure. The checkpoints stay: the new entry restores from them.
    fn abandon(self) {
        let Session { ckpt, owned, .. } = self;
        drop(ckpt);
        // SAFETY: leaked from a Box by VELOC_Init; the checkpointer that
        // borrowed it is gone.
        unsafe {
            match owned {
                Owned::Mpi(p) => {
                    #[cfg(feature = "ulfm")]
                    (*p).revoke();
                    drop(Box::from_raw(p));
                }
                Owned::Local(p) => drop(Box::from_raw(p)),
            }
        }
    }
}
