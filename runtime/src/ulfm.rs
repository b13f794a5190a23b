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
//! the checkpoint's other levels) or, with none left and [`Options::spawn`],
//! to a new process of the program they start (`MPI_Comm_spawn`), and
//! split a communicator of the original size and order for the next
//! epoch (`job` decides who holds what, `start` starts processes). A
//! node whose every process died is a failed node.
//!
//! Open MPI 5.0.x can hang in `MPI_Finalize` once a process of the job has
//! died; after a recovery, [`run`] therefore ends the process itself (its
//! output flushed, the launcher told: `exit`) rather than return to a
//! `MPI_Finalize`. A job that cannot go on after a failure (no spare left)
//! ends, once every survivor has said why, with one process exiting with
//! code 1 after the others are gone: Open MPI 5.0.11's `prterun` ignores
//! `MPI_Abort` under `--with-ft ulfm` and can deadlock when a process
//! exits with an error while others still run.

mod exit;
mod job;
mod program;
mod start;

use crate::{Context, State};
use frame::comm::mpi::{placement, ulfm, ErrorScope, MpiComm, Nodes};
use frame::comm::{CommError, FailureTopology, RecoveryContext};
use frame::config::{Config, SpareLayout};
use job::Job;
pub use job::Spares;
use mpi::ffi;
use mpi::raw::{AsRaw, FromRaw};
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::*;
pub(crate) use program::ProgramComm;
use std::collections::BTreeSet;
use std::fmt::Display;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// The longest nap of a spare waiting for a failure
/// ([`ulfm::agree_idle`]) on a machine with a core for each of the job's
/// processes on it: its wake-ups take no working rank's core, and a
/// repair waits little for it.
const SPARE_NAP: Duration = Duration::from_millis(5);
/// The same where the job's processes on the machine outnumber its cores
/// (virtual nodes, oversubscribed hosts): there each wake-up takes a
/// working rank's core, and a spare that woke every 5 ms cost CoMD 4% of
/// its loop time at 16 ranks and 4 spares on two cores (docs/APPS.md).
/// A node's repair waits up to this much longer for its spares.
const SPARE_NAP_CROWDED: Duration = Duration::from_millis(20);

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
    /// Whether a failed rank that finds no spare left gets a new process
    /// of this program (`MPI_Comm_spawn`) instead of ending the job.
    pub spawn: bool,
    /// Repairs before the job ends with an error instead.
    pub max_failures: u32,
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
            spawn: cfg.ulfm.spawn,
            max_failures: cfg.ulfm.max_failures,
        }
    }
}

/// Runs the resilient function `f` under ULFM over `world` (collective:
/// every process of `world` calls it), and returns the exit code; after a
/// recovery it ends the process instead of returning (see the module
/// documentation). A working rank's error that no failure explains ends
/// the job on every process with exit code 1; more failures than spares
/// end it with a message naming the ranks on every survivor.
pub fn run<F, E>(world: &SimpleCommunicator, options: &Options, f: F) -> ExitCode
where
    F: FnMut(&mut Context<'_>) -> Result<(), E>,
    E: Display,
{
    ExitCode::from(run_status(world, options, f))
}

/// [`run`], with the exit status as a number (for the C interface): 0 on
/// success.
pub fn run_status<F, E>(world: &SimpleCommunicator, options: &Options, mut f: F) -> u8
where
    F: FnMut(&mut Context<'_>) -> Result<(), E>,
    E: Display,
{
    let joined = match start::join(options.nodes == Nodes::Shared) {
        Some(Ok(j)) => Some(j),
        Some(Err(e)) => {
            eprintln!("frame: a process started to replace a failed rank: {e}");
            return 2;
        }
        None => None,
    };
    // A replacement is never a spare: its longest nap never counts.
    let (mut job, mut comm, mut epoch, mut state, mut failures, spare_nap) = match joined {
        Some((comm, standing)) => (
            standing.job,
            comm,
            standing.epoch,
            State::Restarted,
            RecoveryContext {
                epoch: standing.epoch,
                failed: FailureTopology {
                    ranks: standing.failed_ranks.into_iter().collect(),
                    nodes: standing.failed_nodes.into_iter().collect(),
                },
                ..RecoveryContext::default()
            },
            SPARE_NAP,
        ),
        None => match first_job(world, options) {
            Ok(job) => (
                job,
                ulfm::duplicate(world),
                1,
                State::New,
                RecoveryContext::default(),
                spare_nap(world),
            ),
            Err(code) => return code,
        },
    };
    let node = job.node_of[job.me];
    let me = job.me;
    let mut died = false;
    // Repairs so far (bounded by `options.max_failures`).
    let mut repairs: u32 = 0;
    // When this process went through each step of the last repair.
    let mut repaired: Option<[u128; 4]> = None;
    let code = loop {
        let mut ok = true;
        let mut failed_here = None;
        match split(&comm, job.rank()) {
            Ok(Some(work)) => {
                if let (Some([left, agreed, shrunk, started]), Some(0)) =
                    (repaired.take(), job.rank())
                {
                    // Where a repair's time goes, for the benchmarks.
                    let ms = |from: u128, to: u128| to.saturating_sub(from) as f64 / 1e6;
                    eprintln!(
                        "frame (ULFM): into epoch {epoch}: left the program at unix ns {left}, then agreement {:.2} ms, shrink {:.2} ms, start {:.2} ms, split {:.2} ms",
                        ms(left, agreed),
                        ms(agreed, shrunk),
                        ms(shrunk, started),
                        ms(started, unix_ns())
                    );
                }
                let mpi = match MpiComm::with_node(&work, node) {
                    Ok(c) => c
                        .with_recovery(failures.clone())
                        .with_error_scope(options.error_scope)
                        .with_uniform_errors(options.uniform_errors),
                    Err(e) => {
                        eprintln!("frame: rank {me}: {e}");
                        return 2;
                    }
                };
                let program = program::ProgramComm::new(&work);
                let mut ctx = Context {
                    comm: &mpi,
                    mpi: Some(&program),
                    state,
                    epoch,
                    failed_ranks: failures.failed.ranks.iter().map(|r| *r as usize).collect(),
                    failed_nodes: failures.failed.nodes.iter().copied().collect(),
                    node_dir: options.node_dir.clone(),
                    launcher_pid: None,
                    faults: None,
                    team: None,
                };
                if let Err(e) = f(&mut ctx) {
                    ok = false;
                    // Every other working rank's pending call fails too.
                    mpi.revoke();
                    program.revoke();
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
        // A spare waits here for the whole run, with nothing else to do;
        // a working rank comes here to finish or to repair, and is on the
        // way of a repair.
        let agreed = match job.rank() {
            Some(_) => ulfm::agree(&comm, u32::from(ok)),
            None => ulfm::agree_idle(&comm, u32::from(ok), spare_nap),
        };
        let agreed = match agreed {
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
        let repair = match job.repair(&alive, options.spawn) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("frame: process {me}: {e}");
                // No survivor leaves before every one is past the
                // collectives of the repair (a process gone from them
                // would leave the slower ones waiting).
                let _ = ulfm::agree(&next, 0);
                exit::give_up(&next);
            }
        };
        if repair.failed_ranks.is_empty() {
            // Only spares died, and a working rank failed by itself.
            if let Some(e) = failed_here {
                eprintln!("frame: rank {}: {e}", job.rank().unwrap_or(me));
            }
            let _ = ulfm::agree(&next, 0);
            exit::give_up(&next);
        }
        repairs = repairs.saturating_add(1);
        if repairs > options.max_failures {
            eprintln!(
                "frame: process {me}: failure {repairs} (rank(s) {:?}) is more than ulfm.max_failures ({}) allows; the job ends",
                repair.failed_ranks, options.max_failures
            );
            let _ = ulfm::agree(&next, 0);
            exit::give_up(&next);
        }
        epoch += 1;
        comm = if repair.started.is_empty() {
            next
        } else {
            let mut standing = start::Standing {
                job: job.clone(),
                started: repair.started.len(),
                epoch,
                failed_ranks: repair.failed_ranks.iter().map(|r| *r as u32).collect(),
                failed_nodes: repair.failed_nodes.clone(),
            };
            match start::start(&next, &mut standing, options.nodes == Nodes::Shared) {
                Ok(c) => {
                    job.node_of = std::mem::take(&mut standing.job.node_of);
                    c
                }
                Err(e) => {
                    eprintln!(
                        "frame: process {me}: starting {} process(es) to replace rank(s) {:?}: {e}",
                        repair.started.len(),
                        repair.failed_ranks
                    );
                    let _ = ulfm::agree(&next, 0);
                    exit::give_up(&next);
                }
            }
        };
        if let Some(times) = repaired.as_mut() {
            times[3] = unix_ns();
        }
        state = match (before, job.rank()) {
            (Some(_), Some(_)) => State::Reinited,
            (None, Some(_)) => State::Restarted,
            _ => state,
        };
        failures = RecoveryContext {
            epoch,
            failed: FailureTopology {
                ranks: repair.failed_ranks.iter().map(|r| *r as u32).collect(),
                nodes: repair.failed_nodes.into_iter().collect(),
            },
            ..RecoveryContext::default()
        };
    };
    if !died {
        return code;
    }
    if code != 0 {
        // Several processes ending with an error at once could leave
        // mpirun deadlocked (see `give_up`).
        exit::give_up(&comm);
    }
    // MPI_Finalize may hang once a process died: end here.
    exit::recovered(code)
}

/// The job as `mpirun` started it: every process's node, the spares
/// `options` name, the others working in their order. Collective over
/// `world`; an error is the process's exit code, said.
fn first_job(world: &SimpleCommunicator, options: &Options) -> Result<Job, u8> {
    let size = world.size() as usize;
    let me = world.rank() as usize;
    let node = match placement(world, options.nodes) {
        Ok(p) => p.node,
        Err(e) => {
            eprintln!("frame: rank {me}: nodes: {e}");
            return Err(2);
        }
    };
    let mut node_of = vec![0u32; size];
    world.all_gather_into(&node, &mut node_of[..]);
    let spares = options.spares.choose(&node_of);
    if spares.len() >= size {
        eprintln!(
            "frame: spares {:?} (key ulfm.spares, or the program's options) leave none of the {size} processes to work",
            options.spares
        );
        return Err(2);
    }
    Ok(Job::new(me, node_of, spares))
}

/// How long this machine's spares nap at most while they wait for a
/// failure: [`SPARE_NAP_CROWDED`] where the job's processes on it (MPI's
/// shared-memory split of `world`) outnumber its cores, else
/// [`SPARE_NAP`]. Collective over `world`.
fn spare_nap(world: &SimpleCommunicator) -> Duration {
    let here = world.split_shared(0).size();
    match crate::crowding::crowds(usize::try_from(here).unwrap_or(usize::MAX)) {
        true => SPARE_NAP_CROWDED,
        false => SPARE_NAP,
    }
}

/// The wall clock, in nanoseconds since 1970.
fn unix_ns() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
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
