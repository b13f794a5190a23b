//! Cone recovery on the ranks (recovery mode `cone`): after a failure
//! every rank re-enters, but only the failed ranks' replacements restore
//! their live data; the survivors in the failure's dependency cone load
//! their checkpoints into temporary copies and recompute alongside them,
//! and every other survivor keeps its live data and waits. What the
//! program must be, and what makes a recovery global instead, is in
//! docs/LOCALISED.md.

use super::restore::LoadFailure;
use super::Checkpointer;
use crate::comm::{agree_on_problems, ReduceOp};
use crate::error::{Error, Result};
use crate::metrics::{process_cpu_time, ConeRecord, Record};
use crate::recovery::cone::plan::{plan, Offer, Plan};
use crate::recovery::cone::Role;
use crate::region::{ElemType, Region, RegionId};
use std::ops::RangeInclusive;
use std::time::{Duration, Instant};

/// What a rank brings to a cone recovery
/// ([`Checkpointer::recover_cone`]).
pub struct ConeOffer<'a> {
    /// The iterations its live data can stand at, oldest to newest (the
    /// newest it holds and, with double buffering, the one before);
    /// `None` on a rank that holds none (a failed rank's replacement).
    pub live: Option<RangeInclusive<u64>>,
    /// The protected region holding the iteration counter (one `u64`):
    /// read from the checkpoint to learn which iteration it holds.
    pub iteration_region: RegionId,
    /// The ranks whose data this rank reads each iteration (a stencil's
    /// halo partners).
    pub neighbours: &'a [usize],
    /// Buffers of the program's, not protected, into which the regions of
    /// the same ids are loaded from the checkpoint if this rank
    /// recomputes or supplies data (its temporary copies); a `Vec` is
    /// resized to the stored length. Its protected regions stay as they
    /// are.
    pub copies: Vec<(RegionId, &'a mut dyn Region)>,
}

/// The outcome of [`Checkpointer::recover_cone`].
#[derive(Debug)]
pub enum ConeRecovery {
    /// The cone recovery goes ahead; this rank's part in it.
    Cone(Box<ConePart>),
    /// It cannot: every rank calls [`Checkpointer::recover`] next and the
    /// job restarts globally from the checkpoint. The reason, the same on
    /// every rank.
    Global(String),
}

/// What one rank does in a cone recovery.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConeRole {
    /// A failed rank's replacement: its protected regions hold the
    /// checkpoint; it recomputes this many iterations.
    Restored(u32),
    /// Its temporary copies hold the checkpoint; it recomputes this many
    /// iterations in them.
    Recompute(u32),
    /// Its temporary copies hold the checkpoint; it only sends from them.
    Supply,
    /// It takes no part and keeps its live data.
    Idle,
}

impl ConeRole {
    /// The role as the metrics name it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Restored(_) => "restored",
            Self::Recompute(_) => "recompute",
            Self::Supply => "supply",
            Self::Idle => "idle",
        }
    }

    /// The iterations this role recomputes.
    pub fn steps(self) -> u32 {
        match self {
            Self::Restored(n) | Self::Recompute(n) => n,
            Self::Supply | Self::Idle => 0,
        }
    }
}

/// This rank's part in an agreed cone recovery. Iterations are numbered
/// from the checkpoint's: in round `j` (1 and up) a rank that computes
/// turns iteration `from + j - 1` into `from + j`, having first sent its
/// data of iteration `from + j - 1` to [`sends_at`](Self::sends_at)`(j)`
/// and received that of [`receives_at`](Self::receives_at)`(j)`.
#[derive(Debug)]
pub struct ConePart {
    role: ConeRole,
    target: u64,
    from: u64,
    failed: Vec<usize>,
    reads: Vec<usize>,
    /// The ranks that read this one's data, with the iterations they
    /// recompute.
    readers: Vec<(usize, u32)>,
    record: Option<(std::path::PathBuf, ConeRecord)>,
    began: Instant,
    cpu: Duration,
}

impl ConePart {
    /// This rank's role.
    pub fn role(&self) -> ConeRole {
        self.role
    }

    /// The iteration every rank resumes from: a survivor whose live data
    /// is one iteration ahead goes back to its previous one; a rank that
    /// recomputes reaches it.
    pub fn target(&self) -> u64 {
        self.target
    }

    /// The iteration the checkpoint holds.
    pub fn from(&self) -> u64 {
        self.from
    }

    /// The ranks that failed (their replacements restored).
    pub fn failed(&self) -> &[usize] {
        &self.failed
    }

    /// Iterations this rank recomputes.
    pub fn steps(&self) -> u32 {
        self.role.steps()
    }

    /// Rounds this rank takes part in: its steps, and one more if a rank
    /// that reads it computes one iteration further.
    pub fn rounds(&self) -> u32 {
        self.readers
            .iter()
            .map(|(_, n)| *n)
            .fold(self.steps(), u32::max)
    }

    /// The ranks to send this rank's data of iteration `from + round - 1`
    /// to in round `round`.
    pub fn sends_at(&self, round: u32) -> Vec<usize> {
        self.readers
            .iter()
            .filter(|(_, n)| round >= 1 && round <= *n)
            .map(|(r, _)| *r)
            .collect()
    }

    /// The ranks whose data of iteration `from + round - 1` this rank
    /// receives in round `round` (none in a round it does not compute).
    pub fn receives_at(&self, round: u32) -> Vec<usize> {
        if round >= 1 && round <= self.steps() {
            self.reads.clone()
        } else {
            Vec::new()
        }
    }

    /// Ends this rank's part (after its last round; an idle rank once its
    /// neighbours answered it again) and writes its metrics record.
    pub fn finish(self) {
        if let Some((path, mut record)) = self.record {
            record.wall_ms = self.began.elapsed().as_secs_f64() * 1e3;
            record.cpu_ms = process_cpu_time().saturating_sub(self.cpu).as_secs_f64() * 1e3;
            Record::Cone(record).append(&path);
        }
    }
}

fn role_of(plan: &Plan, rank: usize, live: bool) -> ConeRole {
    match (plan.cone.role(rank), live) {
        (Role::Recompute(n), false) => ConeRole::Restored(n),
        (Role::Recompute(n), true) => ConeRole::Recompute(n),
        (Role::Supply, _) => ConeRole::Supply,
        (Role::Idle, _) => ConeRole::Idle,
    }
}

impl Checkpointer<'_> {
    /// After a failure in recovery mode `cone`, instead of
    /// [`recover`](Self::recover): agrees with every rank on the
    /// iteration they resume from and on the failure's cone, restores the
    /// protected regions of the ranks without live data, and loads the
    /// temporary copies of the ranks that recompute or supply. Collective.
    /// What cannot be recovered so (see [`ConeRecovery::Global`]) is
    /// recovered by `recover` on every rank next.
    pub fn recover_cone(&mut self, offer: ConeOffer<'_>) -> Result<ConeRecovery> {
        let Some(id) = self.recovery_id() else {
            return Err(Error::NothingToRecover);
        };
        let (began, cpu) = (Instant::now(), process_cpu_time());
        let ConeOffer {
            live,
            iteration_region,
            neighbours,
            mut copies,
        } = offer;
        let mine = Offer {
            live: live.as_ref().map(|r| (*r.end(), *r.start())),
            checkpoint: self.iteration_held(iteration_region),
            neighbours: neighbours.to_vec(),
        };
        let text = serde_json::to_vec(&mine).unwrap_or_default();
        let mut offers = Vec::new();
        for (rank, bytes) in self.comm.all_gather(&text)?.iter().enumerate() {
            match serde_json::from_slice::<Offer>(bytes) {
                Ok(o) => offers.push(o),
                Err(e) => return Ok(self.cone_fallback(format!("rank {rank}'s offer: {e}"))),
            }
        }
        let plan = match plan(&offers) {
            Ok(p) => p,
            Err(reason) => return Ok(self.cone_fallback(reason)),
        };
        let me = self.comm.rank();
        let role = role_of(&plan, me, live.is_some());
        let local = match role {
            ConeRole::Restored(_) => self.load_all().err(),
            ConeRole::Recompute(_) | ConeRole::Supply => self.load_copies(&mut copies).err(),
            ConeRole::Idle => None,
        };
        if local.is_none() {
            self.discard_newer(id);
        }
        let mut worst = [local.as_ref().map_or(0, LoadFailure::code)];
        self.comm.all_reduce_u64(&mut worst, ReduceOp::Max)?;
        if worst[0] != 0 {
            let trouble = agree_on_problems(self.comm, local.as_ref().map(LoadFailure::text))?;
            let list: Vec<String> = trouble
                .iter()
                .map(|(r, why)| format!("rank {r}: {why}"))
                .collect();
            return Ok(self.cone_fallback(format!(
                "checkpoint {id} could not be loaded: {}",
                list.join("; ")
            )));
        }
        self.finish_recovery(id)?;
        let load = began.elapsed();
        self.stats.recovery_time += load;
        let level = self.stats.recovered_from.unwrap_or(crate::level::Level::L1);
        self.record_recovery(id, level, load)?;
        let readers = (0..offers.len())
            .filter(|q| offers[*q].neighbours.contains(&me))
            .map(|q| (q, role_of(&plan, q, offers[q].live.is_some())))
            .map(|(q, r)| (q, r.steps()))
            .collect();
        let record = self.cfg.metrics_file().map(|p| {
            let failures = self.comm.link().recovery();
            (
                p.to_path_buf(),
                ConeRecord {
                    job: self.cfg.job.id.clone(),
                    epoch: failures.epoch,
                    rank: me as u32,
                    role: role.name().into(),
                    steps: role.steps(),
                    checkpoint: id,
                    from: plan.from,
                    target: plan.target,
                    failed: plan.failed.iter().map(|r| *r as u32).collect(),
                    fallback: None,
                    wall_ms: 0.0,
                    cpu_ms: 0.0,
                },
            )
        });
        Ok(ConeRecovery::Cone(Box::new(ConePart {
            role,
            target: plan.target,
            from: plan.from,
            failed: plan.failed,
            reads: neighbours.to_vec(),
            readers,
            record,
            began,
            cpu,
        })))
    }

    /// The iteration the checkpoint being recovered holds in `region` (one
    /// `u64`), or why it cannot be read.
    fn iteration_held(&mut self, region: RegionId) -> std::result::Result<u64, String> {
        let (ckpt, file) = self.recovery_file().map_err(|f| f.text().to_string())?;
        let stored = file
            .region(region)
            .ok_or_else(|| format!("checkpoint {ckpt} holds no region {region}"))?;
        if stored.elem != ElemType::U64 || stored.count != 1 {
            return Err(format!(
                "region {region} of checkpoint {ckpt} holds {} x {}, not one u64",
                stored.count, stored.elem
            ));
        }
        let mut at = [0u8; 8];
        file.load_region(region, &mut at)
            .map_err(|e| e.to_string())?;
        Ok(u64::from_le_bytes(at))
    }

    /// Loads the regions of `copies` from the checkpoint being recovered.
    fn load_copies(
        &mut self,
        copies: &mut [(RegionId, &mut dyn Region)],
    ) -> std::result::Result<(), LoadFailure> {
        let (ckpt, file) = self.recovery_file()?;
        for (id, copy) in copies.iter_mut() {
            let stored = file.region(*id).ok_or_else(|| {
                LoadFailure::Mismatch(format!("checkpoint {ckpt} holds no region {id}"))
            })?;
            if copy.elem_type() != stored.elem {
                return Err(LoadFailure::Mismatch(format!(
                    "region {id}: checkpoint holds {} elements, the copy holds {}",
                    stored.elem,
                    copy.elem_type()
                )));
            }
            let count = usize::try_from(stored.count).map_err(|_| {
                LoadFailure::Mismatch(format!("region {id}: too large for this machine"))
            })?;
            let target = copy.load_target(count).map_err(|held| {
                LoadFailure::Mismatch(format!(
                    "region {id}: checkpoint holds {count} elements, the copy has {held} and cannot be resized"
                ))
            })?;
            file.load_region(*id, target)
                .map_err(|e| LoadFailure::Data(e.to_string()))?;
        }
        Ok(())
    }

    /// A cone recovery cannot be done: says why (rank 0, in the metrics)
    /// and leaves the recovery to [`recover`](Self::recover).
    fn cone_fallback(&self, reason: String) -> ConeRecovery {
        tracing::warn!(%reason, "cone recovery not possible; restarting globally");
        if let (0, Some(path)) = (self.comm.rank(), self.cfg.metrics_file()) {
            let failures = self.comm.link().recovery();
            Record::Cone(ConeRecord {
                job: self.cfg.job.id.clone(),
                epoch: failures.epoch,
                rank: 0,
                role: "global".into(),
                steps: 0,
                checkpoint: self.recovery_id().unwrap_or_default(),
                from: 0,
                target: 0,
                failed: failures.failed.ranks.iter().copied().collect(),
                fallback: Some(reason.clone()),
                wall_ms: 0.0,
                cpu_ms: 0.0,
            })
            .append(path);
        }
        ConeRecovery::Global(reason)
    }
}
