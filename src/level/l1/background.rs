//! Work a rank's level-1 store does off the program's path, on a thread
//! of its own: sealing the files a checkpoint holds, and removing those of
//! a retired checkpoint (freeing a large file's pages takes about a third
//! as long as writing them). The thread starts with the first job and
//! runs jobs one at a time, in order, so a retired checkpoint's files are
//! gone before the next one's go, which keeps node-local storage to its
//! formula (`docs/STORAGE.md`). Each job belongs to one checkpoint; the
//! store waits for a checkpoint's jobs before it touches that checkpoint's
//! directory again, and for all of them before it removes everything or
//! is dropped, so a job never races the store and never outlives it.

use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

/// What a job does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Job {
    /// Computes the seal of a checkpoint's held files.
    Seal,
    /// Removes a retired checkpoint's held files.
    Remove,
}

type Work = Box<dyn FnOnce() + Send>;
/// A job as queued: its checkpoint, its kind and what it does.
type Queued = (u64, Job, Work);

/// The jobs not yet done, by checkpoint and kind, and a signal when one
/// is.
#[derive(Default)]
struct Pending {
    jobs: Mutex<Vec<(u64, Job)>>,
    done: Condvar,
}

impl Pending {
    fn finish(&self, id: u64, kind: Job) {
        let mut jobs = self.jobs.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = jobs.iter().position(|j| *j == (id, kind)) {
            jobs.remove(i);
        }
        self.done.notify_all();
    }
}

/// The store's worker thread, once started.
#[derive(Default)]
pub(super) struct Background {
    worker: Option<(mpsc::Sender<Queued>, JoinHandle<()>)>,
    pending: Arc<Pending>,
}

impl Background {
    /// Queues `work` (a `kind` of job) for checkpoint `id`; runs it here
    /// when the worker cannot start. `name` names the worker thread.
    pub(super) fn spawn(
        &mut self,
        id: u64,
        kind: Job,
        name: &str,
        work: impl FnOnce() + Send + 'static,
    ) {
        if self.worker.is_none() {
            let (tx, rx) = mpsc::channel::<Queued>();
            let pending = Arc::clone(&self.pending);
            let started = std::thread::Builder::new()
                .name(name.to_string())
                .spawn(move || {
                    for (id, kind, work) in rx {
                        // A job that panics must not leave its waiters
                        // waiting, nor stop the jobs after it.
                        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work));
                        if run.is_err() {
                            tracing::error!(checkpoint = id, job = ?kind, "a background job panicked");
                        }
                        pending.finish(id, kind);
                    }
                });
            match started {
                Ok(handle) => self.worker = Some((tx, handle)),
                Err(e) => {
                    tracing::warn!(checkpoint = id, error = %e, "no thread for background work: doing it now");
                    work();
                    return;
                }
            }
        }
        let Some((tx, _)) = &self.worker else {
            return;
        };
        self.pending
            .jobs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((id, kind));
        if let Err(mpsc::SendError((id, kind, work))) = tx.send((id, kind, Box::new(work))) {
            // The worker is gone (it can only end with the store).
            self.pending.finish(id, kind);
            work();
        }
    }

    /// Waits for the jobs of checkpoint `id`.
    pub(super) fn wait_for(&self, id: u64) {
        self.wait(|j| j == id);
    }

    /// Waits for every job.
    pub(super) fn wait_all(&self) {
        self.wait(|_| true);
    }

    /// Waits until no job `which` picks (by checkpoint) is pending.
    fn wait(&self, which: impl Fn(u64) -> bool) {
        let mut jobs = self.pending.jobs.lock().unwrap_or_else(|p| p.into_inner());
        while jobs.iter().any(|(id, _)| which(*id)) {
            jobs = self
                .pending
                .done
                .wait(jobs)
                .unwrap_or_else(|p| p.into_inner());
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if let Some((tx, handle)) = self.worker.take() {
            drop(tx);
            let _ = handle.join();
        }
    }
}

#[cfg(test)]
mod tests;
