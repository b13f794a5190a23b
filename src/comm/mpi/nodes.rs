//! Which ranks of an MPI communicator share a node (a failure domain
//! with its own level-1 storage): the node's ranks sharing memory, or
//! virtual nodes of consecutive ranks for tests on one host.

use crate::comm::{CommError, CommResult, NodeId};
use mpi::topology::Communicator;
use mpi::traits::*;

/// How the ranks of an MPI communicator are grouped into nodes (failure
/// domains with their own level-1 storage).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Nodes {
    /// A node is the set of ranks that share memory, numbered 0, 1, ... in
    /// the order of their lowest rank.
    Shared,
    /// Virtual nodes of `n` consecutive ranks (rank / n), for testing node
    /// failures with every rank on one host.
    Consecutive(usize),
}

impl Nodes {
    /// The grouping asked for by `[topology] ranks_per_node` (0: shared memory).
    pub fn from_config(cfg: &crate::config::Config) -> Self {
        match cfg.topology.ranks_per_node {
            0 => Nodes::Shared,
            n => Nodes::Consecutive(n as usize),
        }
    }
}

/// Where a rank stands among the nodes of an MPI communicator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// This rank's node.
    pub node: NodeId,
    /// The ranks of that node, ascending.
    pub node_ranks: Vec<i32>,
}

/// Finds this rank's node and its ranks, grouped as `nodes` says; shared
/// nodes are numbered 0, 1, ... in the order of their lowest rank.
/// Collective over `comm`.
pub fn placement(comm: &impl Communicator, nodes: Nodes) -> CommResult<Placement> {
    let (rank, size) = (comm.rank(), comm.size());
    match nodes {
        Nodes::Consecutive(0) => Err(CommError::Unsupported(
            "ranks_per_node must be at least 1".into(),
        )),
        Nodes::Consecutive(n) => {
            let n = i32::try_from(n).unwrap_or(i32::MAX);
            let first = rank / n * n;
            Ok(Placement {
                node: (rank / n) as NodeId,
                node_ranks: (first..(first + n).min(size)).collect(),
            })
        }
        Nodes::Shared => {
            let local = comm.split_shared(rank);
            let mut node_ranks = vec![0i32; local.size() as usize];
            local.all_gather_into(&rank, &mut node_ranks[..]);
            node_ranks.sort_unstable();
            let lowest = node_ranks.first().copied().unwrap_or(rank);
            let mut leaders = vec![0i32; size as usize];
            comm.all_gather_into(&lowest, &mut leaders[..]);
            leaders.sort_unstable();
            leaders.dedup();
            let node = leaders.iter().position(|l| *l == lowest).unwrap_or(0) as NodeId;
            Ok(Placement { node, node_ranks })
        }
    }
}
