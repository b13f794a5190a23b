//! The state between `SCR_Init` and `SCR_Finalize`, kept by the thread
//! that called `SCR_Init` (SCR programs make every call from their main
//! thread), and the parameters `SCR_Config` set before it.
//!
//! The checkpointer borrows the session's communicator, which is leaked
//! for the session's lifetime and freed by [`Session::close`] once the
//! checkpointer is gone.

use crate::status::Failure;
use crate::table::Table;
use frame_core::comm::mpi::MpiComm;
use frame_core::comm::Comm;
use frame_core::config::scr::{ScrConf, Setting};
use frame_core::config::Config;
use frame_core::Checkpointer;
use frame_interface::entry::{self, Abandon};
use std::cell::RefCell;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What the program is doing between calls.
pub(crate) enum Phase {
    /// Neither writing a dataset nor reading a checkpoint back.
    Idle,
    /// Between `SCR_Start_output` and `SCR_Complete_output`.
    Output(Output),
    /// Between `SCR_Start_restart` and `SCR_Complete_restart`.
    Restart,
}

/// A dataset being written.
pub(crate) struct Output {
    /// Its name, flags and files so far.
    pub table: Table,
    /// Whether it is one of frame's checkpoints (`SCR_FLAG_CHECKPOINT`).
    pub checkpoint: bool,
    /// Where each file of the table is written (on level-1 storage).
    pub paths: Vec<std::path::PathBuf>,
    /// When `SCR_Start_output` began it.
    pub started: Instant,
}

/// The checkpoint read back by the restart.
pub(crate) struct Restored {
    /// frame's checkpoint id.
    pub id: u64,
    /// This rank's table of it.
    pub table: Table,
}

/// One program's libscr.
pub(crate) struct Session {
    pub comm: &'static MpiComm,
    /// `None` only after making it again failed (see
    /// [`restart_from`](Self::restart_from)).
    pub ckpt: Option<Checkpointer<'static>>,
    /// frame's configuration the checkpointer was made with (before a
    /// chosen restart's `recovery.restart_from`).
    pub config: Config,
    pub conf: ScrConf,
    /// The program's working directory at `SCR_Init`.
    pub cwd: PathBuf,
    pub phase: Phase,
    /// The checkpoint restored (`SCR_Have_restart` restores it).
    pub restored: Option<Restored>,
    /// No restart is offered: the one restored was completed, a new
    /// checkpoint superseded it, or none is left to go back to.
    pub exhausted: bool,
    /// Calls of `SCR_Need_checkpoint`.
    pub need_calls: u64,
    /// When the last checkpoint ended (or `SCR_Init` returned).
    pub last_end: Instant,
    /// Time spent writing checkpoints, and how many this run wrote.
    pub spent: Duration,
    pub checkpoints: u64,
    /// Datasets started (names `SCR_Start_output(NULL, ...)` makes up).
    pub outputs: u64,
    /// The allocation's end, when the batch system says.
    pub ends_at: Option<std::time::SystemTime>,
    /// The epoch of frame's resilient function it began in, under
    /// `frame_run_ulfm` (see [`frame_interface::entry`]).
    pub epoch: Option<u64>,
}

thread_local! {
    static SESSION: RefCell<Option<Session>> = const { RefCell::new(None) };
}

/// The parameters `SCR_Config` set, in order (the first of a key wins
/// over later ones, as SCR's lowest-ranking source).
static SETTINGS: Mutex<Vec<Setting>> = Mutex::new(Vec::new());

/// The parameters set by `SCR_Config`.
pub(crate) fn settings() -> std::sync::MutexGuard<'static, Vec<Setting>> {
    SETTINGS.lock().unwrap_or_else(|p| p.into_inner())
}

/// Whether `SCR_Init` was called (and `SCR_Finalize` not yet) in this
/// entry of frame's resilient function, if one runs.
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
    init: "SCR_Init",
    finalize: "SCR_Finalize",
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

    /// Whether `local` holds on every rank. Collective.
    pub fn all(&self, local: bool) -> Result<bool, Failure> {
        frame_interface::all(self.comm, local)
    }

    /// Rank 0's `value`, on every rank. Collective.
    pub fn rank_0s(&self, value: u64) -> Result<u64, Failure> {
        frame_interface::rank_0s(self.comm, value)
    }

    /// Agrees on a step every rank took. Collective.
    pub fn agree(&self, local: Result<(), String>) -> Result<(), Failure> {
        frame_interface::agree(self.comm, local)
    }

    /// Makes the checkpointer again, to restore checkpoint `id` (a chosen
    /// or older one), or the newest older one every rank can restore, when
    /// the program asks for it. When none is left, the checkpointer is
    /// made as at `SCR_Init` and no restart is offered. Collective.
    pub fn restart_from(&mut self, id: u64) -> Result<(), Failure> {
        let mut cfg = self.config.clone();
        cfg.recovery.restart_from = id;
        cfg.mark_set_by_program("recovery.restart_from");
        self.restored = None;
        self.exhausted = false;
        if let Some(c) = self.ckpt.as_mut() {
            c.wait_for_promotions()?;
        }
        // The old one lets go of its node's manager before the new one
        // starts another.
        self.ckpt = None;
        let made = Checkpointer::init(&cfg, self.comm);
        // init agrees on its outcome: every rank takes the same branch.
        match made {
            Ok(c) => self.ckpt = Some(c),
            Err(e) => {
                if self.rank() == 0 {
                    crate::say::warning(format_args!(
                        "no checkpoint from {id} down can be restored ({e}); the program starts afresh"
                    ));
                }
                self.ckpt = Some(Checkpointer::init(&self.config, self.comm)?);
                self.exhausted = true;
            }
        }
        Ok(())
    }

    /// Agrees that every rank gave the same `name` (checked, or why not)
    /// to call `what`, before the call's other collectives: an error on
    /// any rank, or names that differ, fail the call on every rank.
    /// Collective.
    pub fn same_name(&self, name: &Result<String, Failure>, what: &str) -> Result<(), Failure> {
        self.agree(name.as_ref().map(|_| ()).map_err(|f| f.message.clone()))?;
        let name = name.as_deref().unwrap_or_default();
        let crc = u64::from(crc32fast::hash(name.as_bytes()));
        let mut seen = [crc, u64::from(u32::MAX) - crc];
        self.comm
            .all_reduce_u64(&mut seen, frame_core::comm::ReduceOp::Max)?;
        if seen[0] != u64::from(u32::MAX) - seen[1] {
            return Err(Failure::shared(format!(
                "the ranks gave {what} different names (rank {} gave {name:?})",
                self.rank()
            )));
        }
        Ok(())
    }

    /// Fails unless neither a dataset nor a restart is in progress.
    pub fn idle(&self, call: &str) -> Result<(), Failure> {
        match self.phase {
            Phase::Idle => Ok(()),
            Phase::Output(_) => Err(Failure::new(format!(
                "{call} while a dataset is being written (call SCR_Complete_output first)"
            ))),
            Phase::Restart => Err(Failure::new(format!(
                "{call} during a restart (call SCR_Complete_restart first)"
            ))),
        }
    }

    /// The checkpointer.
    pub fn ckpt(&mut self) -> Result<&mut Checkpointer<'static>, Failure> {
        self.ckpt.as_mut().ok_or_else(|| {
            Failure::new("libscr could not go back to an older checkpoint (see the error before); call SCR_Finalize")
        })
    }

    /// Ends the session: waits for the promotions in flight and keeps the
    /// checkpoints for the next run, then frees the communicator. With
    /// level 4 on (`SCR_FLUSH` > 0), the newest checkpoint written or
    /// restored goes to the prefix (unless it is there already) and the
    /// nodes' copies are removed, as SCR flushes it for the next
    /// allocation; otherwise every checkpoint stays where it is.
    pub fn close(self) -> Result<(), Failure> {
        let Session { comm, ckpt, .. } = self;
        // Only a checkpointer that wrote or restored one has a newest
        // checkpoint to keep: without, finalize_to_global removes all.
        let ended = match ckpt {
            Some(c) if c.stats().last_id.is_some() && !c.config().l4.interval.is_zero() => {
                c.finalize_to_global().map(|_| ())
            }
            Some(c) => c.finalize(),
            None => Ok(()),
        };
        // SAFETY: `comm` was leaked from a Box by SCR_Init, and the
        // checkpointer that borrowed it is gone.
        drop(unsafe { Box::from_raw(std::ptr::from_ref(comm).cast_mut()) });
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
        let Session { comm, ckpt, .. } = self;
        drop(ckpt);
        #[cfg(feature = "ulfm")]
        comm.revoke();
        // SAFETY: `comm` was leaked from a Box by SCR_Init, and the
        // checkpointer that borrowed it is gone.
        drop(unsafe { Box::from_raw(std::ptr::from_ref(comm).cast_mut()) });
    }
}
