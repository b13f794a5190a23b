//! The agreements a collective call makes before it branches: every rank
//! learns the outcome of a step all took, so that all take the same branch
//! and none is left waiting in a collective.

use crate::Failure;
use frame_core::comm::{Comm, ReduceOp};

/// Agrees on a step every rank took: `Ok` on every rank, or the same
/// shared failure on every rank, saying why (the reason alone when every
/// failing rank gives the same, else one line per rank). Collective.
pub fn agree(comm: &dyn Comm, local: Result<(), String>) -> Result<(), Failure> {
    let trouble = frame_core::comm::agree_on_problems(comm, local.err().as_deref())?;
    let Some((_, first)) = trouble.first() else {
        return Ok(());
    };
    if trouble.iter().all(|(_, r)| r == first) {
        return Err(Failure::shared(first.clone()));
    }
    let lines: Vec<String> = trouble
        .iter()
        .map(|(rank, reason)| format!("rank {rank}: {reason}"))
        .collect();
    Err(Failure::shared(lines.join("\n")))
}

/// Whether `local` holds on every rank. Collective.
pub fn all(comm: &dyn Comm, local: bool) -> Result<bool, Failure> {
    let mut v = [u64::from(local)];
    comm.all_reduce_u64(&mut v, ReduceOp::Min)?;
    Ok(v[0] == 1)
}

/// Rank 0's `value`, on every rank. Collective.
pub fn rank_0s(comm: &dyn Comm, value: u64) -> Result<u64, Failure> {
    let mut v = [if comm.rank() == 0 { value } else { 0 }];
    comm.all_reduce_u64(&mut v, ReduceOp::Max)?;
    Ok(v[0])
}
