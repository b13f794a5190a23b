//! Processes a repair starts (`ulfm.spawn`): the survivors start them
//! running this program with its arguments and tell them where the job
//! stands; a started process joins the job and learns it.

use super::job::Job;
use frame::comm::mpi::ulfm;
use frame::comm::CommError;
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::*;
use serde::{Deserialize, Serialize};

/// Where the job stands when started processes join it.
#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Standing {
    /// The job, as the survivors hold it after the repair (its `me` is
    /// the sender's; a started process puts its own there).
    pub job: Job,
    /// How many processes were started: the job's last ids.
    pub started: usize,
    /// The epoch the job enters.
    pub epoch: u64,
    /// The working ranks that failed.
    pub failed_ranks: Vec<u32>,
    /// The nodes that failed.
    pub failed_nodes: Vec<u32>,
}

/// Starts the processes `standing` names (the job's last ids) after the
/// survivors of `comm` and returns the job's communicator: the survivors
/// in their order, then the new processes. With nodes of `shared` memory,
/// `standing.job` then counts the new ones on the nodes MPI started them
/// on ([`place_shared`]). Collective over `comm`.
pub(super) fn start(
    comm: &SimpleCommunicator,
    standing: &mut Standing,
    shared: bool,
) -> Result<SimpleCommunicator, CommError> {
    let program = std::env::current_exe().map_err(|e| {
        CommError::Unsupported(format!("starting new processes: this program's path: {e}"))
    })?;
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let merged = ulfm::spawn_merged(comm, standing.started, &program, &args)?;
    let text = serde_json::to_vec(standing)
        .map_err(|e| CommError::Unsupported(format!("the job's standing: {e}")))?;
    share(&merged, text)?;
    if shared {
        place_shared(&merged, &mut standing.job, standing.started);
    }
    Ok(merged)
}

/// In a process a repair started: the job's communicator and where the
/// job stands, this process's id in it (with nodes of `shared` memory,
/// as [`start`] places them). `None` in a process `mpirun` started.
pub(super) fn join(shared: bool) -> Option<Result<(SimpleCommunicator, Standing), CommError>> {
    let merged = match ulfm::started_merged()? {
        Ok(m) => m,
        Err(e) => return Some(Err(e)),
    };
    Some(share(&merged, Vec::new()).and_then(|text| {
        let mut standing: Standing = serde_json::from_slice(&text)
            .map_err(|e| CommError::Unsupported(format!("the job's standing: {e}")))?;
        // The started processes hold the last ids, in their order after
        // the survivors.
        let (size, rank) = (merged.size() as usize, merged.rank() as usize);
        let ids = standing.job.node_of.len();
        standing.job.me = (ids + rank).checked_sub(size).ok_or_else(|| {
            CommError::Unsupported(format!(
                "the job's standing names {ids} processes, fewer than the {size} joined"
            ))
        })?;
        if shared {
            place_shared(&merged, &mut standing.job, standing.started);
        }
        Ok((merged, standing))
    }))
}

/// Rank 0's `text` at every process of `comm`: the job's standing, a
/// few bytes per process of the job.
fn share(comm: &SimpleCommunicator, text: Vec<u8>) -> Result<Vec<u8>, CommError> {
    ulfm::broadcast_bytes(comm, text, 1 << 26)
}

/// With nodes of shared memory (`Nodes::Shared`), counts each of the last
/// `started` processes of `comm` (the job's communicator, just joined) on
/// the node MPI started it on: a node of a survivor it shares memory
/// with, else a new node, one per new group. Collective over `comm`.
fn place_shared(comm: &SimpleCommunicator, job: &mut Job, started: usize) {
    let rank = comm.rank();
    let local = comm.split_shared(rank);
    let mut lowest = rank;
    local.all_reduce_into(&rank, &mut lowest, mpi::collective::SystemOperation::min());
    let mut leaders = vec![0i32; comm.size() as usize];
    comm.all_gather_into(&lowest, &mut leaders[..]);
    let ids: Vec<usize> = (0..job.node_of.len())
        .filter(|p| !job.dead.contains(p))
        .collect();
    if ids.len() != leaders.len() {
        return;
    }
    let old = leaders.len().saturating_sub(started);
    let base = job.node_of[..job.node_of.len() - started]
        .iter()
        .max()
        .map_or(0, |n| n + 1);
    let mut new_leaders: Vec<i32> = leaders[old..]
        .iter()
        .copied()
        .filter(|l| *l as usize >= old)
        .collect();
    new_leaders.sort_unstable();
    new_leaders.dedup();
    for r in old..leaders.len() {
        let l = leaders[r];
        job.node_of[ids[r]] = if (l as usize) < old {
            job.node_of[ids[l as usize]]
        } else {
            base + new_leaders.iter().position(|n| *n == l).unwrap_or(0) as u32
        };
    }
}
