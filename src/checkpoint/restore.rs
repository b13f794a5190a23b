//! Restoring protected regions from the checkpoint agreed at init.

use super::{Checkpointer, Pending, Phase};
use crate::comm::{agree_on_problems, ReduceOp};
use crate::config::Strategy;
use crate::error::{problems, Error, Result};
use crate::format::CheckpointFile;
use crate::level::Level;
use crate::region::{ErasedRegion, RegionId, RegionInfo};
use std::sync::Arc;
use std::time::Instant;

pub(super) use super::load_failure::LoadFailure;

/// A protected region: its id, the region, and whether its length is fixed.
pub(super) type ProtectedRegion = (RegionId, Arc<dyn ErasedRegion>, bool);

/// Checks that region `id`, protected as `region`, can take `stored`.
pub(super) fn check_fit(
    id: RegionId,
    region: &Arc<dyn ErasedRegion>,
    stored: RegionInfo,
    fixed: bool,
) -> Result<(), LoadFailure> {
    let held = region
        .try_read()
        .ok_or_else(|| LoadFailure::Mismatch(format!("region {id} is locked by the program")))?;
    let r = held.region();
    if r.elem_type() != stored.elem {
        return Err(LoadFailure::Mismatch(format!(
            "region {id}: checkpoint holds {} elements, the protected region holds {}",
            stored.elem,
            r.elem_type()
        )));
    }
    if fixed && r.count() as u64 != stored.count {
        return Err(LoadFailure::Mismatch(format!(
            "region {id}: checkpoint holds {} elements, the region (protected with a fixed length) has {}",
            stored.count,
            r.count()
        )));
    }
    Ok(())
}

/// Loads `stored` from `file` into `region`, resizing it if it can.
pub(super) fn load_one(
    file: &CheckpointFile,
    id: RegionId,
    region: &Arc<dyn ErasedRegion>,
    stored: RegionInfo,
) -> Result<(), LoadFailure> {
    let mut held = region
        .try_write()
        .ok_or_else(|| LoadFailure::Mismatch(format!("region {id} is locked by the program")))?;
    let count = usize::try_from(stored.count)
        .map_err(|_| LoadFailure::Mismatch(format!("region {id}: too large for this machine")))?;
    let target = held.region_mut().load_target(count).map_err(|current| {
        LoadFailure::Mismatch(format!(
            "region {id}: checkpoint holds {} elements, the protected region has {current} and cannot be resized",
            stored.count
        ))
    })?;
    file.load_region(id, target)
        .map_err(|e| LoadFailure::Data(e.to_string()))
}

impl Checkpointer<'_> {
    /// The file of the checkpoint being recovered, opened on first use.
    pub(super) fn recovery_file(&mut self) -> Result<(u64, &CheckpointFile), LoadFailure> {
        if self.pending().is_some_and(|p| p.on_load) {
            self.fetch_on_load(None)?;
        }
        let (Phase::Recovering(pending) | Phase::Rejoining(pending)) = &mut self.phase else {
            return Err(LoadFailure::Data("nothing to recover".into()));
        };
        if pending.file.is_none() {
            pending.file = Some(
                self.store
                    .open_checkpoint(pending.id)
                    .map(|(file, _)| file)
                    .map_err(|e| LoadFailure::Data(e.to_string()))?,
            );
        }
        match &pending.file {
            Some(f) => Ok((pending.id, f)),
            None => Err(LoadFailure::Data("checkpoint file unavailable".into())),
        }
    }

    /// Lets the checkpoint file about to be loaded use this process's
    /// share of its cores: they are shared evenly among the ranks of its
    /// node, which all load at once. Collective.
    fn share_cores(&mut self) -> Result<()> {
        let node = self.comm.node().to_le_bytes();
        let sharing = self
            .comm
            .all_gather(&node)?
            .iter()
            .filter(|b| b[..] == node[..])
            .count()
            .max(1);
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let on_load = self.pending().is_some_and(|p| p.on_load);
        if !on_load && self.recovery_file().is_ok() {
            if let Some(pending) = self.pending_mut() {
                if let Some(file) = pending.file.as_mut() {
                    file.set_workers(cores / sharing);
                }
            }
        }
        Ok(())
    }

    /// The protected regions, with whether each has a fixed length.
    pub(super) fn protected(&self) -> Vec<ProtectedRegion> {
        self.registry
            .iter()
            .map(|(id, r)| (id, Arc::clone(r), self.registry.is_fixed(id)))
            .collect()
    }

    /// Loads every protected region; all fit checks happen before any load.
    /// Files the checkpoint holds are written back too (`files.rs`).
    pub(super) fn load_all(&mut self) -> Result<(), LoadFailure> {
        let regions = self.protected();
        let on_load = self.pending().is_some_and(|p| p.on_load);
        if on_load {
            self.fetch_on_load(Some(&regions))?;
        }
        self.recovery_file()?;
        let (Phase::Recovering(pending) | Phase::Rejoining(pending)) = &self.phase else {
            return Err(LoadFailure::Data("nothing to recover".into()));
        };
        let Some(file) = pending.file.as_ref() else {
            return Err(LoadFailure::Data("checkpoint file unavailable".into()));
        };
        if !on_load {
            load_regions(&regions, pending.id, file)?;
        }
        self.files.restored = super::files::restore(&mut self.store, pending.id, file)?;
        Ok(())
    }

    /// Restores every protected region from the agreed checkpoint and
    /// returns its id. Collective.
    ///
    /// Every stored region must be protected, with the same element type;
    /// `Vec` regions are resized to the stored length, fixed-size regions
    /// must already have it. If some rank finds its data damaged while
    /// loading, all ranks fall back to the newest older checkpoint they can
    /// all restore. Region mismatches are reported on every rank without
    /// falling back.
    pub fn recover(&mut self) -> Result<u64> {
        if let Phase::Rejoining(p) = &self.phase {
            return self.recover_rejoining(p.id);
        }
        let started = Instant::now();
        // A file read from its level as it loads counts as fetched (see
        // `on_load.rs`), not loaded too.
        let fetched_before = self.stats.fetch_time;
        loop {
            let Some(id) = self.recovery_id() else {
                return Err(Error::NothingToRecover);
            };
            self.share_cores()?;
            // Newer checkpoints stay: new ones are numbered past them.
            let local = self.load_all().err();
            let mut worst = [local.as_ref().map_or(0, LoadFailure::code)];
            self.comm.all_reduce_u64(&mut worst, ReduceOp::Max)?;
            if worst[0] == 0 {
                self.finish_recovery(id)?;
                self.stats.recovery_time += started.elapsed();
                let level = self.stats.recovered_from.unwrap_or(Level::L1);
                let fetched = self.stats.fetch_time.saturating_sub(fetched_before);
                self.record_recovery(id, level, started.elapsed().saturating_sub(fetched))?;
                return Ok(id);
            }
            let trouble = problems(agree_on_problems(
                self.comm,
                local.as_ref().map(LoadFailure::text),
            )?);
            if worst[0] == 2 {
                return Err(Error::RegionMismatch {
                    id,
                    problems: trouble,
                });
            }
            for p in &trouble {
                tracing::warn!(checkpoint = id, rank = p.rank, reason = %p.reason, "checkpoint failed to load; falling back");
            }
            if self.comm.rank() == 0 {
                let list: Vec<String> = trouble
                    .iter()
                    .map(|p| format!("rank {}: {}", p.rank, p.reason))
                    .collect();
                eprintln!(
                    "frame: checkpoint {id} failed to load ({}); every rank falls back together",
                    list.join("; ")
                );
            }
            let Phase::Recovering(pending) = std::mem::replace(&mut self.phase, Phase::Running)
            else {
                return Err(Error::NothingToRecover);
            };
            let Pending {
                inventory,
                mut excluded,
                mut excluded_levels,
                fetched,
                ..
            } = *pending;
            excluded.push(id);
            let replanned = if self.levels.is_some()
                && self.cfg.recovery.strategy == Strategy::FailureAware
            {
                // Every rank moves on to the next level's copy of `id` (or
                // an older checkpoint), this rank without its damaged file.
                let level = match fetched {
                    Some((level, fetched)) if fetched == id => level,
                    _ => Level::L1,
                };
                excluded_levels.push((level, id));
                if local.is_some() {
                    if let Err(e) = self.store.abort(id) {
                        tracing::warn!(checkpoint = id, error = %e, "could not remove a damaged file");
                    }
                }
                let inventory = self.inventory();
                self.start_aware(inventory, excluded_levels)
            } else {
                self.plan(inventory, excluded)
            };
            if let Err(e) = replanned {
                return Err(match e {
                    Error::NotRecoverable {
                        problems: mut more,
                        note,
                    } => {
                        let mut all = trouble;
                        all.append(&mut more);
                        Error::NotRecoverable {
                            problems: all,
                            note,
                        }
                    }
                    other => other,
                });
            }
        }
    }

    /// Restores the single region `id` from the agreed checkpoint (or,
    /// once this run committed checkpoints, from the newest of them). Not
    /// collective: each rank may restore the regions it wants, then call
    /// `snapshot` as usual.
    pub fn recover_region(&mut self, id: RegionId) -> Result<()> {
        let region = self
            .registry
            .get(id)
            .cloned()
            .ok_or_else(|| Error::Region {
                id,
                reason: "is not protected".into(),
            })?;
        let fixed = self.registry.is_fixed(id);
        let to_error = |f: LoadFailure| Error::Region {
            id,
            reason: f.text().to_string(),
        };
        let (ckpt, file) = self.current_file()?;
        let stored = file.region(id).ok_or_else(|| Error::Region {
            id,
            reason: format!("checkpoint {ckpt} does not hold it"),
        })?;
        check_fit(id, &region, stored, fixed).map_err(to_error)?;
        load_one(file, id, &region, stored).map_err(to_error)?;
        self.restored_here();
        Ok(())
    }

    /// After a checkpoint came back from a level above 1 (its level-1 copies
    /// are whole again), has it promoted again to levels 2 and 3 under the
    /// current placement, so that the copies lost with a node are rebuilt
    /// and a second failure is survivable before the next checkpoint.
    /// Collective (level 3 gathers the nodes' sizes).
    fn rebuild_levels(&mut self, id: u64) -> Result<()> {
        let Some((from, fetched)) = self.pending_mut().and_then(|p| p.fetched.take()) else {
            return Ok(());
        };
        let stamp = (self.pending())
            .and_then(|p| p.inventory.valid.iter().find(|h| h.id == id))
            .map(|h| h.stamp);
        let blob_len = self
            .store
            .open_checkpoint(id)
            .map(|(_, m)| m.to_json().len() as u64 + m.file_len)
            .unwrap_or(0);
        let (Some(levels), Some(stamp)) = (self.levels.as_mut(), stamp) else {
            return Ok(());
        };
        if fetched != id {
            return Ok(());
        }
        let again: Vec<crate::level::Level> = [crate::level::Level::L2, crate::level::Level::L3]
            .into_iter()
            .filter(|l| !self.cfg.level_interval(*l).is_zero())
            .collect();
        tracing::info!(checkpoint = id, from = %from, "rebuilding the lost copies of the recovered checkpoint");
        levels.promote(self.comm, id, stamp, blob_len, &again)
    }

    /// Removes this rank's checkpoints newer than `id`, which can never be
    /// restored consistently once `id` is. A failure only leaves leftovers.
    pub(super) fn discard_newer(&mut self, id: u64) {
        if let Err(e) = self.store.discard_newer(id) {
            tracing::warn!(checkpoint = id, error = %e, "could not remove newer leftovers");
        }
    }

    /// Leaves the recovering phase after checkpoint `id` was restored: ids
    /// continue past every id any rank held when recovery was planned.
    pub(super) fn finish_recovery(&mut self, id: u64) -> Result<()> {
        self.stats.recovered_from = Some(match self.pending().and_then(|p| p.fetched) {
            Some((level, fetched)) if fetched == id => level,
            _ => crate::level::Level::L1,
        });
        self.rebuild_levels(id)?;
        self.store.set_committed(id);
        // The restored checkpoint is committed on every rank: a node that
        // got it back from a higher level records it too, so that losing
        // the others next never looks like a job with no checkpoint.
        if let Err(e) = self.store.advance(id) {
            tracing::warn!(checkpoint = id, error = %e, "could not record the restored checkpoint as the newest");
        }
        self.comm.link().note_committed(Some(id));
        self.phase = Phase::Running;
        self.next_id = self.next_id_after(id);
        self.stats.last_id = Some(id);
        Ok(())
    }
}

/// Loads every region of `regions` from `file` (checkpoint `ckpt`): all
/// fit checks happen before any load.
pub(super) fn load_regions(
    regions: &[ProtectedRegion],
    ckpt: u64,
    file: &CheckpointFile,
) -> Result<(), LoadFailure> {
    check_all_fit(regions, ckpt, &file.regions())?;
    for (id, region, _) in regions {
        if let Some(s) = file.region(*id) {
            load_one(file, *id, region, s)?;
        }
    }
    Ok(())
}

/// Checks that `regions` take checkpoint `ckpt`'s `stored` regions: each
/// protected region is stored, fits, and no stored region of the program's
/// memory goes unprotected.
pub(super) fn check_all_fit(
    regions: &[ProtectedRegion],
    ckpt: u64,
    stored: &[RegionInfo],
) -> Result<(), LoadFailure> {
    for (id, region, fixed) in regions {
        let s = stored.iter().find(|s| s.id == *id).ok_or_else(|| {
            LoadFailure::Mismatch(format!(
                "region {id} is protected but checkpoint {ckpt} does not hold it"
            ))
        })?;
        check_fit(*id, region, *s, *fixed)?;
    }
    if let Some(extra) = stored
        .iter()
        .filter(|s| s.id < crate::format::file_table::FIRST)
        .find(|s| !regions.iter().any(|(id, ..)| *id == s.id))
    {
        return Err(LoadFailure::Mismatch(format!(
            "checkpoint {ckpt} holds region {} ({} x {}), which is not protected",
            extra.id, extra.count, extra.elem
        )));
    }
    Ok(())
}
