//! Who holds which working rank of a job under ULFM, and how a repair
//! replaces the ranks of processes that died: spares on the rank's node
//! first, then the lowest spare, then (when asked) new processes. Pure:
//! every survivor computes the same from the same set of live processes.
//!
//! Processes are named by ids that never change: the job's first
//! processes by their rank in its first communicator, processes started
//! by a repair by the ids after them, in the order they were started.

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

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
    pub(super) fn choose(self, node_of: &[u32]) -> Vec<usize> {
        let size = node_of.len();
        match self {
            Spares::Last(n) => (size.saturating_sub(n)..size).collect(),
            Spares::PerNode(k) => {
                // The number of processes of each node seen from the end.
                let mut later = std::collections::HashMap::new();
                let mut chosen: Vec<usize> = (0..size)
                    .rev()
                    .filter(|p| {
                        let n = later.entry(node_of[*p]).or_insert(0usize);
                        *n += 1;
                        *n <= k
                    })
                    .collect();
                chosen.reverse();
                chosen
            }
        }
    }
}

/// Where every process of the job stands.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Job {
    /// This process's id.
    pub me: usize,
    /// The node of every process, by id.
    pub node_of: Vec<u32>,
    /// The process holding each working rank, by working rank.
    pub holders: Vec<usize>,
    /// Spares not yet used, lowest first.
    pub spares: Vec<usize>,
    /// Processes known dead.
    pub dead: BTreeSet<usize>,
}

/// What a repair decided.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Repair {
    /// The working ranks whose process died.
    pub failed_ranks: Vec<usize>,
    /// The nodes whose every process died.
    pub failed_nodes: Vec<u32>,
    /// The node of each process to start, in the order of their ids
    /// (the first is `Job::node_of`'s length before the repair).
    pub started: Vec<u32>,
}

impl Job {
    /// The job at its start: the processes on nodes `node_of`, `spares`
    /// of them waiting, the others working in their order.
    pub(super) fn new(me: usize, node_of: Vec<u32>, spares: Vec<usize>) -> Self {
        Self {
            me,
            holders: (0..node_of.len()).filter(|p| !spares.contains(p)).collect(),
            node_of,
            spares,
            dead: BTreeSet::new(),
        }
    }

    /// Records the processes that are gone now that `alive` are (ids), and
    /// gives their working ranks to spares, or when none is left and
    /// `start` allows, to new processes: on the rank's node while it lives,
    /// else on a new node, one per failed node. Every survivor computes the
    /// same.
    pub(super) fn repair(
        &mut self,
        alive: &BTreeSet<usize>,
        start: bool,
    ) -> Result<Repair, String> {
        let gone: BTreeSet<usize> = (0..self.node_of.len())
            .filter(|p| !alive.contains(p) && !self.dead.contains(p))
            .collect();
        self.dead.extend(&gone);
        self.spares.retain(|p| !self.dead.contains(p));
        let failed_ranks: Vec<usize> = (0..self.holders.len())
            .filter(|r| gone.contains(&self.holders[*r]))
            .collect();
        if failed_ranks.len() > self.spares.len() && !start {
            let ranks: Vec<String> = failed_ranks.iter().map(|r| r.to_string()).collect();
            return Err(format!(
                "rank(s) {} failed and {} spare process(es) are left to replace them: the job cannot go on (start it with more spares, or let it start new processes: key ulfm.spawn)",
                ranks.join(", "),
                self.spares.len()
            ));
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
        failed_nodes.sort_unstable();
        failed_nodes.dedup();
        let first_new_node = self.node_of.iter().max().map_or(0, |n| n + 1);
        let mut started = Vec::new();
        for r in &failed_ranks {
            let node = self.node_of[self.holders[*r]];
            if !self.spares.is_empty() {
                let at = self
                    .spares
                    .iter()
                    .position(|p| self.node_of[*p] == node)
                    .unwrap_or(0);
                self.holders[*r] = self.spares.remove(at);
                continue;
            }
            let node = match failed_nodes.iter().position(|n| *n == node) {
                Some(i) => first_new_node + i as u32,
                None => node,
            };
            self.holders[*r] = self.node_of.len();
            self.node_of.push(node);
            started.push(node);
        }
        Ok(Repair {
            failed_ranks,
            failed_nodes,
            started,
        })
    }

    /// This process's working rank (`None` for a spare).
    pub(super) fn rank(&self) -> Option<usize> {
        self.holders.iter().position(|h| *h == self.me)
    }
}
