//! The newest run and epoch of each job a manager has heard of, and the
//! refusal of copies that belong to older ones: what fences the storage a
//! node keeps for other nodes (level-2 copies, level-3 parity), as the
//! `FENCE` file fences the global directory (see
//! [`Fence`]).
//!
//! A manager hears the job's epoch from the promotions its own node's
//! ranks submit, the commits they order, and the copies peers send. A copy
//! a peer sends for an older epoch comes from a node the job gave up on
//! (frozen across a recovery and thawed, or cut off past its lease): it is
//! refused before a byte is kept, so it cannot overwrite what the job's
//! live nodes wrote since.

use crate::level::Fence;
use std::collections::BTreeMap;
use std::sync::Mutex;

/// The most jobs a manager tracks (a node serves one job at a time;
/// beyond this the first by name is forgotten).
const MAX_JOBS: usize = 64;

/// A copy refused because the job has left its epoch behind.
#[derive(Debug, thiserror::Error)]
#[error(
    "refused a copy of job {job}: it belongs to epoch {}, and the job has moved on to epoch {}{} (it comes from a node the job gave up on)",
    mine.epoch,
    now.epoch,
    if now.launch > mine.launch { " of a later run" } else { "" }
)]
pub(super) struct Stale {
    /// The job.
    job: String,
    /// The copy's run and epoch.
    mine: Fence,
    /// The newest the manager knows of the job.
    now: Fence,
}

/// The newest fence of each job, as far as this manager knows.
#[derive(Default)]
pub(super) struct Fences {
    newest: Mutex<BTreeMap<String, Fence>>,
}

impl Fences {
    /// Notes that live ranks of `job` are at `fence` (if it is newer).
    pub(super) fn note(&self, job: &str, fence: Option<Fence>) {
        let Some(fence) = fence else {
            return;
        };
        let mut newest = self.newest.lock().unwrap_or_else(|p| p.into_inner());
        match newest.get_mut(job) {
            Some(known) => *known = (*known).max(fence),
            None => {
                if newest.len() >= MAX_JOBS {
                    newest.pop_first();
                }
                newest.insert(job.to_string(), fence);
            }
        }
    }

    /// Admits a copy of `job` that belongs to `fence`, noting it; refuses
    /// one older than the newest known, saying why. A copy without a fence
    /// (a job outside the runtime) is not checked.
    pub(super) fn admit(&self, job: &str, fence: Option<Fence>) -> Result<(), Stale> {
        let Some(mine) = fence else {
            return Ok(());
        };
        let known = self
            .newest
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(job)
            .copied();
        match known {
            Some(now) if now > mine => Err(Stale {
                job: job.to_string(),
                mine,
                now,
            }),
            _ => {
                self.note(job, Some(mine));
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests;
