//! Loading a checkpoint straight from level 4, in one pass.
//!
//! When failure-aware recovery chooses level 4, no rank needs another's
//! help: each reads its own file from the global directory. So the read
//! waits for the load, where the protected regions are known, and every
//! chunk read goes into the rank's regions (CRC computed in the same copy)
//! and into level 1 (which keeps a node-local copy for the next failure)
//! at once: one pass over the global level instead of a copy into level 1
//! and a load from there. Damage found on the way fails the load, and
//! every rank moves on together, as for any load
//! ([`recover`](Checkpointer::recover)).
//!
//! What the file stores is known before the load, from its record. A
//! restore that needs the file first (a single region, a restore by this
//! rank alone, an interface that fetches at initialisation:
//! [`fetch_now`](Checkpointer::fetch_now)) brings it into level 1 the
//! plain way and loads from there.

use super::restore::{check_all_fit, LoadFailure, ProtectedRegion};
use super::Checkpointer;
use crate::format::{Metadata, Target};
use crate::region::{HeldRegionMut, RegionId};
use std::time::Instant;

impl Checkpointer<'_> {
    /// The record of this rank's file of the checkpoint being recovered,
    /// while that file is still at level 4.
    pub(super) fn on_load_record(&self) -> Option<Metadata> {
        let pending = self.pending().filter(|p| p.on_load)?;
        let world = self.comm.size() as u32;
        let me = self.comm.rank() as u32;
        let store = self.global_store()?;
        store.open_copy(pending.id, me, world).ok().map(|(m, _)| m)
    }

    /// Brings this rank's file of the checkpoint being recovered from level
    /// 4 into level 1 and, given `regions`, loads them in the same pass
    /// (all fit checks first). Then the file is level 1's, as if fetched.
    pub(super) fn fetch_on_load(
        &mut self,
        regions: Option<&[ProtectedRegion]>,
    ) -> Result<(), LoadFailure> {
        let Some(id) = self.pending().map(|p| p.id) else {
            return Err(LoadFailure::Data("nothing to recover".into()));
        };
        let world = self.comm.size() as u32;
        let me = self.comm.rank() as u32;
        let started = Instant::now();
        let store = self
            .global_store()
            .ok_or_else(|| LoadFailure::Data("no level-4 directory".into()))?;
        let (meta, chunks) = store
            .open_copy(id, me, world)
            .map_err(|e| LoadFailure::Data(e.to_string()))?;
        let mut chunks = chunks.checked_by_reader();
        let installed = match regions {
            None => self.store.install_from(&meta, &mut chunks),
            Some(regions) => {
                sized_by_its_file(&meta)?;
                check_all_fit(regions, id, &meta.regions)?;
                let mut held = hold(regions, &meta)?;
                let targets = targets(&mut held)?;
                self.store.install_loading(&meta, &mut chunks, targets)
            }
        };
        self.stats.fetch_time += started.elapsed();
        installed.map_err(|e| {
            // The format's CRCs found the damage; the chunk hashes name
            // the global file that holds it.
            match store.verify(id, me, world) {
                Err(named) => LoadFailure::Data(format!("{named} ({e})")),
                Ok(()) => LoadFailure::Data(e.to_string()),
            }
        })?;
        let (file, _) = self
            .store
            .open_checkpoint(id)
            .map_err(|e| LoadFailure::Data(e.to_string()))?;
        let level = self.pending().and_then(|p| p.fetched).map(|(l, _)| l);
        if let Some(level) = level {
            tracing::info!(checkpoint = id, level = %level, "checkpoint brought back to level 1");
        }
        let inventory = self.inventory();
        if let Some(p) = self.pending_mut() {
            p.file = Some(file);
            p.on_load = false;
            p.inventory = inventory;
        }
        Ok(())
    }
}

impl Checkpointer<'_> {
    /// Brings the checkpoint agreed for recovery into level 1 on every
    /// rank now, rather than when [`recover`](Checkpointer::recover) loads
    /// it (a level-4 file is otherwise read then, in one pass). For
    /// interfaces whose initialisation answers whether a restart can
    /// succeed, as FTI's does. If some rank cannot fetch its file, every
    /// rank plans again without that copy, as a failed load does; the
    /// error is the plan's when nothing else restores. Collective; nothing
    /// to do when the checkpoint is in level 1 already.
    pub fn fetch_now(&mut self) -> crate::error::Result<()> {
        while let Some(pending) = self.pending().filter(|p| p.on_load) {
            let id = pending.id;
            let local = self.fetch_on_load(None).err();
            let trouble =
                crate::comm::agree_on_problems(self.comm, local.as_ref().map(LoadFailure::text))?;
            if trouble.is_empty() {
                return Ok(());
            }
            for (rank, reason) in &trouble {
                tracing::warn!(checkpoint = id, rank, reason = %reason, "could not fetch a level-4 copy");
            }
            let super::Phase::Recovering(pending) =
                std::mem::replace(&mut self.phase, super::Phase::Running)
            else {
                return Ok(());
            };
            let mut excluded = pending.excluded_levels;
            if let Some(fetched) = pending.fetched {
                excluded.push(fetched);
            }
            let inventory = self.inventory();
            self.start_aware(inventory, excluded)?;
        }
        Ok(())
    }
}

/// Checks that a record's regions add up to its bytes, and (stored raw)
/// fit in its file, before memory is sized by them: a damaged record
/// fails the load instead of asking for absurd amounts of memory. The
/// file's own tables are checked against the regions as it streams by.
fn sized_by_its_file(meta: &Metadata) -> Result<(), LoadFailure> {
    let total = (meta.regions.iter())
        .try_fold(0u64, |sum, r| {
            r.count
                .checked_mul(r.elem.size() as u64)
                .and_then(|b| sum.checked_add(b))
        })
        .filter(|&t| t == meta.raw_bytes);
    let raw = meta.compression == crate::format::Compression::None;
    match total {
        Some(t) if !raw || t <= meta.file_len => Ok(()),
        _ => Err(LoadFailure::Data(format!(
            "the level-4 record of rank {} describes regions that do not add up to its {} bytes",
            meta.rank, meta.raw_bytes
        ))),
    }
}

/// A region being loaded: its id, its stored element count, and the
/// program's region held for writing.
type Held<'r> = (RegionId, u64, Box<dyn HeldRegionMut + 'r>);

/// Holds every region of `regions` that `meta` stores, for writing.
fn hold<'r>(regions: &'r [ProtectedRegion], meta: &Metadata) -> Result<Vec<Held<'r>>, LoadFailure> {
    let mut held = Vec::with_capacity(regions.len());
    for (id, region, _) in regions {
        let Some(stored) = meta.regions.iter().find(|s| s.id == *id) else {
            continue;
        };
        let guard = region.try_write().ok_or_else(|| {
            LoadFailure::Mismatch(format!("region {id} is locked by the program"))
        })?;
        held.push((*id, stored.count, guard));
    }
    Ok(held)
}

/// The memory of every held region, sized to what is stored.
fn targets<'t>(held: &'t mut [Held<'_>]) -> Result<Vec<Target<'t>>, LoadFailure> {
    let mut targets = Vec::with_capacity(held.len());
    for (id, count, guard) in held.iter_mut() {
        let id = *id;
        let stored = *count;
        let count = usize::try_from(stored).map_err(|_| {
            LoadFailure::Mismatch(format!("region {id}: too large for this machine"))
        })?;
        let bytes = guard.region_mut().load_target(count).map_err(|current| {
            LoadFailure::Mismatch(format!(
                "region {id}: checkpoint holds {stored} elements, the protected region has {current} and cannot be resized"
            ))
        })?;
        targets.push(Target::new(id, bytes));
    }
    Ok(targets)
}
