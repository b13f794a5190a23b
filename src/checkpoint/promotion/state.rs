//! What a checkpoint keeps of the ranks' promotion bookkeeping (localised
//! recovery with levels above 1): the placement and the managers' places,
//! the counts since each level's last promotion, the promotions in flight
//! and the newest committed, and the managers' answers about those in
//! flight sampled just before the checkpoint was written. Every rank holds
//! the same bookkeeping; a replacement that restores the checkpoint alone
//! takes it up from there, and its commit, gone through again, takes the
//! same decisions as the others' did. Stored as a region of its own under
//! an id programs cannot use, beside the message counts.

use super::{InFlight, Promotions, Secret};
use crate::comm::net::Endpoint;
use crate::comm::Comm;
use crate::config::Config;
use crate::error::{problems, Error, Result};
use crate::level::Level;
use crate::region::{ElemType, RegionId, RegionInfo};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Instant;

/// The region id the bookkeeping is stored under.
pub(crate) const REGION: RegionId = RegionId::MAX - 1;

/// The most bytes the bookkeeping may take: a damaged header cannot make
/// a rank allocate more.
const MAX_BYTES: u64 = 1 << 26;

/// The managers' answers about the promotions in flight: a code and a
/// reason for each (see `settle.rs`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Sample {
    pub(super) codes: Vec<u64>,
    pub(super) reasons: Vec<String>,
}

/// The bookkeeping as saved.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Saved {
    placement: Vec<u32>,
    peers: BTreeMap<u32, Endpoint>,
    counts: [u64; 3],
    auto_every: [u64; 3],
    round: u64,
    in_flight: Vec<InFlight>,
    newest_committed: Vec<(Level, u64)>,
    sample: Option<Sample>,
}

impl Promotions {
    /// The bookkeeping as a region: its description and bytes.
    pub(crate) fn saved_region(&self) -> (RegionInfo, Vec<u8>) {
        let saved = Saved {
            placement: self.placement.clone(),
            peers: self.peers.clone(),
            counts: self.counts,
            auto_every: self.auto_every,
            round: self.round,
            in_flight: self.in_flight.clone(),
            newest_committed: self
                .newest_committed
                .iter()
                .map(|(l, i)| (*l, *i))
                .collect(),
            sample: self.sample.clone(),
        };
        let bytes = serde_json::to_vec(&saved).unwrap_or_default();
        let info = RegionInfo {
            id: REGION,
            elem: ElemType::U8,
            count: bytes.len() as u64,
        };
        (info, bytes)
    }

    /// The bookkeeping of a replacement that restored checkpoint `id`
    /// (`file`) alone: the others' as that checkpoint was written, with
    /// this rank's node manager reached again (the runtime says where).
    /// Not collective.
    pub(crate) fn resume(
        cfg: &Config,
        comm: &dyn Comm,
        id: u64,
        file: &crate::format::CheckpointFile,
    ) -> Result<Self> {
        let unreadable = |reason: String| Error::Unreadable { id, reason };
        let info = file.region(REGION).ok_or_else(|| {
            unreadable("it holds no promotion bookkeeping (its rank kept no message log)".into())
        })?;
        if info.count > MAX_BYTES {
            return Err(unreadable(format!(
                "its promotion bookkeeping claims {} bytes",
                info.count
            )));
        }
        let mut bytes = vec![0u8; info.count as usize];
        file.load_region(REGION, &mut bytes)
            .map_err(|e| unreadable(e.to_string()))?;
        let saved: Saved = serde_json::from_slice(&bytes)
            .map_err(|e| unreadable(format!("its promotion bookkeeping does not parse: {e}")))?;
        let rank = comm.rank() as u32;
        let node = saved.placement.get(rank as usize).copied();
        // A replacement on a spare node runs there as the failed node.
        let stand_in = comm.link().recovery().stand_in;
        let here = stand_in.as_ref().map_or(comm.node(), |s| s.node);
        if saved.placement.len() != comm.size() || node != Some(here) {
            return Err(unreadable(format!(
                "its promotion bookkeeping places rank {rank} on node {node:?}, and it runs as node {here}"
            )));
        }
        let mut peers = saved.peers;
        if let Some(s) = stand_in {
            peers.extend(s.managers);
        }
        let place = crate::comm::place(comm);
        let secret: Secret = place
            .runtime
            .as_ref()
            .map(|r| r.secret.clone())
            .ok_or_else(|| Error::Init {
                problems: problems(vec![(
                    rank as usize,
                    "a replacement rejoining alone needs the runtime's job secret".into(),
                )]),
            })?;
        let leader = saved.placement.iter().position(|n| Some(*n) == node) == Some(rank as usize);
        let mut client = None;
        let mut manager = None;
        let watch = comm.link().recovery_watch();
        if leader {
            let (m, c) = super::calls::connect_manager(cfg, &place, &secret, None, &watch)
                .map_err(|e| Error::Init {
                    problems: problems(vec![(
                        rank as usize,
                        format!("cannot reach the manager of node {}: {e}", comm.node()),
                    )]),
                })?;
            manager = m;
            client = Some(c);
        }
        let now = Instant::now();
        Ok(Self {
            cfg: cfg.clone(),
            rank,
            leader,
            placement: saved.placement,
            peers,
            client,
            secret,
            manager_away: false,
            stale: false,
            watch,
            auto_every: saved.auto_every,
            round: saved.round,
            fence: super::fence_of(comm),
            _manager: manager,
            counts: saved.counts,
            since: [now; 3],
            in_flight: saved.in_flight,
            newest_committed: saved.newest_committed.into_iter().collect(),
            sample: saved.sample,
            replaying: false,
        })
    }
}
