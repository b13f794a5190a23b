//! Where failed ranks go: a pure function of the cluster's state.
//!
//! A failed rank whose node survived is respawned on that node. The ranks of a
//! failed node move together to the least-loaded live node with room for all
//! of them (spare nodes start empty, so they win); if no single node has room,
//! they are spread one by one over the least-loaded nodes with free slots. If
//! there is no room at all, recovery is impossible and the job must stop.

use std::collections::BTreeMap;

/// A node as placement sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeSlots {
    /// Node id.
    pub id: u32,
    /// Whether the node is alive.
    pub alive: bool,
    /// Rank slots on the node.
    pub slots: usize,
}

/// The ranks that could not be placed, per failed node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NoRoom {
    /// The failed node whose ranks have nowhere to go.
    pub node: u32,
    /// Those ranks.
    pub ranks: Vec<u32>,
}

/// The ranks to start on each node.
pub type Spawns = BTreeMap<u32, Vec<u32>>;

/// Computes the new placement after failures.
///
/// `placement[r]` is rank `r`'s node; `failed_ranks` died on live nodes;
/// every rank on a dead node is failed too. Returns the new placement and the
/// ranks to start, per node.
pub fn place(
    nodes: &[NodeSlots],
    placement: &[u32],
    failed_ranks: &[u32],
) -> Result<(Vec<u32>, Spawns), NoRoom> {
    let alive = |n: u32| nodes.iter().any(|x| x.id == n && x.alive);
    let mut new = placement.to_vec();
    let mut spawn: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    // Soft failures: back onto their own (live) node.
    for &r in failed_ranks {
        if let Some(&n) = placement.get(r as usize) {
            if alive(n) {
                spawn.entry(n).or_default().push(r);
            }
        }
    }
    // Ranks of dead nodes, grouped by node.
    let mut orphans: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for (r, &n) in placement.iter().enumerate() {
        if !alive(n) {
            orphans.entry(n).or_default().push(r as u32);
        }
    }
    let load = |new: &[u32], n: u32| new.iter().filter(|&&x| x == n).count();
    for (dead, ranks) in orphans {
        // Count the orphans as gone while choosing.
        for &r in &ranks {
            new[r as usize] = u32::MAX;
        }
        let free = |new: &[u32], n: &NodeSlots| n.slots.saturating_sub(load(new, n.id));
        let whole = nodes
            .iter()
            .filter(|n| n.alive && free(&new, n) >= ranks.len())
            .min_by_key(|n| (load(&new, n.id), n.id));
        if let Some(target) = whole {
            for &r in &ranks {
                new[r as usize] = target.id;
            }
            spawn.entry(target.id).or_default().extend(&ranks);
            continue;
        }
        for &r in &ranks {
            let target = nodes
                .iter()
                .filter(|n| n.alive && free(&new, n) > 0)
                .min_by_key(|n| (load(&new, n.id), n.id))
                .ok_or_else(|| NoRoom {
                    node: dead,
                    ranks: ranks.clone(),
                })?;
            new[r as usize] = target.id;
            spawn.entry(target.id).or_default().push(r);
        }
    }
    for ranks in spawn.values_mut() {
        ranks.sort_unstable();
        ranks.dedup();
    }
    Ok((new, spawn))
}

#[cfg(test)]
mod tests;
