//! Parity shards being summed on a node: the terms group members send for
//! the shards this node holds, and the members' blob layouts, until the
//! node has everything for a checkpoint and writes it out.

use super::proto::{GroupInfo, Layout, Term};
use super::task::Progress;
use crate::level::erasure::{BlobEntry, Codec, GroupManifest, ParityKey, Stripes};
use std::collections::{BTreeMap, BTreeSet};

/// Bytes of parity that may be summed at once on a node.
pub(crate) const MAX_PENDING_BYTES: u64 = 8 << 30;
/// Finished checkpoints remembered per job.
const KEEP_FINISHED: usize = 16;

#[derive(Debug)]
enum Stage {
    Collecting,
    Writing,
    Written,
    Failed(String),
}

struct Acc {
    group: GroupInfo,
    shards: BTreeMap<ParityKey, (Vec<u8>, BTreeSet<u32>)>,
    layouts: BTreeMap<u32, Vec<BlobEntry>>,
    sent: Option<Result<(), String>>,
    stage: Stage,
}

/// Everything a node needs to write its part of a checkpoint's level 3.
pub(crate) struct Ready {
    pub(crate) manifest: GroupManifest,
    pub(crate) shards: Vec<(ParityKey, Vec<u8>)>,
}

/// The parity being summed on one node, per (job, checkpoint).
#[derive(Default)]
pub(crate) struct Parity {
    accs: BTreeMap<(String, u64), Acc>,
}

impl Parity {
    fn bytes(&self) -> u64 {
        self.accs
            .values()
            .flat_map(|a| a.shards.values())
            .map(|(b, _)| b.len() as u64)
            .sum()
    }

    fn acc(&mut self, job: &str, group: &GroupInfo, node: u32) -> Result<&mut Acc, String> {
        let key = (job.to_string(), group.id);
        // A checkpoint promoted again under a new placement (rebuilt after a
        // failure) starts over: the new group replaces the old one.
        if self.accs.get(&key).is_some_and(|a| a.group != *group) {
            self.accs.remove(&key);
        }
        if !self.accs.contains_key(&key) {
            let me = group
                .nodes
                .iter()
                .position(|n| *n == node)
                .ok_or_else(|| format!("node {node} is not in the group {:?}", group.nodes))?;
            let g = group.nodes.len();
            let p = group.parity as usize;
            if p == 0 || p >= g || group.piece == 0 || group.piece > super::proto::MAX_COPY {
                return Err(format!(
                    "invalid group {:?} (parity {p}, piece {})",
                    group.nodes, group.piece
                ));
            }
            let s = Stripes { g, p };
            let mine: Vec<ParityKey> = (0..g)
                .filter_map(|t| {
                    s.parity_index(t, me).map(|j| ParityKey {
                        stripe: t as u32,
                        index: j as u32,
                    })
                })
                .collect();
            let need = mine.len() as u64 * group.piece;
            if self.bytes() + need > MAX_PENDING_BYTES {
                return Err(format!(
                    "more than {MAX_PENDING_BYTES} bytes of parity are being summed"
                ));
            }
            let shards = mine
                .into_iter()
                .map(|k| (k, (vec![0u8; group.piece as usize], BTreeSet::new())))
                .collect();
            self.accs.insert(
                key.clone(),
                Acc {
                    group: group.clone(),
                    shards,
                    layouts: BTreeMap::new(),
                    sent: None,
                    stage: Stage::Collecting,
                },
            );
        }
        self.accs
            .get_mut(&key)
            .ok_or_else(|| "lost accumulator".to_string())
    }

    /// Adds a member's terms of a shard held here.
    pub(crate) fn term(
        &mut self,
        job: &str,
        node: u32,
        term: &Term,
        bytes: &[u8],
    ) -> Result<Option<Ready>, String> {
        let acc = self.acc(job, &term.group, node)?;
        let s = Stripes {
            g: acc.group.nodes.len(),
            p: acc.group.parity as usize,
        };
        let t = term.key.stripe as usize;
        if t >= s.g || s.data_index(t, term.from as usize).is_none() {
            return Err(format!("position {} has no data in stripe {t}", term.from));
        }
        if bytes.len() as u64 != acc.group.piece {
            return Err(format!(
                "a term of {} bytes, not {}",
                bytes.len(),
                acc.group.piece
            ));
        }
        let (sum, from) = acc
            .shards
            .get_mut(&term.key)
            .ok_or_else(|| format!("this node does not hold parity shard {:?}", term.key))?;
        if !from.insert(term.from) {
            return Err(format!(
                "position {} sent its term of {:?} twice",
                term.from, term.key
            ));
        }
        Codec::add(sum, bytes);
        Ok(Self::ready(acc))
    }

    /// Records a member's blob layout.
    pub(crate) fn layout(
        &mut self,
        job: &str,
        node: u32,
        layout: &Layout,
    ) -> Result<Option<Ready>, String> {
        let acc = self.acc(job, &layout.group, node)?;
        if layout.pos as usize >= acc.group.nodes.len() {
            return Err(format!("no position {} in the group", layout.pos));
        }
        acc.layouts.insert(layout.pos, layout.entries.clone());
        Ok(Self::ready(acc))
    }

    /// Records whether this node sent all its terms and layouts.
    pub(crate) fn sent(&mut self, job: &str, id: u64, result: Result<(), String>) {
        if let Some(acc) = self.accs.get_mut(&(job.to_string(), id)) {
            acc.sent = Some(result);
        }
    }

    fn ready(acc: &mut Acc) -> Option<Ready> {
        if !matches!(acc.stage, Stage::Collecting) {
            return None;
        }
        let k = acc.group.nodes.len() - acc.group.parity as usize;
        let complete = acc.layouts.len() == acc.group.nodes.len()
            && acc.shards.values().all(|(_, from)| from.len() == k);
        if !complete {
            return None;
        }
        acc.stage = Stage::Writing;
        let shards = acc
            .shards
            .iter_mut()
            .map(|(k, (b, _))| (*k, std::mem::take(b)))
            .collect();
        let g = &acc.group;
        Some(Ready {
            manifest: GroupManifest {
                job_id: String::new(),
                checkpoint_id: g.id,
                stamp: g.stamp,
                nodes: g.nodes.clone(),
                parity: g.parity,
                piece: g.piece,
                blobs: acc.layouts.values().cloned().collect(),
            },
            shards,
        })
    }

    /// Records the outcome of writing checkpoint `id`'s parity; forgets
    /// older checkpoints that can no longer finish.
    pub(crate) fn written(&mut self, job: &str, id: u64, result: Result<(), String>) {
        if let Some(acc) = self.accs.get_mut(&(job.to_string(), id)) {
            acc.stage = match result {
                Ok(()) => Stage::Written,
                Err(e) => Stage::Failed(e),
            };
        }
        self.accs.retain(|(j, i), a| {
            j != job || *i >= id || matches!(a.stage, Stage::Written | Stage::Failed(_))
        });
        let finished: Vec<(String, u64)> = self
            .accs
            .iter()
            .filter(|((j, _), a)| j == job && matches!(a.stage, Stage::Written | Stage::Failed(_)))
            .map(|(k, _)| k.clone())
            .collect();
        for k in finished
            .iter()
            .take(finished.len().saturating_sub(KEEP_FINISHED))
        {
            self.accs.remove(k);
        }
    }

    /// Where checkpoint `id`'s level 3 is on this node.
    pub(crate) fn progress(&self, job: &str, id: u64) -> Progress {
        let Some(acc) = self.accs.get(&(job.to_string(), id)) else {
            return Progress::Pending;
        };
        match (&acc.sent, &acc.stage) {
            (Some(Err(e)), _) => Progress::Failed(e.clone()),
            (_, Stage::Failed(e)) => Progress::Failed(e.clone()),
            (Some(Ok(())), Stage::Written) => Progress::Done,
            _ => Progress::Pending,
        }
    }

    /// Forgets everything of `job`.
    pub(crate) fn forget(&mut self, job: &str) {
        self.accs.retain(|(j, _), _| j != job);
    }
}
