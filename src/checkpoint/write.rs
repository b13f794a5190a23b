//! Writing coordinated checkpoints.
//!
//! A checkpoint commits in three steps, each closed by an agreement among all
//! ranks: (1) every rank writes its file and record durably; (2) every rank
//! advances `LATEST`; (3) only then does any rank retire checkpoints beyond
//! the retention count. A failure in step 1 anywhere removes the new files
//! everywhere; a failure in step 2 anywhere skips retention everywhere. Either
//! way the previous checkpoint stays restorable.

use super::{Checkpointer, Phase};
use crate::comm::agree_on_problems;
use crate::error::{problems, Error, Result};
use crate::format::{Metadata, RegionSource};
use crate::level::l1::WriteOptions;
use crate::level::Level;
use crate::region::RegionInfo;
use std::time::{Duration, Instant};

impl Checkpointer<'_> {
    /// Counts a call in the program's main loop and writes a checkpoint when
    /// the configured interval says so. Returns the id written, if any.
    /// Collective.
    pub fn snapshot(&mut self) -> Result<Option<u64>> {
        self.no_files_open()?;
        if !self.schedule.due(self.comm)? {
            return Ok(None);
        }
        self.checkpoint().map(Some)
    }

    /// How many more [`snapshot`](Self::snapshot) calls until the one that
    /// writes the next checkpoint (that one included), when the schedule
    /// counts calls (or has turned a time interval into calls); `None`
    /// while it decides by the clock. A replacement that shares its
    /// recomputation with helpers (`recovery.spares`) learns from it how
    /// long to share: the state must be whole again for that checkpoint.
    pub fn calls_to_checkpoint(&self) -> Option<u64> {
        self.schedule.calls_left()
    }

    /// Writes a checkpoint now, whatever the interval. Collective.
    pub fn checkpoint(&mut self) -> Result<u64> {
        self.no_files_open()?;
        self.checkpoint_with(None)
    }

    /// Writes a checkpoint now and has it promoted to `level` (besides the
    /// levels whose interval is due). Level 1 is the same as
    /// [`checkpoint`](Self::checkpoint). Collective.
    pub fn checkpoint_at(&mut self, level: Level) -> Result<u64> {
        self.no_files_open()?;
        if level != Level::L1 && self.levels.is_none() {
            return Err(Error::Level {
                level,
                reason: "no level above 1 is configured (set its interval in [l2], [l3] or [l4])"
                    .into(),
            });
        }
        self.checkpoint_with(Some(level).filter(|l| *l != Level::L1))
    }

    /// Refuses a snapshot while a checkpoint of files is begun.
    fn no_files_open(&self) -> Result<()> {
        match self.files_open() {
            true => Err(Error::Level {
                level: Level::L1,
                reason: "a checkpoint of files is begun: end it (end_checkpoint) before the next snapshot".into(),
            }),
            false => Ok(()),
        }
    }

    pub(super) fn checkpoint_with(&mut self, forced: Option<Level>) -> Result<u64> {
        // A file kept open for a rollback would keep its slot from being
        // written in place.
        self.rollback = None;
        if let Phase::Rejoining(p) = &self.phase {
            // The others are past this checkpoint: this rank catches up first.
            self.recover_rejoining(p.id)?;
        }
        if let Some(pending) = self.pending() {
            let id = pending.id;
            if !pending.restored_here {
                tracing::warn!(
                    checkpoint = id,
                    "checkpointing without having recovered: the agreed checkpoint is superseded"
                );
            }
            self.finish_recovery(id)?;
        }
        let started = Instant::now();
        // The id is only consumed once the checkpoint commits: ids stay
        // consecutive, which recovery planning relies on.
        let id = self.next_id;

        let stamp = self.next_stamp();
        if let Some(levels) = self.levels.as_mut() {
            // Saved with the checkpoint (see `promotion/state.rs`).
            levels.sample_status();
        }
        let written = self.write_local(id, stamp);
        self.commit(id, stamp, written, forced, started)
    }

    /// Steps 1 (its agreement) to 3 for checkpoint `id`, whose file this
    /// rank wrote (`written`) or failed to write, then its promotions and
    /// records. Collective. A replacement rejoining the others (localised
    /// recovery) goes through it again for the checkpoint it restored.
    pub(super) fn commit(
        &mut self,
        id: u64,
        stamp: u64,
        written: std::result::Result<Metadata, String>,
        forced: Option<Level>,
        started: Instant,
    ) -> Result<u64> {
        let local = written.as_ref().err().map(String::as_str);
        let trouble = agree_on_problems(self.comm, local)?;
        if !trouble.is_empty() {
            if let Err(e) = self.store.abort(id) {
                tracing::warn!(checkpoint = id, error = %e, "could not remove an abandoned checkpoint");
            }
            // The next attempt reuses the id: no rank may create its
            // directory while another still removes it.
            self.comm.barrier()?;
            return Err(Error::SnapshotFailed {
                id,
                problems: problems(trouble),
            });
        }
        let meta = written.map_err(|reason| Error::SnapshotFailed {
            id,
            problems: problems(vec![(self.comm.rank(), reason)]),
        })?;

        let advanced = self.store.advance(id);
        let local = advanced.as_ref().err().map(|e| e.to_string());
        let trouble = agree_on_problems(self.comm, local.as_deref())?;
        if !trouble.is_empty() {
            // Some nodes committed `id`: never write that id again.
            self.next_id = id + 1;
            return Err(Error::SnapshotFailed {
                id,
                problems: problems(trouble),
            });
        }
        // Every rank advanced: the runtime keeps the fact off the nodes.
        self.comm.link().note_committed(Some(id));
        if let Err(e) = self.store.retain(self.cfg.retention.keep_last as usize) {
            tracing::warn!(checkpoint = id, error = %e, "could not retire old checkpoints");
        }

        self.next_id = id + 1;
        let mut promoted = Vec::new();
        if let Some(levels) = self.levels.as_mut() {
            let blob_len = meta.to_json().len() as u64 + meta.file_len;
            promoted = levels.after_commit(self.comm, id, stamp, blob_len, forced)?;
        }
        let took = started.elapsed();
        let highest = promoted.iter().max().copied().unwrap_or(Level::L1);
        if let Some(choice) = self.schedule.checkpointed(self.comm, took, highest)? {
            self.adopt(&choice, "chosen again from the measured costs");
        }
        self.record_metrics(id, took, &meta, &promoted)?;
        self.record_rejoin(id);
        self.stats.checkpoints += 1;
        self.stats.checkpoint_time += took;
        self.stats.last_checkpoint_time = took;
        self.stats.raw_bytes += meta.raw_bytes;
        self.stats.stored_bytes += meta.stored_bytes;
        self.stats.last_id = Some(id);
        tracing::info!(
            checkpoint = id,
            bytes = meta.raw_bytes,
            stored = meta.stored_bytes,
            micros = took.as_micros() as u64,
            "checkpoint committed"
        );
        Ok(id)
    }

    /// Puts automatic intervals in force (and says so, on rank 0).
    pub(super) fn adopt(&mut self, choice: &super::tuning::Choice, why: &str) {
        if let Some(levels) = self.levels.as_mut() {
            levels.set_auto(&choice.every);
        }
        if self.comm.rank() == 0 {
            let every: Vec<String> = choice
                .every
                .iter()
                .map(|(l, k)| format!("{l} every {k} checkpoints"))
                .collect();
            tracing::info!(
                period = %humantime::format_duration(Duration::from_millis(choice.period.as_millis() as u64)),
                levels = %every.join(", "),
                "automatic intervals {why}"
            );
        }
    }

    /// Step 1 on this rank: lock the regions and write the file and record.
    fn write_local(&mut self, id: u64, stamp: u64) -> std::result::Result<Metadata, String> {
        let counts = self
            .comm
            .link()
            .message_counts()
            .map(|c| super::messages::encode(&c));
        // A logging communicator's checkpoints also keep the promotion
        // bookkeeping, for a replacement that restores one alone.
        let bookkeeping = match (&counts, &self.levels) {
            (Some(_), Some(levels)) => Some(levels.saved_region()),
            _ => None,
        };
        if counts.is_some()
            && super::messages::RESERVED
                .iter()
                .any(|id| self.registry.get(*id).is_some())
        {
            return Err(super::messages::reserved());
        }
        let (files, held_files) = self.file_sources(id).map_err(|e| e.to_string())?;
        let mut held = Vec::with_capacity(self.registry.len());
        for (rid, region) in self.registry.iter() {
            match region.try_read() {
                Some(guard) => held.push((rid, guard)),
                None => {
                    return Err(format!(
                        "region {rid} is locked for writing by the program (drop the guard before snapshot)"
                    ))
                }
            }
        }
        let mut sources: Vec<RegionSource<'_>> = held
            .iter()
            .map(|(rid, guard)| {
                let r = guard.region();
                RegionSource {
                    info: RegionInfo {
                        id: *rid,
                        elem: r.elem_type(),
                        count: r.count() as u64,
                    },
                    bytes: r.as_bytes(),
                }
            })
            .collect();
        // In ascending ids, as the format wants: the files and their
        // table, the bookkeeping, then the counts.
        for (info, mapped) in &files {
            sources.push(RegionSource {
                info: *info,
                bytes: mapped.bytes(),
            });
        }
        for (info, bytes) in bookkeeping.iter().chain(&counts) {
            sources.push(RegionSource { info: *info, bytes });
        }
        let opts = WriteOptions {
            chunk_size: self.cfg.chunk_bytes(),
            zstd_level: self.zstd_level(),
        };
        let written = self
            .store
            .write(id, stamp, &sources, opts)
            .map_err(|e| e.to_string())?;
        drop(sources);
        drop(held);
        drop(files);
        if !held_files.is_empty() {
            self.store.seal_held(id, held_files, opts.chunk_size);
        }
        Ok(written)
    }
}
