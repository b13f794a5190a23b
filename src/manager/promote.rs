//! The transformations a manager runs for a promotion, one per level. They
//! read the node's staged level-1 files and write (or send) the level's
//! copies, one piece at a time (a node's own files are kept at levels 2
//! and 3 as second names, never copied); each returns only once what it
//! wrote is durable.

use super::client::{Client, PutError, Source, SourceError};
use super::proto::{self, BlobLayout, GroupInfo, Put, Reply, Request, Term};
use super::task::{Task, Transform};
use crate::auth::Secret;
use crate::comm::net::Endpoint;
use crate::format::Metadata;
use crate::level::erasure::{scale, CodecError, ErasureStore, ParityKey, Stripes};
use crate::level::staging::Staging;
use crate::level::{CopyStore, GlobalStore, Level, Pieces, StorageError};
use crate::safefs::Dir;
use crate::scheme::partner::Partners;
use crate::scheme::{self, SchemeError};
use crate::topology::Rule;
use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

/// Why a promotion failed. Turned into text only where it leaves the
/// manager (the progress the ranks ask for, the metrics record).
#[derive(Debug, thiserror::Error)]
pub(crate) enum Failure {
    /// Another node's manager could not be reached (its node is most
    /// likely lost; the runtime says so, and the ranks report the level
    /// once for the job).
    #[error("node {node}'s manager does not answer ({error})")]
    Unreachable {
        /// The node.
        node: u32,
        /// What the connection said.
        error: String,
    },
    /// Another node's manager answered with an error or out of turn.
    #[error("node {node}'s manager at {at}: {answer}")]
    Answered {
        /// The node.
        node: u32,
        /// Where its manager listens.
        at: String,
        /// Its answer.
        answer: String,
    },
    /// This node's storage.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// The rule the level was asked to follow.
    #[error(transparent)]
    Scheme(#[from] SchemeError),
    /// The erasure code.
    #[error(transparent)]
    Code(#[from] CodecError),
    /// A node without a partner.
    #[error("node {0} has no partner: the job runs on a single node")]
    NoPartner(u32),
    /// A node no manager is known for.
    #[error("no manager is known for node {0}")]
    NoManager(u32),
    /// A node outside every level-3 group.
    #[error("node {0} is in no group")]
    NoGroup(u32),
    /// Level 3 on a single node.
    #[error("level 3 needs at least two nodes")]
    TooFewNodes,
    /// A staged file of another attempt at the checkpoint.
    #[error("rank {rank}'s file of checkpoint {id} belongs to another attempt")]
    OtherAttempt {
        /// Whose file.
        rank: u32,
        /// The checkpoint.
        id: u64,
    },
    /// A blob of another length than the ranks announced.
    #[error("node {node}'s blob holds {held} bytes, the ranks announced {announced:?}")]
    BlobLength {
        /// The node.
        node: u32,
        /// Its blob's length.
        held: u64,
        /// What the ranks announced for it.
        announced: Option<u64>,
    },
    /// Bytes being sent could not be read.
    #[error(transparent)]
    Source(#[from] SourceError),
}

/// Connections to other managers, made on first use and kept.
pub(crate) struct Peers {
    secret: Secret,
    clients: HashMap<String, Client>,
}

impl Peers {
    pub(crate) fn new(secret: Secret) -> Self {
        Self {
            secret,
            clients: HashMap::new(),
        }
    }

    /// Sends bytes of `task`'s promotion to node `node`'s manager at `to`
    /// (see [`Client::put_from`]), read from a source `open` makes,
    /// reconnecting once (with a new source) if a kept connection broke.
    fn put<S: Source>(
        &mut self,
        (node, to): (u32, &Endpoint),
        task: &Task,
        what: Put,
        mut open: impl FnMut() -> Result<S, Failure>,
    ) -> Result<(), Failure> {
        // Why a source could not be made: returned as it is.
        let mut unopened = None;
        let sent = self.call(node, to, |c| match open() {
            Ok(mut source) => c.put_from(&task.job_id, task.fence, what.clone(), &mut source),
            Err(e) => {
                unopened = Some(e);
                // Never sent: the connection stays as it was.
                Ok(Reply::Ok)
            }
        });
        match unopened {
            Some(e) => Err(e),
            None => sent,
        }
    }

    /// Sends a request to node `node`'s manager at `to`.
    fn request(&mut self, (node, to): (u32, &Endpoint), req: &Request) -> Result<(), Failure> {
        self.call(node, to, |c| Ok(c.call(req)?))
    }

    fn call(
        &mut self,
        node: u32,
        to: &Endpoint,
        mut f: impl FnMut(&mut Client) -> Result<Reply, PutError>,
    ) -> Result<(), Failure> {
        let key = to.to_string();
        let unreachable = |error: String| Failure::Unreachable { node, error };
        for attempt in 0..2 {
            if !self.clients.contains_key(&key) {
                let c =
                    Client::connect(to, &self.secret).map_err(|e| unreachable(e.to_string()))?;
                self.clients.insert(key.clone(), c);
            }
            let Some(client) = self.clients.get_mut(&key) else {
                continue;
            };
            match f(client) {
                Ok(Reply::Ok) => return Ok(()),
                Ok(Reply::Error(answer)) => {
                    return Err(Failure::Answered {
                        node,
                        at: to.to_string(),
                        answer,
                    })
                }
                Ok(other) => {
                    return Err(Failure::Answered {
                        node,
                        at: to.to_string(),
                        answer: format!("{other:?}"),
                    })
                }
                Err(PutError::Source(e)) => {
                    // The connection is left mid-put: never reused.
                    self.clients.remove(&key);
                    return Err(Failure::Source(e));
                }
                Err(PutError::Io(e)) => {
                    self.clients.remove(&key);
                    if attempt == 1 {
                        return Err(unreachable(e.to_string()));
                    }
                }
            }
        }
        Err(unreachable(format!("{to} unreachable")))
    }
}

/// Runs one level of `task`, protected under `rule`, on the node whose
/// local directory is `local_dir`.
pub(crate) fn run(
    task: &Task,
    level: Level,
    rule: &Rule,
    local_dir: &Path,
    who: u32,
    peers: &mut Peers,
) -> Result<Transform, Failure> {
    let started = Instant::now();
    let reader = Staging::open(local_dir, &task.job_id, who)?;
    let mut t = match level {
        Level::L2 => partner(task, rule, &reader, local_dir, who, peers)?,
        Level::L4 => global(task, &reader, who)?,
        Level::L3 => erasure(task, rule, &reader, local_dir, who, peers)?,
        Level::L1 => Transform::default(),
    };
    t.micros = started.elapsed().as_micros() as u64;
    Ok(t)
}

/// `rank`'s staged level-1 file of the task's checkpoint: its directory
/// and record (which must be of the task's attempt).
fn own_file(task: &Task, reader: &Staging, rank: u32) -> Result<(Dir, Metadata), Failure> {
    let (ckpt, meta) = reader.record(task.id, rank, task.world())?;
    if meta.stamp != task.stamp {
        return Err(Failure::OtherAttempt { rank, id: task.id });
    }
    Ok((ckpt, meta))
}

/// The data file `meta` describes, in `ckpt`, for reading in pieces.
fn pieces(ckpt: &Dir, meta: &Metadata) -> Result<Pieces, Failure> {
    Ok(Pieces::open(
        ckpt,
        &crate::level::names::data_file(meta.rank),
        meta.file_len,
    )?)
}

/// Level 2: keep the node's own files (as second names) and send a copy
/// of each to the manager of every partner node `rule` names.
fn partner(
    task: &Task,
    rule: &Rule,
    reader: &Staging,
    local_dir: &Path,
    who: u32,
    peers: &mut Peers,
) -> Result<Transform, Failure> {
    let partners = Partners::from_rule(&task.topology, rule)?;
    let to = partners.of(task.node);
    if to.is_empty() {
        return Err(Failure::NoPartner(task.node));
    }
    let mut endpoints = Vec::with_capacity(to.len());
    for node in to {
        let endpoint = task.peers.get(&node).ok_or(Failure::NoManager(node))?;
        endpoints.push((node, endpoint));
    }
    let own = CopyStore::open(local_dir, &task.job_id, Level::L2, who)?;
    let mut t = Transform::default();
    for rank in task.topology.ranks_on(task.node) {
        let (ckpt, meta) = own_file(task, reader, rank)?;
        own.link_from(&ckpt, &meta)?;
        t.bytes_in += meta.file_len;
        for &(node, endpoint) in &endpoints {
            let what = Put::File {
                level: Level::L2,
                meta: Box::new(meta.clone()),
            };
            peers.put((node, endpoint), task, what, || pieces(&ckpt, &meta))?;
            t.bytes_out += meta.file_len;
        }
    }
    Ok(t)
}

/// Level 4: write every rank's file of the node to the global directory.
fn global(task: &Task, reader: &Staging, who: u32) -> Result<Transform, Failure> {
    let store = GlobalStore::open(&task.global_dir, &task.job_id, who)?;
    let mut t = Transform::default();
    for rank in task.topology.ranks_on(task.node) {
        let (ckpt, meta) = own_file(task, reader, rank)?;
        let file = pieces(&ckpt, &meta)?;
        let w = store.write_from(&meta, file, task.l4, task.fence)?;
        t.bytes_in += meta.file_len;
        t.bytes_out += w.written;
    }
    Ok(t)
}

/// Level 3: keep a copy of the node's own files, then send the node's terms
/// of every parity shard to its holder and the node's blob layout to every
/// member (itself included). The holders write the parity once they have
/// every member's terms.
fn erasure(
    task: &Task,
    rule: &Rule,
    reader: &Staging,
    local_dir: &Path,
    who: u32,
    peers: &mut Peers,
) -> Result<Transform, Failure> {
    let groups = scheme::parity_groups(&task.topology, rule)?;
    let group = groups.of(task.node).ok_or(Failure::NoGroup(task.node))?;
    if group.parity == 0 {
        return Err(Failure::TooFewNodes);
    }
    let s = Stripes {
        g: group.nodes.len(),
        p: group.parity as usize,
    };
    let me = group.position(task.node).unwrap_or(0);
    let largest = group
        .nodes
        .iter()
        .map(|n| task.blob_lens.get(n).copied().unwrap_or(0))
        .max()
        .unwrap_or(0);
    let info = GroupInfo {
        id: task.id,
        stamp: task.stamp,
        round: task.round,
        nodes: group.nodes.clone(),
        parity: group.parity,
        piece: s.piece(largest),
        code: rule.scheme.clone(),
    };
    let store = ErasureStore::open(local_dir, &task.job_id, who)?;
    let ranks = task.topology.ranks_on(task.node);
    for &rank in &ranks {
        let (ckpt, meta) = own_file(task, reader, rank)?;
        store.copies().link_from(&ckpt, &meta)?;
    }
    let (blob, entries) = store.blob(task.id, &ranks)?;
    let announced = task.blob_lens.get(&task.node).copied();
    if announced != Some(blob.len()) {
        return Err(Failure::BlobLength {
            node: task.node,
            held: blob.len(),
            announced,
        });
    }
    let piece = info.piece;
    let codec = scheme::erasure_code(&info.code, s.k(), s.p)?;
    let mut window = Vec::new();
    let endpoint = |node: u32| {
        task.peers
            .get(&node)
            .map(|e| (node, e))
            .ok_or(Failure::NoManager(node))
    };
    // One window of one piece in memory at a time, with its terms.
    for (q, t) in s.data_stripes(me).into_iter().enumerate() {
        let index = s.data_index(t, me).unwrap_or(0);
        let coefficients = codec.coefficients(index)?;
        let mut offset = 0;
        while let Some(len) = proto::window_len(piece, offset) {
            window.resize(len as usize, 0);
            blob.read_at(&mut window, q as u64 * piece + offset)?;
            // Each term is computed straight into the frame that sends it.
            for (j, &coefficient) in coefficients.iter().enumerate() {
                let holder = group.nodes[s.parity_holder(t, j)];
                let what = Put::Term(Box::new(Term {
                    group: info.clone(),
                    key: ParityKey {
                        stripe: t as u32,
                        index: j as u32,
                    },
                    from: me as u32,
                    offset,
                }));
                peers.put(endpoint(holder)?, task, what, || {
                    Ok(Scaled {
                        coefficient,
                        data: &window,
                    })
                })?;
            }
            offset += len;
        }
    }
    let layout = BlobLayout {
        group: info.clone(),
        pos: me as u32,
        entries,
    };
    for &node in &group.nodes {
        let req = Request::Layout {
            job_id: task.job_id.clone(),
            layout: Box::new(layout.clone()),
            fence: task.fence,
        };
        peers.request(endpoint(node)?, &req)?;
    }
    let sent = piece * s.k() as u64;
    Ok(Transform {
        micros: 0,
        bytes_in: sent,
        bytes_out: sent * s.p as u64,
    })
}

/// A member's term of a parity shard, computed as it is sent: its data
/// times the shard's coefficient.
struct Scaled<'a> {
    coefficient: u8,
    data: &'a [u8],
}

impl Source for Scaled<'_> {
    fn left(&self) -> u64 {
        self.data.len() as u64
    }

    fn read_next(&mut self, out: &mut [u8]) -> Result<(), SourceError> {
        if out.len() > self.data.len() {
            return Err(SourceError::Overrun {
                asked: out.len(),
                left: self.data.len() as u64,
            });
        }
        let (now, rest) = self.data.split_at(out.len());
        scale(self.coefficient, now, out);
        self.data = rest;
        Ok(())
    }
}
