//! Global restart inside a real MPI job, through MPI's User-Level Failure
//! Mitigation (the `ulfm` feature): [`run`] calls the resilient function on
//! an [`MpiComm`] of the job's working ranks and, when a process dies, has
//! the survivors repair the job in place and call it again, with the same
//! [`Context`] (states, epoch, failed ranks and nodes) as frame's own
//! runtime gives.
//!
//! The job is the ranks `mpirun` started: some wait as spares (the last
//! ones of the job, or the last ones of every node: [`Spares`]), the
//! others work, in their order. Every epoch ends in one agreement of all live
//! processes on whether every working rank finished. A rank that sees a
//! failure (an error from any call of the communicator, the program's or
//! frame's own) revokes the communicator, so every other working rank's
//! pending call fails too and it joins the agreement. When the agreement
//! reports a failure, the survivors shrink the job's communicator, learn
//! who is gone, give each dead working rank's place to the lowest spare
//! left on its node, or else the lowest spare left (a replacement on the
//! rank's node finds its level-1 files there; elsewhere it starts from
//! the checkpoint's other levels), and split a communicator of the original size and order for
//! the next epoch. A node whose every process died is a failed node.
//!
//! Open MPI 5.0.x can hang in `MPI_Finalize` once a process of the job has
//! died; after a recovery, [`run`] therefore ends the process itself (its
//! output flushed) rather than return to a `MPI_Finalize`. A job that
//! cannot go on after a failure (no spare left) ends, once every survivor
//! has said why, with one process exiting with code 1 after the others
//! are gone: Open MPI 5.0.11's `prterun` ignores `MPI_Abort` under
//! `--with-ft ulfm` and can deadlock when a process exits with an error
//! while others still run.

use crate::{Context, State};
use frame::comm::mpi::{placement, ulfm, ErrorScope, MpiComm, Nodes};
use frame::comm::{CommError, Failures};
use frame::config::{Config, SpareLayout};
use mpi::ffi;
use mpi::raw::{AsRaw, FromRaw};
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::*;
use std::collections::BTreeSet;
use std::fmt::Display;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// How a job under ULFM is laid out.
#[derive(Clone, Debug)]
pub struct Options {
    /// Processes kept aside to replace failed ranks.
    pub spares: Spares,
    /// How the processes are grouped into nodes.
    pub nodes: Nodes,
    /// The node-local storage directory ([`Context::node_dir`]).
    pub node_dir: PathBuf,
    /// The error scope of the communicator the program gets (see
    /// [`ErrorScope`]): with a wider scope than the operation, every
    /// working rank's call fails as soon as it knows of a failure, not
    /// only the calls that involve the failed process.
    pub error_scope: ErrorScope,
    /// Uniform error reporting on the program's communicator: each
    /// collective fails at every rank or at none.
    pub uniform_errors: bool,
}

impl Options {
    /// The options `cfg` names: `[ulfm]` (the spares, their layout, the
    /// error scope and uniform errors), how processes form nodes
    /// (`topology.ranks_per_node`) and the node-local directory
    /// (`storage.local_dir`).
    pub fn from_config(cfg: &Config) -> Self {
        let n = cfg.ulfm.spares as usize;
        Self {
            spares: match cfg.ulfm.spare_layout {
                SpareLayout::Last => Spares::Last(n),
                SpareLayout::PerNode => Spares::PerNode(n),
            },
            nodes: Nodes::from_config(cfg),
            node_dir: cfg.storage.local_dir.clone(),
            error_scope: cfg.ulfm.error_scope,
            uniform_errors: cfg.ulfm.uniform_errors,
        }
    }
}

/// Which processes of the job wait to replace failed ranks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spares {
    /// The last `n` processes of the job (a node of spares, say).
    Last(usize),
    /// The last `k` processes of every node: a rank that dies while its
    /// node lives is replaced on that node, where its level-1 files are.
    PerNode(usize),
}

impl Spares {
    /// The spare processes among processes on nodes `node_of`, ascending.
    fn choose(self, node_of: &[u32]) -> Vec<usize> {
        let size = node_of.len();
        match self {
            Spares::Last(n) => (size.saturating_sub(n)..size).collect(),
            Spares::PerNode(k) => (0..size)
                .filter(|p| {
                    let after = (p + 1..size).filter(|q| node_of[*q] == node_of[*p]).count();
                    after < k
                })
                .collect(),
        }
    }
}

/// Where every process of the job stands.
struct Job {
    /// This process's rank in the job's first communicator.
    me: usize,
    /// The node of every process, by that rank.
    node_of: Vec<u32>,
    /// The process holding each working rank, by working rank.
    holders: Vec<usize>,
    /// Spares not yet used, lowest first.
    spares: Vec<usize>,
    /// Processes known dead.
    dead: BTreeSet<usize>,
}

/// What a repair decided.
#[derive(Debug)]
struct Repair {
    failed_ranks: Vec<usize>,
    failed_nodes: Vec<u32>,
}

impl Job {
    /// Records the processes that are gone now that `alive` are, and gives
    /// their working ranks to spares. Every survivor computes the same.
    fn repair(&mut self, alive: &BTreeSet<usize>) -> Result<Repair, String> {
        let all = 0..self.node_of.len();
        let gone: BTreeSet<usize> = all
            .filter(|p| !alive.contains(p) && !self.dead.contains(p))
            .collect();
        self.dead.extend(&gone);
        self.spares.retain(|p| !self.dead.contains(p));
        let failed_ranks: Vec<usize> = (0..self.holders.len())
            .filter(|r| gone.contains(&self.holders[*r]))
            .collect();
        if failed_ranks.len() > self.spares.len() {
            let ranks: Vec<String> = failed_ranks.iter().map(|r| r.to_string()).collect();
            return Err(format!(
                "rank(s) {} failed and {} spare process(es) are left to replace them: the job cannot go on (start it with more spares)",
                ranks.join(", "),
                self.spares.len()
            ));
        }
        for r in &failed_ranks {
            let node = self.node_of[self.holders[*r]];
            let at = self
                .spares
                .iter()
                .position(|p| self.node_of[*p] == node)
                .unwrap_or(0);
            self.holders[*r] = self.spares.remove(at);
        }
        let mut failed_nodes: Vec<u32> = gone
            .iter()
            .map(|p| self.node_of[*p])
            .filter(|n| {
                (0..self.node_of.len())
                    .filter(|p| self.node_of[*p] == *n)
                    .all(|p| self.dead.contains(&p))
            })
            .collect();
        failed_nodes.dedup();
        Ok(Repair {
            failed_ranks,
            failed_nodes,
        })
    }

    fn rank(&self) -> Option<usize> {
        self.holders.iter().position(|h| *h == self.me)
    }
}

/// Runs the resilient function `f` under ULFM over `world` (collective:
/// every process of `world` calls it), and returns the exit code; after a
/// recovery it ends the process instead of returning (see the module
/// documentation). A working rank's error that no failure explains ends
/// the job on every process with exit code 1; more failures than spares
/// end it with a message naming the ranks on every survivor.
pub fn run<F, E>(world: &SimpleCommunicator, options: &Options, mut f: F) -> ExitCode
where
    F: FnMut(&mut Context<'_>) -> Result<(), E>,
    E: Display,
{
    let size = world.size() as usize;
    let me = world.rank() as usize;
    let node = match placement(world, options.nodes) {
        Ok(p) => p.node,
        Err(e) => {
            eprintln!("frame: rank {me}: nodes: {e}");
            return ExitCode::from(2);
        }
    };
    let mut node_of = vec![0u32; size];
    world.all_gather_into(&node, &mut node_of[..]);
    let spares = options.spares.choose(&node_of);
    let holders: Vec<usize> = (0..size).filter(|p| !spares.contains(p)).collect();
    if holders.is_empty() {
        eprintln!(
            "frame: spares {:?} (key ulfm.spares, or the program's options) leave none of the {size} processes to work",
            options.spares
        );
        return ExitCode::from(2);
    }
    let mut job = Job {
        me,
        node_of,
        holders,
        spares,
        dead: BTreeSet::new(),
    };
    let mut comm = ulfm::duplicate(world);
    let mut epoch = 1u64;
    let mut state = State::New;
    let mut failures = Failures::default();
    let mut died = false;
    // When this process went through each step of the last repair.
    let mut repaired: Option<[u128; 4]> = None;
    let code = loop {
        let mut ok = true;
        let mut failed_here = None;
        match split(&comm, job.rank()) {
            Ok(Some(work)) => {
                if let (Some([left, agreed, shrunk, known]), Some(0)) =
                    (repaired.take(), job.rank())
                {
                    // Where a repair's time goes, for the benchmarks.
                    let ms = |from: u128, to: u128| to.saturating_sub(from) as f64 / 1e6;
                    eprintln!(
                        "frame (ULFM): into epoch {epoch}: left the program at unix ns {left}, then agreement {:.2} ms, shrink {:.2} ms, split {:.2} ms",
                        ms(left, agreed),
                        ms(agreed, shrunk) + ms(shrunk, known),
                        ms(known, unix_ns())
                    );
                }
                let mpi = match MpiComm::with_node(&work, node) {
                    Ok(c) => c
                        .with_failures(failures.clone())
                        .with_error_scope(options.error_scope)
                        .with_uniform_errors(options.uniform_errors),
                    Err(e) => {
                        eprintln!("frame: rank {me}: {e}");
                        return ExitCode::from(2);
                    }
                };
                let mut ctx = Context {
                    comm: &mpi,
                    state,
                    epoch,
                    failed_ranks: failures.ranks.iter().map(|r| *r as usize).collect(),
                    failed_nodes: failures.nodes.clone(),
                    node_dir: options.node_dir.clone(),
                    launcher_pid: None,
                    faults: None,
                };
                if let Err(e) = f(&mut ctx) {
                    ok = false;
                    // Every other working rank's pending call fails too.
                    mpi.revoke();
                    failed_here = Some(e.to_string());
                }
            }
            Ok(None) => {}
            Err(e) => {
                ok = false;
                failed_here = Some(e.to_string());
            }
        }
        let left = unix_ns();
        let agreed = match ulfm::agree(&comm, u32::from(ok)) {
            Ok(a) => a,
            Err(e) => {
                eprintln!("frame: rank {me}: the end of epoch {epoch}: {e}");
                break 1;
            }
        };
        died |= agreed.failed;
        if agreed.flag == 1 {
            // Every live working rank finished; a rank that died had
            // passed the program's last collective with them.
            if agreed.failed {
                eprintln!(
                    "frame: a process died after the working ranks finished; the result stands"
                );
            }
            break 0;
        }
        if !agreed.failed {
            // A rank failed by itself: the job cannot go on.
            if let Some(e) = failed_here {
                match job.rank() {
                    Some(r) => eprintln!("frame: rank {r}: {e}"),
                    None => eprintln!("frame: spare process {me}: {e}"),
                }
            }
            break 1;
        }
        // A process died: the survivors repair.
        let agreed_at = unix_ns();
        ulfm::revoke(&comm);
        let (next, alive) = match survivors(&comm, me) {
            Ok(x) => x,
            Err(e) => {
                eprintln!("frame: process {me}: the repair after a failure: {e}");
                break 1;
            }
        };
        let known = unix_ns();
        repaired = Some([left, agreed_at, known, known]);
        let before = job.rank();
        let repair = match job.repair(&alive) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("frame: process {me}: {e}");
                // No survivor leaves before every one is past the
                // collectives of the repair (a process gone from them
                // would leave the slower ones waiting).
                let _ = ulfm::agree(&next, 0);
                give_up(&next);
            }
        };
        if repair.failed_ranks.is_empty() {
            // Only spares died, and a working rank failed by itself.
            if let Some(e) = failed_here {
                eprintln!("frame: rank {}: {e}", job.rank().unwrap_or(me));
            }
            let _ = ulfm::agree(&next, 0);
            give_up(&next);
        }
        comm = next;
        epoch += 1;
        state = match (before, job.rank()) {
            (Some(_), Some(_)) => State::Reinited,
            (None, Some(_)) => State::Restarted,
            _ => state,
        };
        failures = Failures {
            epoch,
            ranks: repair.failed_ranks.iter().map(|r| *r as u32).collect(),
            nodes: repair.failed_nodes,
            committed: None,
        };
    };
    if !died {
        return ExitCode::from(code);
    }
    if code != 0 {
        // Several processes ending with an error at once could leave
        // mpirun deadlocked (see `give_up`).
        give_up(&comm);
    }
    // MPI_Finalize may hang once a process died: end here.
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // SAFETY: ends the process at once; nothing of it runs afterwards.
    unsafe { libc_exit(i32::from(code)) }
}

/// Ends a job that cannot go on after a failure (every survivor calls it,
/// once each has said why), with `mpirun`'s exit code 1. Open MPI
/// 5.0.11's `prterun` can deadlock (its state machine's lock, the dead
/// processes never reaped) when a process exits with an error while
/// others of the job still run, and ignores `MPI_Abort` under
/// `--with-ft ulfm`: so every survivor but the first exits with 0, and
/// the first, once MPI reports all of them gone (30 seconds at most),
/// exits with 1, the job's code.
fn give_up(survivors: &SimpleCommunicator) -> ! {
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    if survivors.rank() != 0 {
        let _ =
            rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
    }
    let others = survivors.size().max(1) as usize - 1;
    frame::comm::mpi::progress_while(survivors.as_raw(), Duration::from_secs(30), || {
        ulfm::failed_count(survivors).is_some_and(|n| n < others)
    });
    // SAFETY: ends the process at once.
    unsafe { libc_exit(1) }
}

/// The wall clock, in nanoseconds since 1970.
fn unix_ns() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// `_exit`: ends the process without running MPI's or Rust's exit code.
unsafe fn libc_exit(code: i32) -> ! {
    extern "C" {
        fn _exit(code: i32) -> !;
    }
    // SAFETY: `_exit` takes any status and does not return.
    unsafe { _exit(code) }
}

/// The working communicator: the working ranks of `comm`, ordered by their
/// rank (`None` for a spare). Collective over `comm`.
fn split(
    comm: &SimpleCommunicator,
    rank: Option<usize>,
) -> Result<Option<SimpleCommunicator>, CommError> {
    let (color, key) = match rank {
        Some(r) => (0, r as i32),
        // SAFETY: a constant rsmpi reads from the MPI library once.
        None => (unsafe { ffi::RSMPI_UNDEFINED }, 0),
    };
    let mut new = std::mem::MaybeUninit::<ffi::MPI_Comm>::uninit();
    // SAFETY: MPI writes the new communicator (MPI_COMM_NULL for a spare).
    let rc = unsafe { ffi::MPI_Comm_split(comm.as_raw(), color, key, new.as_mut_ptr()) };
    if rc != ffi::MPI_SUCCESS as i32 {
        return Err(CommError::Broken("splitting the working ranks".into()));
    }
    if rank.is_none() {
        return Ok(None);
    }
    // SAFETY: written by a successful split, a communicator this process
    // now owns.
    Ok(Some(unsafe {
        SimpleCommunicator::from_raw(new.assume_init())
    }))
}

/// Shrinks `comm` to its live processes and learns which they are (by
/// `me`, each process's rank in the job's first communicator), shrinking
/// again if another process dies meanwhile.
fn survivors(
    comm: &SimpleCommunicator,
    me: usize,
) -> Result<(SimpleCommunicator, BTreeSet<usize>), CommError> {
    let mut current = ulfm::shrink(comm)?;
    loop {
        let mine = me as u64;
        let mut all = vec![0u64; current.size() as usize];
        // SAFETY: one u64 sent, one per process received; both outlive
        // the blocking call.
        let rc = unsafe {
            ffi::MPI_Allgather(
                (&raw const mine).cast(),
                1,
                ffi::RSMPI_UINT64_T,
                all.as_mut_ptr().cast(),
                1,
                ffi::RSMPI_UINT64_T,
                current.as_raw(),
            )
        };
        if rc == ffi::MPI_SUCCESS as i32 {
            return Ok((current, all.into_iter().map(|r| r as usize).collect()));
        }
        ulfm::revoke(&current);
        current = ulfm::shrink(&current)?;
    }
}

#[cfg(test)]
mod tests;
