//! The state between `FTI_Init` and `FTI_Finalize`, kept by the thread that
//! called `FTI_Init` (FTI programs make every call from their main thread).
//!
//! The checkpointer borrows the session's communicator, which is leaked for
//! the session's lifetime and freed by [`Session::close`] after the
//! checkpointer is gone.

use crate::status::Failure;
use crate::types::Layout;
use frame_core::comm::mpi::MpiComm;
use frame_core::config::fti::FtiFile;
use frame_core::Checkpointer;
use frame_core::Level;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::os::raw::c_int;

/// A protected variable, as the program described it.
/// A checkpoint being written variable by variable (see [`crate::icp`]).
pub(crate) struct Icp {
    /// `None` when the program did not activate it (the calls do nothing).
    pub level: Option<Level>,
    /// Copies of the variables added so far, as 8-byte words so that any
    /// element type is aligned in them.
    pub saved: BTreeMap<u32, Vec<u64>>,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Var {
    pub ptr: *mut u8,
    /// Elements of the program's type.
    pub count: usize,
    pub layout: Layout,
}

impl Var {
    /// Its size in bytes.
    pub fn bytes(&self) -> usize {
        self.count * self.layout.width
    }
}

/// FTI's restart keys of the session, written back into the
/// configuration file by the program's rank 0 (see [`crate::restart`]).
pub(crate) struct Keys {
    /// The configuration file.
    pub path: std::path::PathBuf,
    /// The execution this run belongs to.
    pub exec_id: String,
    /// Whether this rank writes the file.
    pub writer: bool,
    /// `failure = 1` was written after this session's first checkpoint.
    pub marked: bool,
}

impl Keys {
    /// Writes `failure` and the execution id (on the writing rank). A file
    /// that cannot be written is a warning, as in FTI: the run goes on.
    pub fn write(&self, failure: u8) {
        if !self.writer {
            return;
        }
        if let Err(e) = crate::restart::write_keys(&self.path, failure, &self.exec_id) {
            crate::say::warning(format_args!(
                "{}: could not write [restart] failure = {failure} and exec_id: {e}",
                self.path.display()
            ));
        }
    }

    /// After a checkpoint: `failure = 1`, once per session, so that the
    /// same command run again restarts.
    pub fn checkpointed(&mut self) {
        if !self.marked {
            self.write(1);
            self.marked = true;
        }
    }
}

/// Where this rank sits, learnt by `FTI_Init`.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Seat {
    /// This rank in the communicator given to `FTI_Init`.
    pub world_rank: c_int,
    /// That communicator's size.
    pub world_size: c_int,
    /// This rank's node.
    pub node: c_int,
    /// This rank's place among its node's ranks.
    pub node_rank: c_int,
}

/// An initialised FTI session.
pub(crate) struct Session {
    pub comm: &'static MpiComm,
    pub ckpt: Checkpointer<'static>,
    pub fti: FtiFile,
    pub vars: BTreeMap<u32, Var>,
    /// FTI's recovery flag: a checkpoint waits to be recovered.
    pub recovering: bool,
    /// `FTI_RecoverVarInit` was called and not yet finalized.
    pub recovering_vars: bool,
    pub icp: Option<Icp>,
    /// With `head = 1`, the tie to the node's manager rank, let go when
    /// the program finalizes.
    pub program: Option<frame_core::dedicated::Program>,
    /// FTI's restart keys.
    pub keys: Keys,
    /// Variable ids handed out by name (`FTI_setIDFromString`).
    pub names: BTreeMap<String, u32>,
    /// Files moved to the global file system (`FTI_SendFile`).
    pub staging: crate::stage::Staging,
    /// Global data sets and the variables' subsets of them.
    pub datasets: crate::subsets::Datasets,
    /// On a restart from a single file (`[restart] failure = 3`), the file.
    pub single_recovery: Option<crate::single_file::Found>,
    /// Where this rank sits among the ranks and nodes.
    pub seat: Seat,
    /// The id and level (1 to 4) of this run's last `FTI_Checkpoint`.
    pub last_checkpoint: Option<(c_int, c_int)>,
}

thread_local! {
    static SESSION: RefCell<Option<Session>> = const { RefCell::new(None) };
}

/// Runs `f` on this thread's session.
pub(crate) fn with<R>(f: impl FnOnce(&mut Session) -> Result<R, Failure>) -> Result<R, Failure> {
    SESSION.with(|s| match s.borrow_mut().as_mut() {
        Some(session) => f(session),
        None => Err(Failure::new(
            "FTI is not initialised on this thread (call FTI_Init first)",
        )),
    })
}

/// Whether a session is open on this thread.
pub(crate) fn is_open() -> bool {
    SESSION.with(|s| s.borrow().is_some())
}

/// Makes `session` this thread's session.
pub(crate) fn open(session: Session) {
    SESSION.with(|s| *s.borrow_mut() = Some(session));
}

/// Ends this thread's session and returns it.
pub(crate) fn take() -> Result<Session, Failure> {
    SESSION
        .with(|s| s.borrow_mut().take())
        .ok_or_else(|| Failure::new("FTI is not initialised on this thread (call FTI_Init first)"))
}

/// This process's rank, once known.
impl Session {
    /// Protects (or protects again) variable `id` in the checkpointer.
    pub fn protect(&mut self, id: u32, var: Var) -> Result<(), Failure> {
        let elements = var.layout.elements(var.count).ok_or_else(|| {
            Failure::new(format!("variable {id}: {} elements is too many", var.count))
        })?;
        // SAFETY: the program promised, by protecting it, that the memory
        // stays valid until it is protected again or FTI_Finalize.
        unsafe {
            self.ckpt
                .protect_raw(id, var.ptr, elements, var.layout.elem)
        };
        self.vars.insert(id, var);
        Ok(())
    }

    /// Whether any level above 1 that the program waits for is on.
    pub fn waits_for_levels(&self) -> bool {
        self.fti.inline.iter().any(|sync| *sync)
    }

    /// Ends the session without finalizing, for `FTI_Init` called again:
    /// the checkpointer is dropped as at a crash (its checkpoints stay for
    /// the new session to find), then the communicator is freed.
    pub fn abandon(self) {
        let Session { comm, ckpt, .. } = self;
        drop(ckpt);
        // SAFETY: `comm` was leaked from a Box by FTI_Init, and the
        // checkpointer that borrowed it is gone.
        drop(unsafe { Box::from_raw(std::ptr::from_ref(comm).cast_mut()) });
    }

    /// Finalizes the checkpointer, then frees the communicator. With
    /// `keep_last_ckpt = 1` the newest checkpoint is kept in the global
    /// directory only (written there now unless level 4 holds it), as FTI
    /// flushes it, so the next run restarts from it even where the nodes'
    /// storage was wiped; `[restart] failure` says so (2; else 0).
    pub fn close(self) -> Result<(), Failure> {
        let Session {
            comm,
            ckpt,
            program,
            fti,
            keys,
            staging,
            ..
        } = self;
        staging.close();
        // As FTI: 2 when a checkpoint was kept for the next run, else 0.
        let done = if fti.config.retention.keep_on_finalize {
            ckpt.finalize_to_global()
                .map(|kept| keys.write(if kept.is_some() { 2 } else { 0 }))
        } else {
            ckpt.finalize().map(|()| keys.write(0))
        };
        drop(program);
        // SAFETY: `comm` was leaked from a Box by FTI_Init, and the
        // checkpointer that borrowed it is gone.
        drop(unsafe { Box::from_raw(std::ptr::from_ref(comm).cast_mut()) });
        done.map_err(Failure::from)
    }
}
