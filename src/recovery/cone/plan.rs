//! Agreeing on a cone recovery: from what every rank offers (the
//! iterations its live data can stand at, the iteration its checkpoint
//! holds, whose data it reads), the iteration every rank resumes from and
//! the failure's cone, or why a cone recovery cannot be done. Pure.
//!
//! The ranks that still hold live data (the survivors) resume from the
//! oldest iteration any of them holds; a survivor one iteration ahead
//! goes back to its previous one (the program keeps it: double
//! buffering). The ranks without live data (the failed ranks'
//! replacements) restore the checkpoint and recompute up to that
//! iteration; the cone says which survivors recompute alongside them from
//! temporary copies of their checkpoints.

use super::Cone;
use serde::{Deserialize, Serialize};

/// What one rank brings to the agreement.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Offer {
    /// The newest and oldest iteration its live data can stand at; `None`:
    /// it holds none (a replacement).
    pub(crate) live: Option<(u64, u64)>,
    /// The iteration its checkpoint holds, or why it could not be read.
    pub(crate) checkpoint: Result<u64, String>,
    /// The ranks whose data it reads each iteration.
    pub(crate) neighbours: Vec<usize>,
}

/// An agreed cone recovery.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Who recomputes how far.
    pub(crate) cone: Cone,
    /// The iteration every rank resumes from.
    pub(crate) target: u64,
    /// The iteration the checkpoint holds.
    pub(crate) from: u64,
    /// The ranks that hold no live data.
    pub(crate) failed: Vec<usize>,
}

/// The plan every rank computes alike from every rank's offer (indexed
/// by rank), or the reason the recovery must be global.
pub(crate) fn plan(offers: &[Offer]) -> Result<Plan, String> {
    let mut from = None;
    for (rank, o) in offers.iter().enumerate() {
        let at = o.checkpoint.as_ref().map_err(|e| {
            format!("rank {rank} cannot read the iteration its checkpoint holds: {e}")
        })?;
        match from {
            None => from = Some((rank, *at)),
            Some((first, f)) if f != *at => {
                return Err(format!(
                    "the checkpoints hold different iterations (rank {first}'s {f}, rank {rank}'s {at})"
                ))
            }
            Some(_) => {}
        }
    }
    let Some((_, from)) = from else {
        return Err("the job has no ranks".into());
    };
    let failed: Vec<usize> = (0..offers.len())
        .filter(|r| offers[*r].live.is_none())
        .collect();
    let lives = offers
        .iter()
        .enumerate()
        .filter_map(|(r, o)| o.live.map(|l| (r, l)));
    let Some((newest_rank, target)) = lives.clone().map(|(r, (n, _))| (r, n)).min_by_key(|x| x.1)
    else {
        return Err("no rank kept live data".into());
    };
    if target < from {
        return Err(format!(
            "rank {newest_rank}'s live data (iteration {target}) is older than the checkpoint's (iteration {from})"
        ));
    }
    if let Some((rank, (newest, oldest))) = lives.clone().find(|(_, (_, oldest))| *oldest > target)
    {
        return Err(format!(
            "rank {rank} keeps iterations {oldest} to {newest} and cannot go back to iteration {target}, where rank {newest_rank} stands: a cone recovery needs every rank within the iterations it keeps of the others (a reduction every iteration, and the previous iteration kept)"
        ));
    }
    let gap = u32::try_from(target - from).map_err(|_| {
        format!(
            "{} iterations since the checkpoint are too many to recompute",
            target - from
        )
    })?;
    let neighbours: Vec<Vec<usize>> = offers.iter().map(|o| o.neighbours.clone()).collect();
    let cone = Cone::new(&neighbours, &failed, gap).map_err(|e| e.to_string())?;
    if !failed.is_empty() && cone.all_recompute() {
        return Err(format!(
            "the cone of rank(s) {failed:?} over {gap} iteration(s) covers all {} ranks: every rank would recompute, as in a global restart",
            offers.len()
        ));
    }
    Ok(Plan {
        cone,
        target,
        from,
        failed,
    })
}

#[cfg(test)]
mod tests;
