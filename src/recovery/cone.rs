//! The dependency cone of a failure: which ranks must recompute, and how
//! far, so that a replacement reaches the iteration where its rank failed
//! while every other rank keeps its live data (data-flow rollback, as the
//! paper "Energy-efficient localised rollback after failures via data flow
//! analysis" calls it).
//!
//! A program declares whose data each rank reads in one iteration (its
//! neighbours: a stencil's halo partners). A rank lost `gap` iterations
//! after the last checkpoint needs, at iteration `c + gap`, its neighbours
//! at `c + gap - 1`, which need theirs at `c + gap - 2`, and so on down to
//! the checkpoint. So a rank at distance `d` from the failed ones (in
//! neighbour hops) recomputes `gap - d` iterations from a temporary copy
//! of its checkpoint, a rank at distance `gap` only lends its checkpointed
//! data, and every rank farther away idles. Pure: no I/O.

use std::collections::VecDeque;

/// What one rank does while a failure's cone is recomputed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Recomputes this many iterations from its checkpoint (the failed
    /// ranks: the whole gap; a failed rank with nothing to recompute only
    /// restores).
    Recompute(u32),
    /// Loads its checkpoint into a temporary copy and lends it to the
    /// ranks that recompute, computing nothing.
    Supply,
    /// Waits with its live data.
    Idle,
}

/// Why a cone could not be computed.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConeError {
    /// A neighbour list names a rank outside the job.
    #[error("rank {rank} names neighbour {neighbour}, but the job has ranks 0 to {last}")]
    NoSuchNeighbour {
        /// The rank whose list is wrong.
        rank: usize,
        /// The neighbour it names.
        neighbour: usize,
        /// The highest rank.
        last: usize,
    },
    /// A failed rank is outside the job.
    #[error("failed rank {rank} is not a rank of this {size}-rank job")]
    NoSuchRank {
        /// The failed rank named.
        rank: usize,
        /// Ranks in the job.
        size: usize,
    },
}

/// The cone of one failure: each rank's distance from the failed ranks
/// (within the gap) and the gap.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cone {
    /// Hops from the nearest failed rank; `None` beyond the gap.
    distance: Vec<Option<u32>>,
    gap: u32,
}

impl Cone {
    /// The cone of `failed` ranks lost `gap` iterations after the last
    /// checkpoint, rank `r` reading the data of `neighbours[r]` each
    /// iteration.
    pub fn new(neighbours: &[Vec<usize>], failed: &[usize], gap: u32) -> Result<Self, ConeError> {
        let size = neighbours.len();
        for (rank, list) in neighbours.iter().enumerate() {
            if let Some(&neighbour) = list.iter().find(|n| **n >= size) {
                return Err(ConeError::NoSuchNeighbour {
                    rank,
                    neighbour,
                    last: size.saturating_sub(1),
                });
            }
        }
        let mut distance = vec![None; size];
        let mut queue = VecDeque::new();
        for &f in failed {
            let slot = distance
                .get_mut(f)
                .ok_or(ConeError::NoSuchRank { rank: f, size })?;
            if slot.is_none() {
                *slot = Some(0);
                queue.push_back(f);
            }
        }
        // Breadth first along the dependencies, no deeper than the gap.
        while let Some(r) = queue.pop_front() {
            let d = distance[r].unwrap_or(0);
            if d == gap {
                continue;
            }
            for &n in &neighbours[r] {
                if distance[n].is_none() {
                    distance[n] = Some(d + 1);
                    queue.push_back(n);
                }
            }
        }
        Ok(Self { distance, gap })
    }

    /// Rank `rank`'s role (ranks outside the job idle).
    pub fn role(&self, rank: usize) -> Role {
        match self.distance.get(rank).copied().flatten() {
            Some(0) => Role::Recompute(self.gap),
            Some(d) if d < self.gap => Role::Recompute(self.gap - d),
            Some(_) => Role::Supply,
            None => Role::Idle,
        }
    }

    /// Iterations recomputed over all ranks (rank-iterations).
    pub fn recomputed(&self) -> u64 {
        (0..self.distance.len())
            .map(|r| match self.role(r) {
                Role::Recompute(n) => u64::from(n),
                _ => 0,
            })
            .sum()
    }

    /// Ranks that recompute or supply: every rank the recovery involves.
    pub fn involved(&self) -> usize {
        self.distance.iter().filter(|d| d.is_some()).count()
    }

    /// Whether every rank recomputes: the cone saves nothing over a
    /// global rollback.
    pub fn all_recompute(&self) -> bool {
        (0..self.distance.len()).all(|r| matches!(self.role(r), Role::Recompute(_)))
    }

    /// Whether every rank is involved (recomputes or supplies).
    pub fn covers_all(&self) -> bool {
        self.involved() == self.distance.len()
    }
}

/// Neighbours of a chain of `n` ranks (a one-dimensional 3-point
/// stencil): rank `r` reads `r - 1` and `r + 1`.
pub fn chain(n: usize) -> Vec<Vec<usize>> {
    (0..n)
        .map(|r| {
            let mut v = Vec::with_capacity(2);
            if r > 0 {
                v.push(r - 1);
            }
            if r + 1 < n {
                v.push(r + 1);
            }
            v
        })
        .collect()
}

/// Neighbours of a `rows` x `cols` grid of ranks, row-major (a
/// two-dimensional 5-point stencil).
pub fn grid(rows: usize, cols: usize) -> Vec<Vec<usize>> {
    (0..rows * cols)
        .map(|r| {
            let (i, j) = (r / cols, r % cols);
            let mut v = Vec::with_capacity(4);
            if i > 0 {
                v.push(r - cols);
            }
            if i + 1 < rows {
                v.push(r + cols);
            }
            if j > 0 {
                v.push(r - 1);
            }
            if j + 1 < cols {
                v.push(r + 1);
            }
            v
        })
        .collect()
}

pub(crate) mod plan;

#[cfg(test)]
mod tests;
