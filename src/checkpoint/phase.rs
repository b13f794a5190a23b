//! Where a checkpointer is in its life: running, or recovering a
//! checkpoint with every rank or alone (a replacement rejoining the
//! others), with what that recovery knows in its [`Pending`].

use super::Checkpointer;
use crate::format::CheckpointFile;
use crate::level::Level;
use crate::recovery::Inventory;

/// Where the checkpointer is in its life. What a recovery in progress
/// knows lives in its [`Pending`], and goes with it.
pub(super) enum Phase {
    /// Snapshots can be taken; nothing is waiting to be restored.
    Running,
    /// All ranks agreed at init to restore a checkpoint.
    Recovering(Box<Pending>),
    /// This rank replaces a failed one while the others go on: it restores
    /// its own checkpoint alone (see `rejoin.rs`).
    Rejoining(Box<Pending>),
}

/// The checkpoint to restore, not restored yet.
pub(super) struct Pending {
    pub(super) id: u64,
    /// Its file, opened on first use.
    pub(super) file: Option<CheckpointFile>,
    /// What this rank holds (kept to re-plan after a failed load).
    pub(super) inventory: Inventory,
    /// Ids that failed to load on some rank (iterative planning).
    pub(super) excluded: Vec<u64>,
    /// Level copies that failed to load on some rank in this recovery
    /// (failure-aware planning).
    pub(super) excluded_levels: Vec<(Level, u64)>,
    /// The level and checkpoint brought back into level 1 for it, when
    /// not level 1's own.
    pub(super) fetched: Option<(Level, u64)>,
    /// The file is still at the `fetched` level: it comes into level 1 as
    /// it loads ([`fetch_on_load`](Checkpointer::fetch_on_load)).
    pub(super) on_load: bool,
    /// This rank restored it alone already
    /// ([`recover_here`](Checkpointer::recover_here) or
    /// [`recover_region`](Checkpointer::recover_region)); the next
    /// collective call ends the recovery everywhere.
    pub(super) restored_here: bool,
}

impl Pending {
    /// The restore of checkpoint `id`, planned from `inventory`.
    pub(super) fn new(id: u64, inventory: Inventory, excluded: Vec<u64>) -> Box<Self> {
        Box::new(Self {
            id,
            file: None,
            inventory,
            excluded,
            excluded_levels: Vec::new(),
            fetched: None,
            on_load: false,
            restored_here: false,
        })
    }
}

impl Checkpointer<'_> {
    /// The recovery in progress, collective or alone.
    pub(super) fn pending(&self) -> Option<&Pending> {
        match &self.phase {
            Phase::Recovering(p) | Phase::Rejoining(p) => Some(p),
            Phase::Running => None,
        }
    }

    /// [`pending`](Self::pending), to change.
    pub(super) fn pending_mut(&mut self) -> Option<&mut Pending> {
        match &mut self.phase {
            Phase::Recovering(p) | Phase::Rejoining(p) => Some(p),
            Phase::Running => None,
        }
    }

    /// Notes that this rank restored the checkpoint being recovered alone.
    pub(super) fn restored_here(&mut self) {
        if let Some(p) = self.pending_mut() {
            p.restored_here = true;
        }
    }
}
