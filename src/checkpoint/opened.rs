//! The checkpointer's phases as types: opening a job's checkpoints gives
//! either a [`Checkpointer`] ready to take checkpoints (nothing to
//! restore) or a [`Recovery`] whose only way on is to restore the agreed
//! checkpoint. A program written this way cannot checkpoint before it has
//! recovered, nor ask to recover when there is nothing to.
//!
//! ```
//! use frame::{comm::LocalComm, config::Config, Checkpointer, Opened};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let mut cfg = Config::default();
//! cfg.storage.local_dir = dir.path().to_path_buf();
//! let comm = LocalComm::world(1, 1).pop().unwrap();
//!
//! // First run: nothing to restore.
//! let Opened::Fresh(mut ckpt) = Checkpointer::open(&cfg, &comm).unwrap() else {
//!     panic!("a new job has nothing to restore");
//! };
//! let field = ckpt.protect(0, vec![1.5f64; 8]);
//! ckpt.checkpoint().unwrap();
//! field.write()[0] = 99.0;
//! drop(ckpt);
//!
//! // Second run: the same protect calls on whatever was opened, then
//! // `resume` restores when there is something to restore.
//! let mut opened = Checkpointer::open(&cfg, &comm).unwrap();
//! assert_eq!(opened.recovery_id(), Some(1));
//! let field = opened.protect(0, Vec::<f64>::new());
//! let mut ckpt = opened.resume().unwrap();
//! assert_eq!(*field.read(), vec![1.5f64; 8]);
//! ckpt.finalize().unwrap();
//! ```

use super::Checkpointer;
use crate::comm::Comm;
use crate::config::Config;
use crate::error::Result;
use crate::region::{Protected, Region, RegionId, RegionInfo};

/// What opening a job's checkpoints found (see
/// [`Checkpointer::open`]).
#[must_use = "a recovery must be completed before the program goes on"]
pub enum Opened<'c> {
    /// No checkpoint to restore: the program starts from the beginning.
    Fresh(Checkpointer<'c>),
    /// Every rank agreed on a checkpoint to restore.
    Recovery(Recovery<'c>),
}

/// A checkpoint every rank agreed to restore, not restored yet. Protect
/// the regions, then [`recover`](Self::recover) them, which gives the
/// checkpointer to go on with.
#[must_use = "the agreed checkpoint is restored by `recover`"]
pub struct Recovery<'c> {
    ckpt: Checkpointer<'c>,
}

impl<'c> Checkpointer<'c> {
    /// Opens this job's checkpoint storage and finds out, with the other
    /// ranks, whether there is a checkpoint to restore. Collective.
    ///
    /// Fails on every rank if any rank cannot use its storage, or if
    /// checkpoints exist but no single one can be restored by all ranks.
    /// [`init`](Self::init) opens the same way and leaves the phase to
    /// [`recovering`](Self::recovering).
    pub fn open(cfg: &Config, comm: &'c dyn Comm) -> Result<Opened<'c>> {
        Self::open_with_manager(cfg, comm, None)
    }

    /// Like [`open`](Self::open), with each node's manager already
    /// running where `link` says (given on every rank, or on none).
    /// Collective.
    pub fn open_with_manager(
        cfg: &Config,
        comm: &'c dyn Comm,
        link: Option<crate::manager::Link>,
    ) -> Result<Opened<'c>> {
        Self::init_with_manager(cfg, comm, link).map(Opened::from)
    }
}

impl<'c> From<Checkpointer<'c>> for Opened<'c> {
    /// Sorts a checkpointer opened by [`Checkpointer::init`] by its phase.
    fn from(ckpt: Checkpointer<'c>) -> Self {
        match ckpt.recovering() {
            true => Opened::Recovery(Recovery { ckpt }),
            false => Opened::Fresh(ckpt),
        }
    }
}

impl<'c> Opened<'c> {
    /// The id of the checkpoint to restore, if any.
    pub fn recovery_id(&self) -> Option<u64> {
        match self {
            Opened::Fresh(_) => None,
            Opened::Recovery(r) => Some(r.id()),
        }
    }

    fn inner(&mut self) -> &mut Checkpointer<'c> {
        match self {
            Opened::Fresh(ckpt) | Opened::Recovery(Recovery { ckpt }) => ckpt,
        }
    }

    /// Protects `value` under `id`, whichever was opened (see
    /// [`Checkpointer::protect`]): a program protects its regions the same
    /// way in both cases, then calls [`resume`](Self::resume).
    pub fn protect<R: Region>(&mut self, id: RegionId, value: R) -> Protected<R> {
        self.inner().protect(id, value)
    }

    /// Protects `value` under `id` with a fixed length (see
    /// [`Checkpointer::protect_fixed`]).
    pub fn protect_fixed<R: Region>(&mut self, id: RegionId, value: R) -> Protected<R> {
        self.inner().protect_fixed(id, value)
    }

    /// Protects an existing handle under `id` (see
    /// [`Checkpointer::protect_handle`]).
    pub fn protect_handle<R: Region>(&mut self, id: RegionId, handle: &Protected<R>) {
        self.inner().protect_handle(id, handle)
    }

    /// The checkpointer to go on with: as opened when there was nothing
    /// to restore, else after [`Recovery::recover`]. Collective.
    pub fn resume(self) -> Result<Checkpointer<'c>> {
        match self {
            Opened::Fresh(ckpt) => Ok(ckpt),
            Opened::Recovery(recovery) => recovery.recover(),
        }
    }
}

impl<'c> Recovery<'c> {
    /// The id of the checkpoint to restore.
    pub fn id(&self) -> u64 {
        self.ckpt.recovery_id().unwrap_or_default()
    }

    /// The regions the checkpoint holds, to size buffers before
    /// protecting them.
    pub fn stored_regions(&self) -> Vec<RegionInfo> {
        self.ckpt.stored_regions()
    }

    /// The stored description of region `id`.
    pub fn stored_region(&self, id: RegionId) -> Option<RegionInfo> {
        self.ckpt.stored_region(id)
    }

    /// Protects `value` under `id` (see [`Checkpointer::protect`]).
    pub fn protect<R: Region>(&mut self, id: RegionId, value: R) -> Protected<R> {
        self.ckpt.protect(id, value)
    }

    /// Protects `value` under `id` with a fixed length (see
    /// [`Checkpointer::protect_fixed`]).
    pub fn protect_fixed<R: Region>(&mut self, id: RegionId, value: R) -> Protected<R> {
        self.ckpt.protect_fixed(id, value)
    }

    /// Protects an existing handle under `id` (see
    /// [`Checkpointer::protect_handle`]).
    pub fn protect_handle<R: Region>(&mut self, id: RegionId, handle: &Protected<R>) {
        self.ckpt.protect_handle(id, handle)
    }

    /// The configuration in use.
    pub fn config(&self) -> &Config {
        self.ckpt.config()
    }

    /// The communicator the recovery uses.
    pub fn comm(&self) -> &'c dyn Comm {
        self.ckpt.comm()
    }

    /// Restores every protected region (see [`Checkpointer::recover`]:
    /// damaged data on any rank sends every rank to an older checkpoint
    /// together) and gives the checkpointer to go on with. Collective.
    pub fn recover(mut self) -> Result<Checkpointer<'c>> {
        self.ckpt.recover()?;
        Ok(self.ckpt)
    }

    /// The checkpointer with the recovery still pending, for a program
    /// that restores by other means than [`recover`](Self::recover): per
    /// rank ([`Checkpointer::recover_here`]), region by region
    /// ([`Checkpointer::recover_region`]) or by localised recovery.
    pub fn into_pending(self) -> Checkpointer<'c> {
        self.ckpt
    }
}
