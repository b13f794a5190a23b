//! heat2d's part in a cone recovery (recovery mode `cone`): every rank
//! re-entered after a failure; the failed ranks' replacements restored
//! the checkpoint, the ranks of the failure's cone recompute from
//! temporary copies of theirs, round by round, sending each other halos
//! on tags of their own, and every other rank keeps its live grid. A
//! survivor one step ahead of the others goes back to its previous grid
//! (heat2d keeps it: `next` holds it after each step).

use crate::grid::Block;
use frame::comm::Comm;
use frame::{Checkpointer, ConeOffer, ConePart, ConeRecovery, ConeRole};
use std::ops::RangeInclusive;

/// The cone's halos travel on the live exchange's tags plus this.
const TAGS: u32 = 100;

/// A rank's grids: the live one (protected) and the one the next step
/// writes.
pub(crate) struct Live<'a> {
    pub grid: &'a mut frame::Protected<Vec<f64>>,
    pub next: &'a mut Vec<f64>,
    /// The steps the live grids can stand at (`None`: they hold nothing:
    /// this process replaces a failed rank).
    pub steps: Option<RangeInclusive<u64>>,
}

/// Recovers in the failure's cone. Returns the step every rank resumes
/// from and this rank's part (to finish once it is over), or `None`: the
/// recovery must be global (said why on rank 0), `recover` comes next.
pub(crate) fn recover(
    ckpt: &mut Checkpointer<'_>,
    comm: &dyn Comm,
    block: &Block,
    live: Live<'_>,
) -> anyhow::Result<Option<(u64, ConePart)>> {
    let mut copy: Vec<f64> = Vec::new();
    let neighbours = block.neighbours();
    let outcome = ckpt.recover_cone(ConeOffer {
        live: live.steps.clone(),
        iteration_region: 0,
        neighbours: &neighbours,
        copies: vec![(1, &mut copy)],
    })?;
    let part = match outcome {
        ConeRecovery::Cone(part) => *part,
        ConeRecovery::Global(why) => {
            if comm.rank() == 0 {
                crate::say(&format!(
                    "heat2d: no cone recovery, every rank goes back: {why}\n"
                ));
            }
            return Ok(None);
        }
    };
    let me = comm.rank();
    let line = match part.role() {
        ConeRole::Restored(n) => format!(
            "heat2d: rank {me} restored step {} and recomputes {n} step(s) in the cone\n",
            part.from()
        ),
        ConeRole::Recompute(n) => format!(
            "heat2d: rank {me} recomputes {n} step(s) from a copy of step {} in the cone\n",
            part.from()
        ),
        ConeRole::Supply => format!(
            "heat2d: rank {me} supplies its copy of step {} to the cone\n",
            part.from()
        ),
        ConeRole::Idle => format!("heat2d: rank {me} keeps its live grid and waits\n"),
    };
    crate::say(&line);
    let mut scratch = Vec::new();
    match part.role() {
        ConeRole::Restored(_) => {
            let mut u = live.grid.write();
            scratch.resize(u.len(), 0.0);
            scratch.copy_from_slice(&u);
            rounds(comm, block, &part, &mut u, &mut scratch)?;
        }
        ConeRole::Recompute(_) | ConeRole::Supply => {
            scratch.resize(copy.len(), 0.0);
            scratch.copy_from_slice(&copy);
            rounds(comm, block, &part, &mut copy, &mut scratch)?;
        }
        ConeRole::Idle => {}
    }
    if let Some(steps) = &live.steps {
        if *steps.end() > part.target() {
            // One step ahead: back to the previous grid.
            std::mem::swap(&mut *live.grid.write(), live.next);
        }
    }
    Ok(Some((part.target(), part)))
}

/// The cone's rounds on grid `u` (with `next` to step into): each round
/// sends this rank's step to the ranks that compute from it, receives
/// the halos it computes from, and steps.
fn rounds(
    comm: &dyn Comm,
    block: &Block,
    part: &ConePart,
    u: &mut Vec<f64>,
    next: &mut Vec<f64>,
) -> anyhow::Result<()> {
    for round in 1..=part.rounds() {
        let (to, from) = (part.sends_at(round), part.receives_at(round));
        block.exchange_with(comm, u, TAGS, &|r| to.contains(&r), &|r| from.contains(&r))?;
        if round <= part.steps() {
            block.step(u, next);
            std::mem::swap(u, next);
        }
    }
    Ok(())
}
