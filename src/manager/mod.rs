//! The manager: one per node, promoting checkpoints from level 1 to the
//! higher levels in the background while the ranks compute.
//!
//! A manager is a service with an address. The lowest rank of each node
//! submits a [`Task`] once a checkpoint has committed at level 1 on every
//! rank; the manager queues it (at most `queue` of them; when full, the
//! submitter waits or the task is skipped, as configured), and a worker
//! thread runs each level's transformation in turn (see `promote.rs`):
//! reading the node's level-1 files, linking or writing copies, and sending
//! partner copies to the partner node's manager. Ranks later ask where each
//! promotion is ([`Progress`]), agree among themselves, and tell every
//! manager which levels committed ([`proto::CommitOrder`]); only then does
//! a manager mark a checkpoint committed and retire what it supersedes.
//!
//! The manager does not depend on who hosts it: a thread in a rank (the
//! inline mode, see [`inline`]), or a process of its own. It never exits
//! the process and never spins: its threads sleep on a socket or a
//! condition variable.

mod client;
pub(crate) mod copy_back;
#[cfg(feature = "mpi")]
pub mod dedicated;
mod fences;
pub mod inline;
mod parity;
mod promote;
pub(crate) mod proto;
mod serve;
pub(crate) mod shard_back;
pub(crate) mod task;
#[cfg(test)]
mod tests;

pub use client::Client;
pub(crate) use proto::{CommitOrder, RemoveOrder};
pub use proto::{Reply, Request};
pub(crate) use task::Transform;
pub use task::{Progress, Task};

use crate::auth::Secret;
use crate::comm::net::{Bind, Endpoint};
use crate::config::WhenFull;
use crate::level::erasure::ErasureStore;
use crate::level::staging::{StageError, Staging};
use crate::level::{CopyStore, GlobalStore, Level};
use crate::metrics::{PromotionRecord, Record};
use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex};

/// The Unix socket a node's manager listens on when a rank or an MPI
/// manager rank starts it (frame's runtime puts its own in its run
/// directory): named after the job, or, where that path would pass the
/// kernel's limit on socket paths, after a hash of the job id.
pub fn socket_in(local_dir: &std::path::Path, job_id: &str, node: u32) -> PathBuf {
    /// Bytes of a socket path: the kernel takes 107, and the socket is
    /// bound under a temporary name up to 18 bytes longer first.
    const FITS: usize = 88;
    let named = local_dir.join(format!(".manager-{job_id}-node-{node}.sock"));
    if named.as_os_str().len() <= FITS {
        return named;
    }
    let hash = blake3::hash(job_id.as_bytes()).to_hex();
    local_dir.join(format!(".manager-{}-node-{node}.sock", &hash[..16]))
}

/// How a manager runs.
#[derive(Clone, Debug)]
pub struct Options {
    /// The node it serves.
    pub node: u32,
    /// The node's local directory (`storage.local_dir` of its ranks).
    pub local_dir: PathBuf,
    /// Promotions that may wait.
    pub queue: usize,
    /// What a submission does when that many wait.
    pub when_full: WhenFull,
    /// Where to listen.
    pub bind: Bind,
    /// A TCP socket, already listening, that managers on other hosts reach
    /// this one on, besides `bind` (frame's runtime binds it once per
    /// node, so its port outlives a manager's restart).
    pub peer_listener: Option<Arc<std::net::TcpListener>>,
    /// The job's secret.
    pub secret: Secret,
}

/// Where a node's manager runs when something other than frame started
/// it (for example a dedicated rank of each node in an MPI job), for
/// [`Checkpointer::init_with_manager`](crate::Checkpointer::init_with_manager).
#[derive(Clone, Debug)]
pub struct Link {
    /// Where the node's manager listens.
    pub endpoint: Endpoint,
    /// The job's secret, which that manager holds.
    pub secret: Secret,
}

/// Progress entries kept (the oldest are forgotten beyond this).
const MAX_PROGRESS: usize = 4096;

enum Work {
    Task(Box<Task>),
    Commit(CommitOrder),
    Remove(RemoveOrder),
}

#[derive(Default)]
struct State {
    queue: VecDeque<Work>,
    tasks_queued: usize,
    busy: bool,
    /// The task being promoted: (job, checkpoint).
    running: Option<(String, u64)>,
    stop: bool,
    progress: BTreeMap<(String, u64, Level), Progress>,
    parity: parity::Parity,
}

struct Shared {
    opts: Options,
    state: Mutex<State>,
    changed: Condvar,
    /// The newest run and epoch of each job heard of.
    fences: fences::Fences,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whose crash points this manager's file operations pass.
    fn who(&self) -> u32 {
        crate::safefs::crash::manager(self.opts.node)
    }

    /// Queues a task under the configured policy (blocking while the queue
    /// is full under `wait`), after linking its level-1 files into the
    /// staging area (so that level-1 retention cannot take them away).
    fn submit(&self, task: Box<Task>) -> Reply {
        let mut st = self.lock();
        let full = st.tasks_queued >= self.opts.queue;
        if full && self.opts.when_full == WhenFull::Skip {
            return Reply::Skipped(format!(
                "{} promotions are already waiting on node {}",
                st.tasks_queued, self.opts.node
            ));
        }
        // Staged files of this job that no queued or running task will use
        // (left by a manager that was killed) go first.
        let wanted: Vec<u64> = st
            .queue
            .iter()
            .filter_map(|w| match w {
                Work::Task(t) if t.job_id == task.job_id => Some(t.id),
                _ => None,
            })
            .chain(
                st.running
                    .iter()
                    .filter(|(j, _)| *j == task.job_id)
                    .map(|(_, id)| *id),
            )
            .collect();
        let staged = Staging::open(&self.opts.local_dir, &task.job_id, self.who()).and_then(|s| {
            for id in s
                .ids()
                .into_iter()
                .filter(|id| !wanted.contains(id) && *id != task.id)
            {
                s.unstage(id)?;
            }
            Ok(s)
        });
        let ranks = task.topology.ranks_on(task.node);
        let staged = staged
            .map_err(StageError::from)
            .and_then(|s| s.stage(task.id, task.stamp, &ranks, task.world()));
        if let Err(e) = staged {
            return Reply::Error(format!("cannot stage checkpoint {}: {e}", task.id));
        }
        while st.tasks_queued >= self.opts.queue && !st.stop {
            if self.opts.when_full == WhenFull::Skip {
                return Reply::Skipped(format!(
                    "{} promotions are already waiting on node {}",
                    st.tasks_queued, self.opts.node
                ));
            }
            st = self.changed.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        for (level, _) in &task.levels {
            st.progress
                .insert((task.job_id.clone(), task.id, *level), Progress::Pending);
        }
        while st.progress.len() > MAX_PROGRESS {
            st.progress.pop_first();
        }
        st.tasks_queued += 1;
        st.queue.push_back(Work::Task(task));
        self.changed.notify_all();
        Reply::Accepted
    }

    fn chore(&self, work: Work) -> Reply {
        let mut st = self.lock();
        st.queue.push_back(work);
        self.changed.notify_all();
        Reply::Ok
    }

    /// Where promotions are. Level 3 is done on a node once the node sent
    /// its terms and layout (the worker's part, recorded as done) and wrote
    /// the parity shards it holds.
    fn status(&self, job_id: &str, keys: &[(u64, Level)]) -> Reply {
        let st = self.lock();
        Reply::Status(
            keys.iter()
                .map(|(id, level)| {
                    let worker = st
                        .progress
                        .get(&(job_id.to_string(), *id, *level))
                        .cloned()
                        .unwrap_or(Progress::Unknown);
                    match (level, worker) {
                        (Level::L3, Progress::Done) => st.parity.progress(job_id, *id),
                        (_, p) => p,
                    }
                })
                .collect(),
        )
    }

    /// Adds a window of a member's terms of a parity shard to its sum;
    /// seals the node's level-3 part once everything arrived. Sums are
    /// read, added and written under the state's lock, so that windows
    /// of one shard from several members never interleave.
    fn add_term(
        &self,
        job_id: &str,
        term: &proto::Term,
        bytes: &[u8],
    ) -> Result<(), parity::ParityError> {
        let store = ErasureStore::open(&self.opts.local_dir, job_id, self.who())?;
        let ready =
            self.lock()
                .parity
                .term(job_id, self.opts.node, term, bytes.len() as u64, |fresh| {
                    if fresh {
                        store.drop_sums(term.group.id);
                    }
                    store.add_to_parity(term.group.id, term.key, term.offset, bytes)
                })?;
        self.write_parity(&store, job_id, ready);
        Ok(())
    }

    /// Records a member's blob layout (see [`add_term`](Self::add_term)).
    fn add_layout(
        &self,
        job_id: &str,
        layout: &proto::BlobLayout,
    ) -> Result<(), parity::ParityError> {
        let store = ErasureStore::open(&self.opts.local_dir, job_id, self.who())?;
        let ready = self
            .lock()
            .parity
            .layout(job_id, self.opts.node, layout, |fresh| {
                if fresh {
                    store.drop_sums(layout.group.id);
                }
            })?;
        self.write_parity(&store, job_id, ready);
        Ok(())
    }

    fn write_parity(&self, store: &ErasureStore, job_id: &str, ready: Option<parity::Ready>) {
        let Some(mut ready) = ready else {
            return;
        };
        let id = ready.manifest.checkpoint_id;
        ready.manifest.job_id = job_id.to_string();
        let piece = ready.manifest.piece;
        let written = ready
            .shards
            .iter()
            .try_for_each(|key| store.seal_parity(id, *key, piece))
            .and_then(|()| store.write_manifest(&ready.manifest));
        let result = written.map_err(|e| e.to_string());
        match &result {
            Ok(()) => tracing::info!(checkpoint = id, node = self.opts.node, "parity written"),
            Err(e) => tracing::warn!(checkpoint = id, error = %e, "could not write parity"),
        }
        self.lock().parity.written(job_id, id, result);
        self.changed.notify_all();
    }

    /// Waits until nothing is queued or running (promotions, commits,
    /// removals).
    fn drain(&self) -> Reply {
        let mut st = self.lock();
        while (!st.queue.is_empty() || st.busy) && !st.stop {
            st = self.changed.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        Reply::Ok
    }

    /// The worker: runs queued work until stopped.
    fn work(&self) {
        let mut peers = promote::Peers::new(self.opts.secret.clone());
        loop {
            let work = {
                let mut st = self.lock();
                loop {
                    if st.stop {
                        return;
                    }
                    if let Some(w) = st.queue.pop_front() {
                        st.busy = true;
                        if let Work::Task(t) = &w {
                            st.running = Some((t.job_id.clone(), t.id));
                        }
                        break w;
                    }
                    st = self.changed.wait(st).unwrap_or_else(|p| p.into_inner());
                }
            };
            let was_task = matches!(work, Work::Task(_));
            match work {
                Work::Task(task) => self.promote(&task, &mut peers),
                Work::Commit(order) => self.commit(&order),
                Work::Remove(order) => self.remove(&order),
            }
            let mut st = self.lock();
            st.busy = false;
            st.running = None;
            if was_task {
                st.tasks_queued -= 1;
            }
            self.changed.notify_all();
        }
    }

    fn promote(&self, task: &Task, peers: &mut promote::Peers) {
        self.promote_levels(task, peers);
        let unstaged = release_staged(&self.opts.local_dir, &task.job_id, self.who(), task.id);
        if let Err(e) = unstaged {
            tracing::warn!(checkpoint = task.id, error = %e, "could not remove staged files");
        }
    }

    fn promote_levels(&self, task: &Task, peers: &mut promote::Peers) {
        for (level, rule) in &task.levels {
            let level = *level;
            let who = self.who();
            let (result, unreachable) =
                match promote::run(task, level, rule, &self.opts.local_dir, who, peers) {
                    Ok(t) => (Ok(t), false),
                    Err(e) => (
                        Err(e.to_string()),
                        matches!(e, promote::Failure::Unreachable { .. }),
                    ),
                };
            if level == Level::L3 {
                let sent = result.as_ref().map(|_| ()).map_err(Clone::clone);
                self.lock().parity.sent(&task.job_id, task.id, sent);
            }
            if let Some(path) = &task.metrics {
                let (t, error) = match &result {
                    Ok(t) => (*t, None),
                    Err(e) => (Transform::default(), Some(e.clone())),
                };
                Record::Promotion(PromotionRecord {
                    job: task.job_id.clone(),
                    checkpoint: task.id,
                    level: level.number(),
                    node: task.node,
                    ok: error.is_none(),
                    micros: t.micros,
                    bytes_in: t.bytes_in,
                    bytes_out: t.bytes_out,
                    error,
                })
                .append(path);
            }
            let progress = match result {
                Ok(t) => {
                    tracing::info!(
                        checkpoint = task.id,
                        level = %level,
                        node = task.node,
                        micros = t.micros,
                        bytes_in = t.bytes_in,
                        bytes_out = t.bytes_out,
                        "promoted"
                    );
                    Progress::Done
                }
                Err(e) => {
                    // A peer that does not answer is a lost node the
                    // runtime reports, and the ranks report the level
                    // once for the job: no line from every node here.
                    if unreachable {
                        tracing::debug!(checkpoint = task.id, level = %level, node = task.node, error = %e, "promotion failed");
                    } else {
                        tracing::warn!(checkpoint = task.id, level = %level, node = task.node, error = %e, "promotion failed");
                    }
                    Progress::Failed(e)
                }
            };
            let mut st = self.lock();
            st.progress
                .insert((task.job_id.clone(), task.id, level), progress);
            self.changed.notify_all();
        }
    }

    fn commit(&self, o: &CommitOrder) {
        let local = &self.opts.local_dir;
        let who = self.who();
        let keep = o.keep_last as usize;
        let done = match o.level {
            Level::L2 | Level::L3 => {
                CopyStore::open(local, &o.job_id, o.level, who).and_then(|s| {
                    s.mark_committed(o.id, o.stamp, o.layout.clone())?;
                    s.retain(keep)
                })
            }
            Level::L4 => GlobalStore::open(&o.global_dir, &o.job_id, who).and_then(|s| {
                if o.marker {
                    s.mark_committed(o.id, o.stamp, o.layout.clone(), o.fence)?;
                }
                s.retain(&o.ranks, keep, o.world, o.marker, o.archive)
            }),
            Level::L1 => Ok(()),
        };
        if let Err(e) = done {
            tracing::warn!(checkpoint = o.id, level = %o.level, error = %e, "could not record a level's commit");
        }
        retire_superseded(local, &o.job_id, &o.retire);
    }

    fn remove(&self, o: &RemoveOrder) {
        let local = &self.opts.local_dir;
        let mut result = Staging::open(local, &o.job_id, self.who()).and_then(|s| {
            for id in s.ids() {
                s.unstage(id)?;
            }
            s.remove_if_empty();
            Ok(())
        });
        for level in [Level::L2, Level::L3] {
            if let Ok(Some(s)) = CopyStore::open_existing(local, &o.job_id, level) {
                result = result.and(s.remove_all());
            }
        }
        if !o.keep_global {
            if let Ok(Some(s)) = GlobalStore::open_existing(&o.global_dir, &o.job_id) {
                result = result.and(s.remove_ranks(&o.ranks, o.marker));
            }
        }
        if let Err(e) = result {
            tracing::warn!(error = %e, "could not remove the job's higher-level files");
        }
        let mut st = self.lock();
        st.progress.retain(|(job, ..), _| *job != o.job_id);
        st.parity.forget(&o.job_id);
    }
}

/// Removes, at each level a commit order names, the checkpoints older
/// than the id beside it (what commits elsewhere superseded:
/// `retention.levels`). Only levels 2 and 3 are pruned this way: an order
/// naming level 1 or 4 is refused, never read as a directory to empty.
fn retire_superseded(local: &std::path::Path, job_id: &str, retire: &[(Level, u64)]) {
    for &(level, below) in retire {
        let retired = match level {
            Level::L2 | Level::L3 => match CopyStore::open_existing(local, job_id, level) {
                Ok(Some(s)) => s.retire_below(below),
                Ok(None) => Ok(()),
                Err(e) => Err(e),
            },
            Level::L1 | Level::L4 => {
                tracing::warn!(level = %level, "refused a commit order retiring checkpoints outside levels 2 and 3");
                continue;
            }
        };
        if let Err(e) = retired {
            tracing::warn!(checkpoint = below, level = %level, error = %e, "could not retire the checkpoints a commit superseded");
        }
    }
}

/// Removes the staged files of promoted checkpoint `id`. The staging
/// directory itself stays, even empty: a rank's next request may be
/// staging into it at this very moment (the job's remove order takes it).
fn release_staged(
    local_dir: &std::path::Path,
    job_id: &str,
    who: u32,
    id: u64,
) -> Result<(), crate::level::StorageError> {
    Staging::open(local_dir, job_id, who)?.unstage(id)
}

/// A running manager. Dropping it stops it (after the transformation in
/// progress) and removes its socket.
pub struct Manager {
    shared: Arc<Shared>,
    endpoint: Endpoint,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Manager {
    /// Starts a manager: a listener thread and a worker thread.
    pub fn start(opts: Options) -> std::io::Result<Self> {
        let shared = Arc::new(Shared {
            opts,
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            fences: fences::Fences::default(),
        });
        let (endpoint, stop, listener) = serve::start(Arc::clone(&shared))?;
        let worker = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("frame-manager".into())
                .spawn(move || shared.work())?
        };
        Ok(Self {
            shared,
            endpoint,
            stop: Some(stop),
            threads: vec![listener, worker],
        })
    }

    /// Where ranks and other managers reach it.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// The node it serves.
    pub fn node(&self) -> u32 {
        self.shared.opts.node
    }

    /// Its local directory.
    pub fn local_dir(&self) -> &std::path::Path {
        &self.shared.opts.local_dir
    }

    /// Whether it holds `secret`.
    pub fn has_secret(&self, secret: &Secret) -> bool {
        self.shared.opts.secret == *secret
    }
}

impl Drop for Manager {
    fn drop(&mut self) {
        {
            let mut st = self.shared.lock();
            st.stop = true;
            self.shared.changed.notify_all();
        }
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        if let Endpoint::Unix(path) = &self.endpoint {
            let _ = std::fs::remove_file(path);
        }
    }
}
