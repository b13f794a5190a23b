//! The root's part in teams (`recovery.spares` above 1): a logged
//! recovery's replacement is released once every helper listens, with
//! where they listen; the helpers are released once the replacement
//! listens for them too. Each helper's report becomes a `help` record.

use super::Cluster;
use crate::proto::ToDaemon;
use frame::comm::net::Endpoint;
use frame::metrics::{HelpRecord, Record};

/// A team being formed: where each part listens, once it said.
#[derive(Debug)]
pub(super) struct Forming {
    endpoints: Vec<Option<Endpoint>>,
    /// The replacement listens (for the job) and waits for its helpers.
    replacement_ready: bool,
}

impl Forming {
    pub(super) fn new(parts: u32) -> Self {
        Self {
            endpoints: vec![None; parts as usize],
            replacement_ready: false,
        }
    }

    /// Where the helpers listen, once all said.
    fn helpers(&self) -> Option<Vec<Endpoint>> {
        self.endpoints.iter().skip(1).cloned().collect()
    }
}

impl Cluster<'_> {
    /// The replacement of `rank` listens: release it now, or once its
    /// helpers listen too.
    pub(super) async fn replacement_ready(&mut self, rank: u32) {
        if let Some(forming) = self.logged.teams.get_mut(&rank) {
            if forming.helpers().is_none() {
                forming.replacement_ready = true;
                return;
            }
        }
        self.ready_to_rejoin(rank).await;
    }

    /// The helpers the replacement of `rank` is released with.
    pub(super) fn helpers_of(&self, rank: u32) -> Vec<Endpoint> {
        self.logged
            .teams
            .get(&rank)
            .and_then(Forming::helpers)
            .unwrap_or_default()
    }

    /// Part `part` of the team of `rank` listens at `endpoint`.
    pub(super) async fn on_teamed(&mut self, rank: u32, epoch: u64, part: u32, endpoint: Endpoint) {
        if epoch != self.epoch {
            return;
        }
        let Some(forming) = self.logged.teams.get_mut(&rank) else {
            return;
        };
        let Some(slot) = forming.endpoints.get_mut(part as usize) else {
            return;
        };
        *slot = Some(endpoint);
        if part == 0 {
            // The replacement listens for its team: the helpers may go.
            let team: Option<Vec<Endpoint>> = forming.endpoints.iter().cloned().collect();
            self.logged.teams.remove(&rank);
            if let Some(team) = team {
                let node = self.placement[rank as usize];
                self.send(node, &ToDaemon::ReleaseHelpers { rank, epoch, team })
                    .await;
            }
        } else if forming.replacement_ready && forming.helpers().is_some() {
            self.ready_to_rejoin(rank).await;
        }
    }

    /// A helper of `rank`'s replacement finished: one metrics record.
    pub(super) fn record_help(&mut self, rank: u32, part: u32, wall_ms: f64, cpu_ms: f64) {
        self.record(Record::Help(HelpRecord {
            failure: self.logged.last_failure,
            rank,
            part,
            parts: self.launch.spares,
            wall_ms,
            cpu_ms,
        }));
    }
}
