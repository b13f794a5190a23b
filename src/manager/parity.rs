//! Parity shards being summed on a node: which windows of which members'
//! terms arrived for the shards this node holds, and the members' blob
//! layouts, until the node has everything for a checkpoint and seals it.
//! The sums themselves are files (see
//! [`ErasureStore::add_to_parity`](crate::level::erasure::ErasureStore::add_to_parity)):
//! nothing here grows with the checkpoint's size.

use super::proto::{self, BlobLayout, GroupInfo, Term};
use super::task::Progress;
use crate::level::erasure::{BlobEntry, GroupManifest, ParityKey, Stripes};
use crate::level::StorageError;
use std::collections::{BTreeMap, BTreeSet};

/// Why a member's term or layout is refused (answered to the member as
/// text).
#[derive(Debug, thiserror::Error)]
pub(crate) enum ParityError {
    /// A message of an older promotion of the checkpoint.
    #[error("round {round} of checkpoint {id} was superseded by round {newer}")]
    Superseded {
        /// Its round.
        round: u64,
        /// The checkpoint.
        id: u64,
        /// The round being summed.
        newer: u64,
    },
    /// One round naming two groups.
    #[error("round {round} of checkpoint {id} names two groups: {first:?} and {second:?}")]
    TwoGroups {
        /// The round.
        round: u64,
        /// The checkpoint.
        id: u64,
        /// The group being summed.
        first: Vec<u32>,
        /// The other.
        second: Vec<u32>,
    },
    /// A group this node is not in.
    #[error("node {node} is not in the group {nodes:?}")]
    NotInGroup {
        /// This node.
        node: u32,
        /// The group.
        nodes: Vec<u32>,
    },
    /// A group no promotion makes.
    #[error("invalid group {nodes:?} (parity {parity}, piece {piece})")]
    InvalidGroup {
        /// Its nodes.
        nodes: Vec<u32>,
        /// Its parity.
        parity: usize,
        /// Its piece size.
        piece: u64,
    },
    /// More parity than a node sums at once.
    #[error("more than {MAX_PENDING_BYTES} bytes of parity are being summed")]
    TooMuch,
    /// A term from a position that holds parity in that stripe.
    #[error("position {from} has no data in stripe {stripe}")]
    NoData {
        /// The sender's position.
        from: u32,
        /// The stripe.
        stripe: usize,
    },
    /// A window that does not fit the shard.
    #[error("a window of {len} bytes at {offset} of a {piece}-byte shard")]
    Window {
        /// Its length.
        len: u64,
        /// Where it starts.
        offset: u64,
        /// The shard's length.
        piece: u64,
    },
    /// A shard another node holds.
    #[error("this node does not hold parity shard {0:?}")]
    NotHeld(ParityKey),
    /// A window already added.
    #[error("position {from} sent its term of {key:?} at {offset} twice")]
    Twice {
        /// The sender's position.
        from: u32,
        /// The shard.
        key: ParityKey,
        /// The window.
        offset: u64,
    },
    /// A layout of no member.
    #[error("no position {0} in the group")]
    NoPosition(u32),
    /// This node's storage.
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// Bytes of parity that may be summed at once on a node (in files).
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
    /// Per shard held here, per window offset, the positions whose term
    /// was added.
    shards: BTreeMap<ParityKey, BTreeMap<u64, BTreeSet<u32>>>,
    layouts: BTreeMap<u32, Vec<BlobEntry>>,
    sent: Option<Result<(), String>>,
    stage: Stage,
}

/// Everything a node needs to write its part of a checkpoint's level 3.
pub(crate) struct Ready {
    pub(crate) manifest: GroupManifest,
    pub(crate) shards: Vec<ParityKey>,
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
            .filter(|a| matches!(a.stage, Stage::Collecting | Stage::Writing))
            .map(|a| a.shards.len() as u64 * a.group.piece)
            .sum()
    }

    /// The accumulator of `group`'s checkpoint, and whether it is new.
    fn acc(
        &mut self,
        job: &str,
        group: &GroupInfo,
        node: u32,
    ) -> Result<(&mut Acc, bool), ParityError> {
        let key = (job.to_string(), group.id);
        // A checkpoint promoted again (after a recovery, under the same or a
        // new placement) starts over: the newer round replaces the older,
        // whose late messages are refused.
        if let Some(a) = self.accs.get(&key) {
            if group.round > a.group.round {
                self.accs.remove(&key);
            } else if group.round < a.group.round {
                return Err(ParityError::Superseded {
                    round: group.round,
                    id: group.id,
                    newer: a.group.round,
                });
            } else if a.group != *group {
                return Err(ParityError::TwoGroups {
                    round: group.round,
                    id: group.id,
                    first: a.group.nodes.clone(),
                    second: group.nodes.clone(),
                });
            }
        }
        let pending = self.bytes();
        match self.accs.entry(key) {
            std::collections::btree_map::Entry::Occupied(a) => Ok((a.into_mut(), false)),
            std::collections::btree_map::Entry::Vacant(v) => {
                let acc = new_acc(group, node, pending)?;
                Ok((v.insert(acc), true))
            }
        }
    }

    /// Adds a window of a member's terms of a shard held here: checks it,
    /// has `add` sum it (told whether the checkpoint's sums start over),
    /// and records it once added.
    pub(crate) fn term(
        &mut self,
        job: &str,
        node: u32,
        term: &Term,
        len: u64,
        add: impl FnOnce(bool) -> Result<(), StorageError>,
    ) -> Result<Option<Ready>, ParityError> {
        let (acc, fresh) = self.acc(job, &term.group, node)?;
        let s = Stripes {
            g: acc.group.nodes.len(),
            p: acc.group.parity as usize,
        };
        let t = term.key.stripe as usize;
        if t >= s.g || s.data_index(t, term.from as usize).is_none() {
            return Err(ParityError::NoData {
                from: term.from,
                stripe: t,
            });
        }
        if proto::window_len(acc.group.piece, term.offset) != Some(len) {
            return Err(ParityError::Window {
                len,
                offset: term.offset,
                piece: acc.group.piece,
            });
        }
        let windows = acc
            .shards
            .get_mut(&term.key)
            .ok_or(ParityError::NotHeld(term.key))?;
        if windows
            .get(&term.offset)
            .is_some_and(|from| from.contains(&term.from))
        {
            return Err(ParityError::Twice {
                from: term.from,
                key: term.key,
                offset: term.offset,
            });
        }
        add(fresh)?;
        windows.entry(term.offset).or_default().insert(term.from);
        Ok(Self::ready(acc))
    }

    /// Records a member's blob layout.
    /// `fresh` is told whether the checkpoint's sums start over.
    pub(crate) fn layout(
        &mut self,
        job: &str,
        node: u32,
        layout: &BlobLayout,
        fresh: impl FnOnce(bool),
    ) -> Result<Option<Ready>, ParityError> {
        let (acc, new) = self.acc(job, &layout.group, node)?;
        fresh(new);
        if layout.pos as usize >= acc.group.nodes.len() {
            return Err(ParityError::NoPosition(layout.pos));
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
        let windows = acc.group.piece.div_ceil(proto::WINDOW) as usize;
        let complete = acc.layouts.len() == acc.group.nodes.len()
            && acc
                .shards
                .values()
                .all(|w| w.len() == windows && w.values().all(|from| from.len() == k));
        if !complete {
            return None;
        }
        acc.stage = Stage::Writing;
        let shards = acc.shards.keys().copied().collect();
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
                code: g.code.clone(),
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

/// The accumulator of a checkpoint's parity new on this node (`node`),
/// with `pending` bytes of parity already being summed here.
fn new_acc(group: &GroupInfo, node: u32, pending: u64) -> Result<Acc, ParityError> {
    let me =
        group
            .nodes
            .iter()
            .position(|n| *n == node)
            .ok_or_else(|| ParityError::NotInGroup {
                node,
                nodes: group.nodes.clone(),
            })?;
    let g = group.nodes.len();
    let p = group.parity as usize;
    if p == 0 || p >= g || group.piece == 0 || group.piece > super::proto::MAX_COPY {
        return Err(ParityError::InvalidGroup {
            nodes: group.nodes.clone(),
            parity: p,
            piece: group.piece,
        });
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
    if pending + need > MAX_PENDING_BYTES {
        return Err(ParityError::TooMuch);
    }
    Ok(Acc {
        group: group.clone(),
        shards: mine.into_iter().map(|k| (k, BTreeMap::new())).collect(),
        layouts: BTreeMap::new(),
        sent: None,
        stage: Stage::Collecting,
    })
}
