//! Deciding that a node is dead: its daemon's connection broke, it fell
//! silent past its threshold and its leases (see `liveness.rs`), or the
//! network cut it off from other nodes while it still reaches the root.
//!
//! **Partitions among nodes.** A rank whose peer on another node stays
//! alive but out of reach (see `frame::comm::net::LostPeers`) reports it;
//! both nodes still send heartbeats, so nothing else would ever end the
//! wait. The root gathers such reports for [`SETTLE`] from the first one,
//! so that every side of one cut has spoken, then gives up one node:
//! the one named in the most reports, and of those the one reported
//! unreachable first ([`pick`]). It stops renewing that node's lease and
//! orders it to kill its ranks, manager and daemon; the node counts as
//! dead when its daemon's connection ends (it obeyed) or when its leases
//! ran out (it did not hear), never before, so the node's ranks and their
//! replacements never run at once. Its ranks then recover as those of
//! any dead node, on a spare if there is one; without one the job ends
//! with an error naming the cut.

use super::liveness::Silence;
use super::{Cluster, Failure, RunError};
use crate::proto::now_ns;
use frame::metrics::RuntimeRecoveryRecord;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How long reports of a partition are gathered before the root judges.
pub(super) const SETTLE: Duration = Duration::from_secs(1);

/// Rank `rank` on node `from` cannot reach rank `peer` on node `lost`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Report {
    pub(super) from: u32,
    pub(super) rank: u32,
    pub(super) lost: u32,
    pub(super) peer: u32,
}

/// What the root holds while it decides which nodes are dead.
#[derive(Default)]
pub(super) struct Verdicts {
    /// Nodes declared dead for their silence, with it (for the record of
    /// the recovery).
    silences: BTreeMap<u32, Silence>,
    /// Reports of peers lost, in the order they came, and when the first
    /// of them came.
    reports: Vec<Report>,
    first: Option<Instant>,
    /// Nodes given up for a partition, and why, until they count as dead.
    evicting: BTreeMap<u32, String>,
}

/// The node to give up for `reports` (at least one): the node named in
/// the most of them, reporting or reported; at a tie, the one reported
/// first. With it, the report that names it first.
pub(super) fn pick(reports: &[Report]) -> Option<(u32, &Report)> {
    let mut named: BTreeMap<u32, usize> = BTreeMap::new();
    for r in reports {
        *named.entry(r.from).or_default() += 1;
        *named.entry(r.lost).or_default() += 1;
    }
    let most = named.values().copied().max()?;
    // Reported nodes in order, then reporting ones: the first reported
    // among the most named wins.
    let mut order = reports
        .iter()
        .map(|r| r.lost)
        .chain(reports.iter().map(|r| r.from));
    let node = order.find(|n| named[n] == most)?;
    let why = reports.iter().find(|r| r.lost == node || r.from == node)?;
    Some((node, why))
}

impl Cluster<'_> {
    /// Rank `rank` of node `from` reports it cannot reach rank `peer` in
    /// `epoch`.
    pub(super) fn on_unreachable(&mut self, from: u32, rank: u32, epoch: u64, peer: u32) {
        let Some(&lost) = self.placement.get(peer as usize) else {
            return;
        };
        let current = epoch == self.epoch && self.placement.get(rank as usize) == Some(&from);
        let live =
            |n: u32| self.nodes[n as usize].alive && !self.verdicts.evicting.contains_key(&n);
        if !current || self.finishing || lost == from || !live(lost) || !live(from) {
            return;
        }
        tracing::info!(rank, peer, from, lost, "a rank cannot reach its peer");
        let v = &mut self.verdicts;
        v.first.get_or_insert_with(Instant::now);
        v.reports.push(Report {
            from,
            rank,
            lost,
            peer,
        });
    }

    /// The daemon of node `node` (start `gen`) closed its connection.
    pub(super) async fn on_lost(&mut self, node: u32, gen: u64) -> Result<(), RunError> {
        let n = &self.nodes[node as usize];
        if n.gen != gen || !n.alive || n.stopping || self.finishing {
            return Ok(());
        }
        let why = match self.verdicts.evicting.remove(&node) {
            Some(why) => why,
            None => "its daemon's connection broke".into(),
        };
        self.fail(Failure::Node {
            node,
            why,
            at_ns: now_ns(),
        })
        .await
    }

    /// The heartbeat timer's judgement: nodes silent past their leases
    /// are dead, so are nodes given up whose leases ran out, and reports
    /// of a partition that had time to settle give up a node.
    pub(super) async fn judge(&mut self) -> Result<(), RunError> {
        if self.finishing {
            return Ok(());
        }
        // Arrivals are noted by each connection's reader as they come,
        // whatever waits in this loop's queue.
        let now = Instant::now();
        let silent: Vec<(u32, Silence)> = (0..self.nodes.len() as u32)
            .filter_map(|n| {
                let x = &self.nodes[n as usize];
                let silence = x.link.as_ref()?.liveness.silence(now)?;
                (x.alive && !x.stopping).then_some((n, silence))
            })
            .collect();
        for (node, silence) in silent {
            if self.nodes[node as usize].alive {
                self.verdicts.silences.insert(node, silence);
                // Silent, it may have been cut off from the root too:
                // that is the truer account than a report of its peers.
                self.verdicts.evicting.remove(&node);
                self.fail(Failure::Node {
                    node,
                    why: "its daemon stopped sending heartbeats".into(),
                    at_ns: now_ns(),
                })
                .await?;
            }
        }
        let over: Vec<u32> = (self.verdicts.evicting.keys().copied())
            .filter(|&n| {
                let x = &self.nodes[n as usize];
                x.alive && x.link.as_ref().is_none_or(|l| l.liveness.leases_over(now))
            })
            .collect();
        for node in over {
            if let Some(why) = self.verdicts.evicting.remove(&node) {
                self.fail(Failure::Node {
                    node,
                    why,
                    at_ns: now_ns(),
                })
                .await?;
            }
        }
        if self.verdicts.first.is_some_and(|t| now - t >= SETTLE) {
            self.verdicts.first = None;
            let reports = std::mem::take(&mut self.verdicts.reports);
            let live = |r: &&Report| {
                let alive = |n: u32| {
                    self.nodes[n as usize].alive && !self.verdicts.evicting.contains_key(&n)
                };
                alive(r.from) && alive(r.lost)
            };
            let reports: Vec<Report> = reports.iter().filter(live).cloned().collect();
            if let Some((node, why)) = pick(&reports) {
                let other = if why.lost == node { why.from } else { why.lost };
                let why = format!(
                    "cut off from node {other} while both reach the root: rank {} cannot reach rank {}",
                    why.rank, why.peer
                );
                self.evict(node, why).await;
            }
        }
        Ok(())
    }

    /// Gives node `node` up: no more leases, and an order to stop.
    async fn evict(&mut self, node: u32, why: String) {
        eprintln!("frame: giving up node {node}: {why}");
        if let Some(link) = &self.nodes[node as usize].link {
            link.liveness.stop_renewing();
        }
        self.verdicts.evicting.insert(node, why);
        // Failed once its leases are over (`judge`), as any node given up.
        let _ = self.take_down(node, crate::inject::Action::Kill).await;
    }

    /// Puts in `rec` how long its failed nodes had been silent, for
    /// those declared dead for it (the longest).
    pub(super) fn note_silence(&mut self, rec: &mut RuntimeRecoveryRecord) {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let heard: Vec<Silence> = (rec.failed_nodes.iter())
            .filter_map(|n| self.verdicts.silences.remove(n))
            .collect();
        if let Some(s) = heard.iter().max_by_key(|s| s.silent) {
            rec.silent_ms = Some(ms(s.silent));
            rec.threshold_ms = Some(ms(s.threshold));
        }
    }
}

#[cfg(test)]
mod tests;
