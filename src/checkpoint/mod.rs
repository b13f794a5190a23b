//! The checkpointer: the API a program uses to protect, save and restore state.
//!
//! ```
//! use frame::{comm::LocalComm, config::{Config, Interval}, Checkpointer};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let mut cfg = Config::default();
//! cfg.storage.local_dir = dir.path().to_path_buf();
//! cfg.snapshot.interval = Interval::Calls(10);
//!
//! // First run: compute, snapshot every 10 steps, "crash" after step 25.
//! let comm = LocalComm::world(1, 1).pop().unwrap();
//! let mut ckpt = Checkpointer::init(&cfg, &comm).unwrap();
//! let step = ckpt.protect(0, 0u64);
//! let field = ckpt.protect(1, vec![0.0f64; 100]);
//! assert!(!ckpt.recovering());
//! while step.get() < 25 {
//!     field.write().iter_mut().for_each(|x| *x += 1.0);
//!     step.set(step.get() + 1);
//!     ckpt.snapshot().unwrap();
//! }
//! drop(ckpt);
//!
//! // Second run: the state of step 20 comes back.
//! let mut ckpt = Checkpointer::init(&cfg, &comm).unwrap();
//! let step = ckpt.protect(0, 0u64);
//! let field = ckpt.protect(1, Vec::<f64>::new());
//! assert!(ckpt.recovering());
//! ckpt.recover().unwrap();
//! assert_eq!(step.get(), 20);
//! assert_eq!(field.read().len(), 100);
//! assert!(field.read().iter().all(|x| *x == 20.0));
//! ckpt.finalize().unwrap();
//! ```

mod aware;
mod choice;
pub(crate) mod cone;
mod decode;
mod evidence;
mod fetch;
mod files;
mod keep;
mod load_failure;
pub(crate) mod messages;
mod metrics;
mod on_load;
mod opened;
mod phase;
mod promotion;
mod rebuild;
mod rejoin;
mod relocate;
mod restore;
mod rollback;
mod schedule;
pub(crate) mod tuning;
mod write;

use crate::comm::{agree_on_problems, Comm};
use crate::config::{Compression, Config, Strategy};
use crate::error::{problems, Error, Result};
use crate::format::CheckpointFile;
use crate::level::{L1Store, Level, Owner};
use crate::node::NodePlace;
use crate::recovery::{Ballot, Decision, Inventory};
use crate::region::{ElemType, Protected, RawRegion, Region, RegionId, RegionInfo, Registry};
pub use opened::{Opened, Recovery};
use phase::{Pending, Phase};
use schedule::Schedule;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

/// Counters of what the checkpointer did, for metrics.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Checkpoints committed by this checkpointer.
    pub checkpoints: u64,
    /// Time spent inside checkpoint writes (the program's checkpoint overhead).
    pub checkpoint_time: Duration,
    /// Duration of the last checkpoint.
    pub last_checkpoint_time: Duration,
    /// Region bytes saved, summed over checkpoints.
    pub raw_bytes: u64,
    /// Bytes stored after compression, summed over checkpoints.
    pub stored_bytes: u64,
    /// Id of the newest committed checkpoint.
    pub last_id: Option<u64>,
    /// Time spent restoring (identify, load, agree).
    pub recovery_time: Duration,
    /// The level the last restored checkpoint came from.
    pub recovered_from: Option<Level>,
    /// Collective rounds spent finding out which level and checkpoint to
    /// restore (transfers and the checks after loading not counted).
    pub recovery_rounds: u32,
    /// Time spent finding that out.
    pub identify_time: Duration,
    /// Under a runtime, time from this rank's release into the epoch to
    /// the start of that search: the program's way back to the
    /// checkpointer, its communicator's first exchanges, the
    /// checkpointer's opening.
    pub reentry_time: Duration,
    /// Time spent bringing the checkpoint back into level 1 from a higher
    /// level (transfers, decoding, installing; a level-4 file read while it
    /// loads, its load too).
    pub fetch_time: Duration,
}

/// Protects memory regions and saves/restores them as coordinated checkpoints.
///
/// `init`, `recover`, `snapshot`, `checkpoint` and `finalize` are collective:
/// every rank calls them, in the same order. Their errors are the same on
/// every rank.
pub struct Checkpointer<'c> {
    comm: &'c dyn Comm,
    cfg: Config,
    registry: Registry,
    store: L1Store,
    phase: Phase,
    next_id: u64,
    /// Shared by all ranks, random per planning: the base of stamps.
    session: u64,
    /// Checkpoint attempts since the last planning (the stamp's offset).
    attempts: u64,
    schedule: Schedule,
    stats: Stats,
    /// Levels 2 to 4, when configured.
    levels: Option<promotion::Promotions>,
    /// The newest checkpoint of this run, opened for a rollback within
    /// the run.
    rollback: Option<(u64, CheckpointFile)>,
    /// After it restored alone: the checkpoint, when it was back, and how
    /// long that took (for its metrics record at the next commit).
    rejoined: Option<rejoin::Rejoined>,
    /// The newest id recovery may restore (`recovery.restart_from`, see
    /// `choice.rs`).
    ceiling: Option<u64>,
    /// The largest id any rank held when recovery was planned: new
    /// checkpoints are numbered past it.
    resume_past: u64,
    /// The program's own files (see `files.rs`).
    files: files::Files,
}

/// Under the runtime, warns (once per process) when the program keeps its
/// L1 checkpoints somewhere else than its node's directory: they would not
/// follow the rank to a spare node, nor be removed with a dead node.
fn warn_if_off_node(cfg: &Config, rank: usize, place: &NodePlace) {
    let Some(node_dir) = place.runtime.as_ref().map(|n| &n.dir) else {
        return;
    };
    let same = |a: &std::path::Path, b: &std::path::Path| {
        a == b || matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
    };
    if same(&cfg.storage.local_dir, node_dir) {
        return;
    }
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        eprintln!(
            "frame: warning: rank {rank} keeps its L1 checkpoints in {} ({}), not in its node's directory {}; \
             they will not follow the rank to another node after a failure",
            cfg.storage.local_dir.display(),
            cfg.describe("storage.local_dir"),
            node_dir.display()
        );
    });
}

/// A random number for the recovery ballot (its minimum over the ranks
/// becomes the session, which stamps new checkpoints).
fn random_u64() -> u64 {
    getrandom::u64().unwrap_or_else(|_| {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
        );
        h.finish()
    })
}

impl<'c> Checkpointer<'c> {
    /// Opens this job's checkpoint storage and finds out, with the other ranks,
    /// whether there is a checkpoint to restore (see [`recovering`](Self::recovering)).
    ///
    /// Collective. Fails on every rank if any rank cannot use its storage, or
    /// if checkpoints exist but no single one can be restored by all ranks.
    ///
    /// The phase is a flag here, as the C and FTI interfaces need;
    /// [`open`](Self::open) gives it as a type.
    pub fn init(cfg: &Config, comm: &'c dyn Comm) -> Result<Self> {
        Self::init_with_manager(cfg, comm, None)
    }

    /// Like [`init`](Self::init), with each node's manager already running
    /// where `link` says (given on every rank, or on none) instead of one
    /// that frame starts. Collective.
    pub fn init_with_manager(
        cfg: &Config,
        comm: &'c dyn Comm,
        link: Option<crate::manager::Link>,
    ) -> Result<Self> {
        cfg.validate()?;
        let place = crate::comm::place(comm);
        let mut cfg = cfg.clone();
        let rooted = cfg.private_storage_roots().map_err(|e| match e {
            crate::config::ConfigError::Key { message, .. } => {
                format!("{message} (key {})", cfg.describe("storage.local_dir"))
            }
            e => e.to_string(),
        });
        cfg.storage.local_dir =
            place.local_dir(&cfg.storage.local_dir, cfg.topology.ranks_per_node > 0);
        let cfg = &cfg;
        warn_if_off_node(cfg, comm.rank(), &place);
        let owner = Owner {
            job_id: cfg.job.id.clone(),
            rank: comm.rank() as u32,
            world_size: comm.size() as u32,
            node: comm.node(),
        };
        let opened = rooted.and_then(|()| {
            L1Store::open(&cfg.storage.local_dir, owner)
                .map_err(|e| format!("{e} (key {})", cfg.describe("storage.local_dir")))
        });
        let local = opened.as_ref().err().cloned();
        let rejoin = comm.link().recovery().rejoin;
        let trouble = match rejoin {
            // The others are not in init: nobody to agree with.
            true => local.map(|l| vec![(comm.rank(), l)]).unwrap_or_default(),
            false => agree_on_problems(comm, local.as_deref())?,
        };
        let mut store = match opened {
            Ok(store) if trouble.is_empty() => store,
            _ => {
                return Err(Error::Init {
                    problems: problems(trouble),
                })
            }
        };
        // Levels 2 and 3 keep the node's own files as links of level-1
        // files: level 1 reuses each once that level let it go.
        if let Err(e) = store.lend_to_levels(cfg.linked_own_copies() as usize) {
            tracing::warn!(error = %e, "could not remove a spare level-1 file");
        }
        if rejoin {
            if let Some(why) = rejoin::refusal(cfg) {
                return Err(rejoin::give_up(
                    comm,
                    Error::Init {
                        problems: problems(vec![(comm.rank(), why)]),
                    },
                ));
            }
        }
        // A replacement rejoining alone resumes it at `recover` (rejoin.rs).
        let levels = if promotion::enabled(cfg) && !rejoin {
            Some(promotion::Promotions::init(cfg, comm, link.as_ref())?)
        } else {
            None
        };
        let mut me = Self {
            comm,
            cfg: cfg.clone(),
            registry: Registry::default(),
            store,
            phase: Phase::Running,
            next_id: 1,
            session: 0,
            attempts: 0,
            schedule: Schedule::for_config(cfg),
            stats: Stats::default(),
            levels,
            rollback: None,
            rejoined: None,
            ceiling: choice::ceiling(cfg, comm.link().recovery().committed),
            resume_past: 0,
            files: files::Files::default(),
        };
        if rejoin {
            me.start_rejoin().map_err(|e| rejoin::give_up(comm, e))?;
            return Ok(me);
        }
        me.relocate_moved()?;
        let mut inventory = me.inventory();
        if let Some(choice) = me.schedule.choice().cloned() {
            me.adopt(
                &choice,
                "chosen from [auto] mtbf (a cost of 1 s assumed until measured)",
            );
        }
        me.stats.reentry_time = comm.link().recovery().reentry.map_or(Duration::ZERO, |r| {
            Duration::from_nanos(crate::metrics::now_ns().saturating_sub(r.released_ns))
        });
        let started = Instant::now();
        if me.levels.is_none() {
            me.plan(inventory, Vec::new())?;
            me.stats.identify_time = started.elapsed();
            return Ok(me);
        }
        match cfg.recovery.strategy {
            Strategy::FailureAware => me.start_aware(inventory, Vec::new())?,
            Strategy::Iterative => {
                me.stats.recovery_rounds += 1;
                let checked = me.checked_l1(&inventory);
                let mut fetched = None;
                if !me.restorable_at_l1(&checked)? {
                    if let Some(found) = me.fetch_from_levels(&checked)? {
                        tracing::info!(checkpoint = found.1, level = %found.0, "checkpoint brought back to level 1");
                        fetched = Some(found);
                        inventory = me.inventory();
                    }
                }
                me.stats.recovery_rounds += 1;
                me.plan(inventory, Vec::new())?;
                if let Some(pending) = me.pending_mut() {
                    pending.fetched = fetched;
                }
            }
        }
        me.stats.identify_time = started.elapsed().saturating_sub(me.stats.fetch_time);
        Ok(me)
    }

    /// Whether every rank can restore the newest committed checkpoint from
    /// level 1 (the first round of the iterative baseline). Collective.
    fn restorable_at_l1(&self, inventory: &Inventory) -> Result<bool> {
        let mut ballot = Ballot::new(inventory, &self.above_ceiling(inventory), 0);
        self.comm
            .all_reduce_u64(ballot.values_mut(), crate::comm::ReduceOp::Min)?;
        // Level 1 is tried at its newest checkpoint only, as every level:
        // the newest any rank has evidence of a commit of (a checkpoint
        // some ranks wrote before the job died is not one), or without
        // any evidence the newest any rank holds.
        let newest = match ballot.committed_anywhere() {
            0 => ballot.newest_anywhere(),
            committed => committed,
        };
        Ok(matches!(ballot.decide(), Decision::Restore(id) if id >= newest))
    }

    /// Plans recovery with the failure-aware strategy (one exchange) and
    /// enters the matching phase; `excluded` are level copies that failed
    /// to load. Collective.
    fn start_aware(&mut self, inventory: Inventory, excluded: Vec<(Level, u64)>) -> Result<()> {
        let failed: Vec<u64> = excluded.iter().map(|(_, id)| *id).collect();
        let (id, session, inventory, fetched, on_load) = match self
            .recover_aware(&inventory, excluded.clone())?
        {
            aware::Found::Level1 { id, session } => (id, session, inventory, None, false),
            aware::Found::Fetched {
                level,
                id,
                session,
                installed: true,
            } => {
                tracing::info!(checkpoint = id, level = %level, "checkpoint brought back to level 1");
                (id, session, self.inventory(), Some((level, id)), false)
            }
            aware::Found::Fetched {
                level,
                id,
                session,
                installed: false,
            } => {
                tracing::info!(checkpoint = id, level = %level, "checkpoint to be loaded from its level");
                (id, session, inventory, Some((level, id)), true)
            }
            aware::Found::Nothing => {
                self.plan(inventory, failed)?;
                // The copies that failed stay excluded if this one fails too.
                if let Some(pending) = self.pending_mut() {
                    pending.excluded_levels = excluded;
                }
                return Ok(());
            }
        };
        tracing::info!(checkpoint = id, "recovery agreed on checkpoint");
        self.session = session;
        self.attempts = 0;
        let mut pending = Pending::new(id, inventory, Vec::new());
        if !on_load {
            pending.file = self.store.open_checkpoint(id).ok().map(|(f, _)| f);
        }
        pending.excluded_levels = excluded;
        pending.fetched = fetched;
        pending.on_load = on_load;
        self.phase = Phase::Recovering(pending);
        Ok(())
    }

    /// Agrees with all ranks on the checkpoint to restore (one all-reduce) and
    /// enters the matching phase.
    fn plan(&mut self, inventory: Inventory, excluded: Vec<u64>) -> Result<()> {
        let skipped = [excluded.as_slice(), &self.above_ceiling(&inventory)].concat();
        let mut ballot = Ballot::new(&inventory, &skipped, random_u64());
        self.comm
            .all_reduce_u64(ballot.values_mut(), crate::comm::ReduceOp::Min)?;
        self.session = ballot.session();
        self.attempts = 0;
        self.resume_past = self.resume_past.max(ballot.largest_anywhere());
        match ballot.decide() {
            Decision::Fresh { next_id } if excluded.is_empty() && self.ceiling.is_none() => {
                self.phase = Phase::Running;
                self.next_id = next_id;
                Ok(())
            }
            Decision::Restore(id) => {
                tracing::info!(checkpoint = id, "recovery agreed on checkpoint");
                self.tell_planned(id, &ballot, &inventory, &excluded)?;
                let mut pending = Pending::new(id, inventory, excluded);
                pending.file = self.store.open_checkpoint(id).ok().map(|(f, _)| f);
                self.phase = Phase::Recovering(pending);
                Ok(())
            }
            Decision::Fresh { .. } | Decision::Unrecoverable => {
                let wanted = ballot.newest_anywhere();
                let holds = inventory.valid.iter().any(|h| h.id == wanted);
                let local = if wanted == 0 {
                    Some(inventory.explain(None))
                } else if excluded.contains(&wanted) {
                    Some(format!("checkpoint {wanted} failed to load"))
                } else if inventory.valid.is_empty() && inventory.damaged.is_empty() {
                    Some(format!(
                        "holds no checkpoint (its node's storage was lost or removed), while other ranks hold checkpoint {wanted}"
                    ))
                } else {
                    (!holds).then(|| inventory.explain(Some(wanted)))
                };
                let local = local.map(|why| format!("{why} (in {})", self.store.root().display()));
                let mut trouble = problems(agree_on_problems(self.comm, local.as_deref())?);
                if trouble.is_empty() {
                    trouble.push(crate::RankProblem {
                        rank: 0,
                        reason: format!(
                            "the ranks' copies of checkpoint {wanted} were written by different runs"
                        ),
                    });
                }
                let asked = self.ceiling.zip(self.named_ceiling()).map(|(top, named)| {
                    format!(
                        "{named} asks for checkpoint {top} or an older one, \
                         and none is restorable by every rank (newer checkpoints are not considered); "
                    )
                });
                Err(Error::NotRecoverable {
                    problems: trouble,
                    note: asked.unwrap_or_default()
                        + &evidence::refusal_note(
                            &self.cfg,
                            ballot.committed_anywhere(),
                            // Some ranks hold what others lost, or a commit is
                            // recorded and no rank holds anything: storage
                            // went with a node.
                            wanted > 0
                                || (ballot.nothing_damaged() && ballot.committed_anywhere() > 0),
                            &ballot.levels_with_commits(),
                        ),
                })
            }
        }
    }

    /// The stamp of the next checkpoint attempt: the same on every rank,
    /// different for every attempt of every run.
    fn next_stamp(&mut self) -> u64 {
        self.attempts += 1;
        self.session.wrapping_add(self.attempts)
    }

    /// Whether init found a checkpoint that every rank can restore and it has
    /// not been restored yet.
    pub fn recovering(&self) -> bool {
        self.pending().is_some()
    }

    /// Id of the checkpoint agreed for recovery, while [`recovering`](Self::recovering).
    pub fn recovery_id(&self) -> Option<u64> {
        self.pending().map(|p| p.id)
    }

    /// Regions stored in the checkpoint agreed for recovery (empty when not
    /// recovering). Lets a program size its buffers before loading.
    pub fn stored_regions(&self) -> Vec<RegionInfo> {
        match self.pending_file() {
            Some(f) => f.regions(),
            None => self.on_load_record().map(|m| m.regions).unwrap_or_default(),
        }
    }

    /// The stored description of region `id` in the checkpoint agreed for recovery.
    pub fn stored_region(&self, id: RegionId) -> Option<RegionInfo> {
        match self.pending_file() {
            Some(f) => f.region(id),
            None => (self.on_load_record()?.regions.into_iter()).find(|r| r.id == id),
        }
    }

    fn pending_file(&self) -> Option<&CheckpointFile> {
        self.pending().and_then(|p| p.file.as_ref())
    }

    /// Protects `value` under `id` and returns the handle to use it through.
    /// Protecting an id again replaces the earlier registration.
    pub fn protect<R: Region>(&mut self, id: RegionId, value: R) -> Protected<R> {
        let handle = Protected::new(value);
        self.registry.insert(id, handle.erased());
        handle
    }

    /// Protects `value` under `id` with a fixed length: where [`protect`]
    /// resizes a `Vec` to the length stored in the checkpoint, recovery with
    /// a region protected this way fails with [`Error::RegionMismatch`]
    /// naming the region and both lengths (for example after a rerun with a
    /// smaller grid over an old checkpoint).
    ///
    /// [`protect`]: Self::protect
    pub fn protect_fixed<R: Region>(&mut self, id: RegionId, value: R) -> Protected<R> {
        let handle = Protected::new(value);
        self.registry.insert_fixed(id, handle.erased());
        handle
    }

    /// Protects an existing handle under `id` (for example one kept across a
    /// re-entry of the resilient function).
    pub fn protect_handle<R: Region>(&mut self, id: RegionId, handle: &Protected<R>) {
        self.registry.insert(id, handle.erased());
    }

    /// Protects caller-owned memory given as a pointer and an element count:
    /// the form the C interface uses. Protect again to change the size.
    ///
    /// # Safety
    /// `ptr` must be valid for reads and writes of `count` elements of
    /// `elem` and suitably aligned, until the region is unprotected or
    /// protected again, and must not be accessed by anyone else while a
    /// checkpointer call is running. A null `ptr` is allowed when `count` is 0.
    pub unsafe fn protect_raw(&mut self, id: RegionId, ptr: *mut u8, count: usize, elem: ElemType) {
        // SAFETY: forwarded to the caller.
        let raw = unsafe { RawRegion::new(ptr, count, elem) };
        self.registry.insert(id, Arc::new(RwLock::new(raw)));
    }

    /// Stops protecting `id`; returns whether it was protected.
    pub fn unprotect(&mut self, id: RegionId) -> bool {
        self.registry.remove(id)
    }

    /// The communicator this checkpointer uses.
    pub fn comm(&self) -> &'c dyn Comm {
        self.comm
    }

    /// The automatic intervals in force (`snapshot.interval = "auto"`),
    /// as last chosen.
    pub fn auto_intervals(&self) -> Option<&tuning::Choice> {
        self.schedule.choice()
    }

    /// The configuration in use.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// What the checkpointer has done so far.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The job's level-1 directory.
    pub fn local_dir(&self) -> &std::path::Path {
        self.store.root()
    }

    fn zstd_level(&self) -> Option<i32> {
        (self.cfg.snapshot.compression == Compression::Zstd)
            .then_some(self.cfg.snapshot.compression_level)
    }

    /// Waits until every node's manager has finished the promotions asked
    /// of it so far, and records which levels they committed. Collective;
    /// returns at once when no level above 1 is configured.
    pub fn wait_for_promotions(&mut self) -> Result<()> {
        match self.levels.as_mut() {
            Some(levels) => levels.drain(self.comm),
            None => Ok(()),
        }
    }
}
