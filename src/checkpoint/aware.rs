//! Failure-aware recovery on the ranks' side (the `frame` strategy).
//!
//! One round, and only one, before anything is loaded: every rank sends
//! rank 0 a [`Report`] of what it holds (its sound level-1 checkpoints,
//! and on a node's lowest rank the commit markers, copies and erasure
//! manifests the node keeps; no data is read). Rank 0 alone reads the
//! reports: it derives the failure topology and the commits, the pure
//! planner [`crate::recovery::aware`] names the level and checkpoint, and
//! rank 0 sends every rank the [`Decision`]: the choice and, for levels 2
//! and 3, who sends or rebuilds whose file. The reports grow with the
//! job (a node's markers record where every rank was), so no other rank
//! decodes them. The files are then fetched from that level and checked
//! while being installed; if some rank finds damage, all ranks exclude
//! that level's copy and rank 0 plans again from the reports it has.
//!
//! The failure topology is the union of what the runtime reported (the
//! failed nodes of the REINIT, through [`RuntimeLink::recovery`](crate::comm::RuntimeLink::recovery)),
//! the nodes of a recorded layout that hold no rank now (an earlier
//! failure, or a job redeployed on other nodes), and the nodes whose
//! storage came back empty (a redeployed node that lost its files). It
//! names nodes as the layouts do: a node a spare stood in for in a logged
//! recovery lives on where the spare does, which keeps what was promoted
//! under the failed node's id.

use super::Checkpointer;
use crate::comm::RecoveryContext;
use crate::error::Result;
use crate::level::commit::Commit;
use crate::level::erasure::ErasureStore;
use crate::level::{CopyStore, Level};
use crate::recovery::aware::{plan, usable, Choice, Committed};
use crate::recovery::{copies, erasure, Inventory};
use crate::scheme;
use crate::topology::FailureTopology;
use crate::topology::{Rule, Topology};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

/// What one rank tells the others before recovery is planned.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(super) struct Report {
    /// The rank's node now.
    node: u32,
    /// A random number; rank 0's numbers the next attempts.
    session: u64,
    /// Sound level-1 checkpoints: (id, stamp).
    l1: Vec<(u64, u64)>,
    /// The node's storage holds nothing of the job (lowest rank only).
    empty: bool,
    /// Commit markers read (levels 2 and 3 of the node by its lowest rank,
    /// level 4 by rank 0).
    commits: Vec<Commit>,
    /// Level-2 copies the node keeps (lowest rank only).
    copies: copies::Offer,
    /// Level-3 files, parity and manifests the node keeps (lowest rank only).
    erasure: erasure::Offer,
    /// The largest id of any level-1 file the rank holds (new checkpoints
    /// are numbered past every rank's).
    largest: u64,
}

/// The outcome of failure-aware planning.
pub(super) enum Found {
    /// Every rank restores `id` from level 1 (nothing fetched).
    Level1 {
        /// Checkpoint id.
        id: u64,
        /// The session for the next attempts' stamps.
        session: u64,
    },
    /// The checkpoint was fetched from `level` into level 1 on every rank
    /// or, when not `installed`, every rank reads it from that level as it
    /// loads it.
    Fetched {
        /// The level.
        level: Level,
        /// Checkpoint id.
        id: u64,
        /// The session for the next attempts' stamps.
        session: u64,
        /// Whether the files are in level 1 already.
        installed: bool,
    },
    /// Nothing committed survives: the ballot decides between a fresh
    /// start and an error.
    Nothing,
}

/// What rank 0 decides from every rank's report and sends to all: the
/// ranks act on it without seeing the reports.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Decision {
    /// Rank 0's random number: the session of the next attempts' stamps.
    session: u64,
    /// The largest id of any rank's level-1 file.
    largest: u64,
    /// What every rank does.
    step: Step,
}

/// The restore every rank takes part in.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
enum Step {
    /// Nothing committed survives.
    #[default]
    Nothing,
    /// Every rank restores the choice from level 1.
    Level1(Choice),
    /// The ranks that lost their files get the choice's copies (`None`:
    /// some rank's file has no copy left, so the level fails).
    Copies(Choice, Option<copies::CopyPlan>),
    /// Level 3 rebuilds the choice (`None`: some group cannot).
    Erasure(Choice, Option<erasure::ErasurePlan>),
    /// Every rank loads the choice from the global file system.
    Global(Choice),
}

impl Step {
    /// The checkpoint and level chosen, if any.
    fn choice(&self) -> Option<&Choice> {
        match self {
            Step::Nothing => None,
            Step::Level1(c) | Step::Copies(c, _) | Step::Erasure(c, _) | Step::Global(c) => Some(c),
        }
    }
}

/// Rank 0's view: every rank's report, and what follows from them.
struct Planner {
    reports: Vec<Report>,
    failure: FailureTopology,
    committed: Vec<Committed>,
}

impl Planner {
    /// The failure topology and the commits every level made, from the
    /// reports; commits past `ceiling` are left out.
    fn new(reports: Vec<Report>, from_runtime: &RecoveryContext, ceiling: Option<u64>) -> Self {
        let placement: Vec<u32> = reports.iter().map(|r| r.node).collect();
        let failure = failure_topology(&reports, from_runtime);
        let mut committed = committed(&reports, &placement);
        if let Some(top) = ceiling {
            committed.retain(|c| c.id <= top);
        }
        Self {
            reports,
            failure,
            committed,
        }
    }

    /// The restore planned with `excluded` level copies left out.
    fn decide(&self, excluded: &[(Level, u64)]) -> Decision {
        let step = match plan(&self.failure, &self.committed, excluded) {
            None => Step::Nothing,
            Some(choice) => match choice.level {
                Level::L1 => Step::Level1(choice),
                Level::L2 => Step::Copies(choice, self.copy_plan(&choice)),
                Level::L3 => Step::Erasure(choice, self.erasure_plan(&choice)),
                Level::L4 => Step::Global(choice),
            },
        };
        Decision {
            session: self.reports.first().map_or(0, |r| r.session),
            largest: self.reports.iter().map(|r| r.largest).max().unwrap_or(0),
            step,
        }
    }

    /// The rule of the scheme that protected `choice` and survives the
    /// failure (`None` at level 1).
    fn rule_of(&self, choice: &Choice) -> Option<Rule> {
        (self.committed.iter())
            .filter(|c| (c.level, c.id, c.stamp) == (choice.level, choice.id, choice.stamp))
            .filter(|c| usable(c, &self.failure))
            .find_map(|c| c.protection.as_ref().map(|p| p.rule()))
    }

    /// Who sends whom their level-2 copy of the choice.
    fn copy_plan(&self, choice: &Choice) -> Option<copies::CopyPlan> {
        let offers: Vec<copies::Offer> = (self.reports.iter())
            .map(|r| copies::Offer {
                node: r.node,
                own: only(&r.copies.own, choice),
                copies: (r.copies.copies.iter())
                    .filter(|c| c.id == choice.id && c.stamp == choice.stamp)
                    .cloned()
                    .collect(),
                // The choice is committed: some node's marker said so.
                committed: vec![(choice.id, choice.stamp)],
            })
            .collect();
        copies::plan(&offers, &[])
    }

    /// Which files come whole and which groups decode, for the choice's
    /// level 3.
    fn erasure_plan(&self, choice: &Choice) -> Option<erasure::ErasurePlan> {
        let offers: Vec<erasure::Offer> = (self.reports.iter())
            .map(|r| erasure::Offer {
                own: only(&r.erasure.own, choice),
                node: r.erasure.node,
                stood_in_for: r.erasure.stood_in_for.clone(),
                kept: (r.erasure.kept.iter())
                    .filter(|k| {
                        k.manifest.checkpoint_id == choice.id && k.manifest.stamp == choice.stamp
                    })
                    .cloned()
                    .collect(),
                committed: vec![(choice.id, choice.stamp)],
            })
            .collect();
        erasure::plan(&offers, &[])
    }

    /// When the plan restores an older checkpoint than the one wanted
    /// (see `choice.rs`): the one wanted, and the ranks that hold no sound
    /// level-1 copy of it (the levels above found none that survives).
    fn shortfall(&self, id: u64, ceiling: Option<u64>) -> (u64, Vec<crate::RankProblem>) {
        let newest_held = (self.reports.iter())
            .flat_map(|r| r.l1.iter().map(|(i, _)| *i))
            .chain(self.committed.iter().map(|c| c.id))
            .filter(|i| ceiling.is_none_or(|top| *i <= top))
            .max()
            .unwrap_or(id);
        let wanted = ceiling.unwrap_or(newest_held);
        let why = (self.reports.iter().enumerate())
            .filter(|(_, r)| !r.l1.iter().any(|(i, _)| *i == wanted))
            .map(|(rank, _)| crate::RankProblem {
                rank,
                reason: format!("holds no sound level-1 copy of checkpoint {wanted}, and no level above restores it"),
            })
            .collect();
        (wanted, why)
    }
}

/// The (id, stamp) pairs of `own` that are the choice's.
fn only(own: &[(u64, u64)], choice: &Choice) -> Vec<(u64, u64)> {
    (own.iter().copied())
        .filter(|o| *o == (choice.id, choice.stamp))
        .collect()
}

impl Checkpointer<'_> {
    /// Plans recovery from the failure topology with one round (every
    /// rank's report gathered at rank 0, its decision sent to all), then
    /// fetches from the level chosen, falling back level by level (all
    /// ranks together) only when a fetch finds damage. Collective.
    pub(super) fn recover_aware(
        &mut self,
        l1: &Inventory,
        mut excluded: Vec<(Level, u64)>,
    ) -> Result<Found> {
        let (copy_offer, copy_store) = self.copies_offer(l1, Level::L2);
        let (erasure_offer, erasure_store) = self.erasure_offer(l1, super::rebuild::Check::None);
        let report = Report {
            node: self.comm.node(),
            session: super::random_u64(),
            l1: l1.valid.iter().map(|h| (h.id, h.stamp)).collect(),
            empty: self.is_node_leader()
                && self.node_holds_nothing(l1, &copy_store, &erasure_store),
            commits: self.commits_here(&copy_store, &erasure_store),
            copies: copy_offer,
            erasure: erasure_offer,
            largest: l1.largest_id(),
        };
        let planner = self
            .gather_at_root(&report)?
            .map(|reports| Planner::new(reports, &self.comm.link().recovery(), self.ceiling));
        self.stats.recovery_rounds += 1;
        let found = loop {
            let decision = planner.as_ref().map(|p| p.decide(&excluded));
            if let (Some(p), Some(d)) = (&planner, &decision) {
                let rule = d.step.choice().and_then(|c| p.rule_of(c));
                tracing::info!(failed_nodes = ?p.failure.nodes, choice = ?d.step.choice(), rule = ?rule.map(|r| r.to_string()), "recovery planned at rank 0");
                if let (Some(choice), true) = (d.step.choice(), excluded.is_empty()) {
                    let (wanted, why) = p.shortfall(choice.id, self.ceiling);
                    self.tell_choice(choice.id, wanted, &why);
                }
            }
            let decision: Decision =
                self.broadcast_from_root(decision.as_ref(), "recovery plan")?;
            self.resume_past = self.resume_past.max(decision.largest);
            let session = decision.session;
            let (choice, fetched) = match &decision.step {
                Step::Nothing => break Found::Nothing,
                Step::Level1(c) => break Found::Level1 { id: c.id, session },
                Step::Copies(c, plan) => match plan {
                    Some(p) => (*c, self.transfer_copies(p, copy_store.as_ref(), Level::L2)?),
                    None => (*c, false),
                },
                Step::Erasure(c, plan) => match plan {
                    Some(p) => (*c, self.rebuild_once(p, erasure_store.as_ref())?),
                    None => (*c, false),
                },
                // Level 4 needs no rank's help: each reads its own file
                // when it loads, straight into its regions (damage found
                // then moves every rank on, as here).
                Step::Global(c) => {
                    break Found::Fetched {
                        level: c.level,
                        id: c.id,
                        session,
                        installed: false,
                    }
                }
            };
            if fetched {
                break Found::Fetched {
                    level: choice.level,
                    id: choice.id,
                    session,
                    installed: true,
                };
            }
            tracing::warn!(checkpoint = choice.id, level = %choice.level, "damage found while fetching; every rank moves on to the next level");
            excluded.push((choice.level, choice.id));
        };
        Ok(found)
    }

    /// Whether this node's storage holds nothing of the job at any level.
    fn node_holds_nothing(
        &self,
        l1: &Inventory,
        copies: &Option<CopyStore>,
        erasure: &Option<ErasureStore>,
    ) -> bool {
        l1.valid.is_empty()
            && l1.damaged.is_empty()
            && copies.as_ref().is_none_or(|s| s.ids().is_empty())
            && erasure.as_ref().is_none_or(|s| s.ids().is_empty())
    }

    /// The commit markers this rank reports: its node's levels 2 and 3 on
    /// a node's lowest rank, level 4 on rank 0.
    fn commits_here(
        &self,
        copies: &Option<CopyStore>,
        erasure: &Option<ErasureStore>,
    ) -> Vec<Commit> {
        let mut out = Vec::new();
        if let Some(s) = copies {
            out.extend(s.commits());
        }
        if let Some(s) = erasure {
            out.extend(s.copies().commits());
        }
        if self.comm.rank() == 0 && !self.cfg.l4.interval.is_zero() {
            if let Some(s) = self.global_store() {
                out.extend(s.commits());
            }
        }
        out
    }
}

/// The failed nodes, by the ids the checkpoints' layouts use: the
/// runtime's, the nodes whose storage is empty, and the layouts' nodes
/// that hold no rank now. A node a spare stood in for is as alive as the
/// spare: its storage (what was promoted while the spare stood in) is
/// there.
fn failure_topology(reports: &[Report], from_runtime: &RecoveryContext) -> FailureTopology {
    let keeper = |n: u32| from_runtime.stood_in.get(&n).copied().unwrap_or(n);
    let now: BTreeSet<u32> = reports.iter().map(|r| r.node).collect();
    // The nodes whose storage is gone; a node's lowest rank speaks for it.
    let mut gone: BTreeSet<u32> = from_runtime.failed.nodes.clone();
    let mut seen = BTreeSet::new();
    for r in reports {
        if seen.insert(r.node) && r.empty {
            gone.insert(r.node);
        }
    }
    let mut named: BTreeSet<u32> = now.union(&gone).copied().collect();
    for c in reports.iter().flat_map(|r| &r.commits) {
        if let Some(layout) = &c.layout {
            named.extend(&layout.placement);
        }
    }
    let nodes = named
        .into_iter()
        .filter(|n| {
            let at = keeper(*n);
            gone.contains(&at) || !now.contains(&at)
        })
        .collect();
    FailureTopology {
        nodes,
        ranks: from_runtime.failed.ranks.clone(),
    }
}

/// What each level committed, from every rank's report: level 1 has what
/// every rank holds with one stamp; the others have their markers, each
/// protected by the scheme its layout records, under the rule it records
/// (a marker whose rule this build cannot read is passed over, with a
/// warning: its data is not guessed at). A checkpoint committed under two
/// layouts (promoted again after a recovery) is listed under both.
fn committed(reports: &[Report], placement: &[u32]) -> Vec<Committed> {
    let mut out = Vec::new();
    let Ok(current) = Topology::new(placement.to_vec()) else {
        return out;
    };
    // Level 1: ids every rank holds with the same stamp.
    let mut count: BTreeMap<(u64, u64), usize> = BTreeMap::new();
    for r in reports {
        for held in r.l1.iter().collect::<BTreeSet<_>>() {
            *count.entry(*held).or_default() += 1;
        }
    }
    for ((id, stamp), n) in count {
        if n == reports.len() {
            out.push(Committed {
                level: Level::L1,
                id,
                stamp,
                layout: current.clone(),
                protection: None,
            });
        }
    }
    let mut seen = HashSet::new();
    for c in reports.iter().flat_map(|r| &r.commits) {
        let Some(level) = Level::from_number(c.level) else {
            continue;
        };
        if level == Level::L1 || !seen.insert((level, c.checkpoint_id, c.stamp, &c.layout)) {
            continue;
        }
        let (layout, rule) = match &c.layout {
            Some(l) => match l.topology() {
                Ok(t) => (t, scheme::recorded(l, level)),
                Err(_) => continue,
            },
            // Level 4 does not depend on where the ranks were.
            None if level == Level::L4 => (current.clone(), Some(scheme::global::rule())),
            None => continue,
        };
        if layout.placement().len() != reports.len() {
            continue;
        }
        let protection = match rule.as_ref().map(|r| scheme::protection(&layout, r)) {
            Some(Ok(p)) => Arc::from(p),
            Some(Err(e)) => {
                tracing::warn!(checkpoint = c.checkpoint_id, level = %level, error = %e, "a commit marker's rule is unusable; its checkpoint is passed over at that level");
                continue;
            }
            None => continue,
        };
        out.push(Committed {
            level,
            id: c.checkpoint_id,
            stamp: c.stamp,
            layout,
            protection: Some(protection),
        });
    }
    out
}

#[cfg(test)]
mod tests;
