//! Ending a run: removing the job's checkpoints once every rank reached
//! the end, or keeping the newest in the global directory only, so that
//! the next run restarts from it on nodes whose storage was wiped in
//! between (FTI's `keep_last_ckpt`).

use super::Checkpointer;
use crate::comm::agree_on_problems;
use crate::error::{problems, Error, Result};
use crate::level::{L1Store, Level};

impl Checkpointer<'_> {
    /// Ends checkpointing. Collective. Unless `retention.keep_on_finalize` is
    /// set, removes this job's checkpoints once every rank has arrived, so the
    /// next run starts from the beginning: first every node's pointer, then
    /// the files, oldest checkpoint first. A kill part way leaves the newest
    /// checkpoint restorable, or nothing restorable (a fresh start).
    pub fn finalize(mut self) -> Result<()> {
        if let Some(levels) = self.levels.as_mut() {
            levels.drain(self.comm)?;
        }
        self.comm.barrier()?;
        if self.cfg.retention.keep_on_finalize {
            return Ok(());
        }
        self.confirm_end()?;
        // Every rank reached the end: from here a failure may start over,
        // as the files are about to go. The runtime forgets its record
        // before anything is removed.
        self.comm.link().note_committed(None);
        if let Some(levels) = self.levels.as_mut() {
            let local = levels.remove_all().err();
            let trouble = agree_on_problems(self.comm, local.as_deref())?;
            if !trouble.is_empty() {
                return Err(Error::Finalize {
                    problems: problems(trouble),
                });
            }
        }
        self.remove_level_1()
    }

    /// Asks, on every rank, whether the job ends well (under a runtime, its
    /// root owns the job's outcome) and agrees on it: a job the runtime
    /// gave up on, or cannot vouch for, keeps every checkpoint, and the
    /// error names the ranks that were refused and why. Collective.
    fn confirm_end(&mut self) -> Result<()> {
        let refused = self.comm.link().confirm_end().err().map(|why| {
            format!("the runtime did not confirm that the job ends well ({why}); every checkpoint is kept")
        });
        let trouble = agree_on_problems(self.comm, refused.as_deref())?;
        if !trouble.is_empty() {
            return Err(Error::Finalize {
                problems: problems(trouble),
            });
        }
        Ok(())
    }

    /// Removes this job's level-1 files on every rank: first every node's
    /// pointer, then the files, oldest checkpoint first. Collective.
    fn remove_level_1(&mut self) -> Result<()> {
        for step in [L1Store::forget_pointer, L1Store::remove_all] {
            let local = step(&mut self.store).err().map(|e| e.to_string());
            let trouble = agree_on_problems(self.comm, local.as_deref())?;
            if !trouble.is_empty() {
                return Err(Error::Finalize {
                    problems: problems(trouble),
                });
            }
        }
        Ok(())
    }

    /// Ends checkpointing keeping the newest checkpoint (written in this
    /// run, or restored by it) in the global directory only: unless level
    /// 4 committed it already, it is promoted to level 4 now, and once
    /// level 4 holds it the node-local copies (levels 1 to 3) are removed.
    /// Returns the checkpoint kept. Without any checkpoint, removes
    /// everything as [`finalize`](Self::finalize) does. When level 4
    /// cannot take it, nothing is removed and the error says so.
    /// Collective.
    pub fn finalize_to_global(mut self) -> Result<Option<u64>> {
        let Some(levels) = self.levels.as_mut() else {
            return Err(Error::Level {
                level: Level::L4,
                reason: "is not configured (set [l4] interval and storage.global_dir)".into(),
            });
        };
        levels.drain(self.comm)?;
        let Some(id) = self.stats.last_id else {
            self.cfg.retention.keep_on_finalize = false;
            self.finalize()?;
            return Ok(None);
        };
        if levels.newest_committed(Level::L4) < id {
            // Every rank's record, agreed before the promotion's collectives.
            let meta = self.store.open_checkpoint(id).map(|(_, meta)| meta);
            let local = meta.as_ref().err().map(|e| e.to_string());
            let trouble = agree_on_problems(self.comm, local.as_deref())?;
            let meta = match meta {
                Ok(m) if trouble.is_empty() => m,
                _ => {
                    return Err(Error::Finalize {
                        problems: problems(trouble),
                    })
                }
            };
            let blob_len = meta.to_json().len() as u64 + meta.file_len;
            levels.promote(self.comm, id, meta.stamp, blob_len, &[Level::L4])?;
            levels.drain(self.comm)?;
            if levels.newest_committed(Level::L4) < id {
                return Err(Error::Level {
                    level: Level::L4,
                    reason: format!(
                        "checkpoint {id} could not be written to the global directory (see the warnings); every copy is kept"
                    ),
                });
            }
        }
        self.comm.barrier()?;
        self.confirm_end()?;
        let Some(levels) = self.levels.as_mut() else {
            return Ok(Some(id));
        };
        self.comm.link().note_committed(None);
        let local = levels.remove_local().err();
        let trouble = agree_on_problems(self.comm, local.as_deref())?;
        if !trouble.is_empty() {
            return Err(Error::Finalize {
                problems: problems(trouble),
            });
        }
        self.remove_level_1()?;
        Ok(Some(id))
    }
}
