//! The transformations a manager runs for a promotion, one per level. They
//! read the node's staged level-1 files and write (or send) the level's
//! copies, one piece at a time (a node's own files are kept at levels 2
//! and 3 as second names, never copied); each returns only once what it
//! wrote is durable.

use super::proto::{self, Client, GroupInfo, Layout, Put, PutError, Reply, Request, Source, Term};
use super::task::{Task, Transform};
use crate::auth::Secret;
use crate::comm::net::Endpoint;
use crate::format::Metadata;
use crate::level::erasure::{scale, ErasureStore, ParityKey, Stripes};
use crate::level::staging::Staging;
use crate::level::{CopyStore, GlobalStore, Level, Pieces};
use crate::safefs::Dir;
use crate::scheme;
use crate::scheme::partner::Partners;
use crate::topology::Rule;
use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

/// Why a promotion failed.
#[derive(Debug)]
pub(crate) enum Failure {
    /// Another node's manager could not be reached (its node is most
    /// likely lost; the runtime says so, and the ranks report the level
    /// once for the job).
    Unreachable {
        /// The node.
        node: u32,
        /// What the connection said.
        error: String,
    },
    /// Anything else: this node's storage, or a peer's answer.
    Other(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Unreachable { node, error } => {
                write!(f, "node {node}'s manager does not answer ({error})")
            }
            Failure::Other(e) => f.write_str(e),
        }
    }
}

impl From<String> for Failure {
    fn from(e: String) -> Self {
        Failure::Other(e)
    }
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
        mut open: impl FnMut() -> Result<S, String>,
    ) -> Result<(), Failure> {
        self.call(node, to, |c| {
            let mut source = open().map_err(PutError::Source)?;
            c.put_from(&task.job_id, task.fence, what.clone(), &mut source)
        })
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
                Ok(Reply::Error(e)) => {
                    return Err(Failure::Other(format!(
                        "node {node}'s manager at {to}: {e}"
                    )))
                }
                Ok(other) => {
                    return Err(Failure::Other(format!(
                        "node {node}'s manager at {to} answered {other:?}"
                    )))
                }
                Err(PutError::Source(e)) => {
                    // The connection is left mid-put: never reused.
                    self.clients.remove(&key);
                    return Err(Failure::Other(e));
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
    let reader = Staging::open(local_dir, &task.job_id, who).map_err(|e| e.to_string())?;
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
fn own_file(task: &Task, reader: &Staging, rank: u32) -> Result<(Dir, Metadata), String> {
    let (ckpt, meta) = reader
        .record(task.id, rank, task.world())
        .map_err(|e| e.to_string())?;
    if meta.stamp != task.stamp {
        return Err(format!(
            "rank {rank}'s file of checkpoint {} belongs to another attempt",
            task.id
        ));
    }
    Ok((ckpt, meta))
}

/// The data file `meta` describes, in `ckpt`, for reading in pieces.
fn pieces(ckpt: &Dir, meta: &Metadata) -> Result<Pieces, String> {
    Pieces::open(
        ckpt,
        &crate::level::names::data_file(meta.rank),
        meta.file_len,
    )
    .map_err(|e| e.to_string())
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
    let partners = Partners::from_rule(&task.topology, rule).map_err(|e| e.to_string())?;
    let to = partners.of(task.node);
    if to.is_empty() {
        return Err(Failure::Other(format!(
            "node {} has no partner: the job runs on a single node",
            task.node
        )));
    }
    let mut endpoints = Vec::with_capacity(to.len());
    for node in to {
        let endpoint = task.peers.get(&node).ok_or_else(|| {
            format!(
                "no manager is known for node {node}, a partner of node {}",
                task.node
            )
        })?;
        endpoints.push((node, endpoint));
    }
    let own =
        CopyStore::open(local_dir, &task.job_id, Level::L2, who).map_err(|e| e.to_string())?;
    let mut t = Transform::default();
    for rank in task.topology.ranks_on(task.node) {
        let (ckpt, meta) = own_file(task, reader, rank)?;
        own.link_from(&ckpt, &meta).map_err(|e| e.to_string())?;
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
fn global(task: &Task, reader: &Staging, who: u32) -> Result<Transform, String> {
    let store =
        GlobalStore::open(&task.global_dir, &task.job_id, who).map_err(|e| e.to_string())?;
    let mut t = Transform::default();
    for rank in task.topology.ranks_on(task.node) {
        let (ckpt, meta) = own_file(task, reader, rank)?;
        let file = pieces(&ckpt, &meta)?;
        let w = store
            .write_from(&meta, file, task.l4, task.fence)
            .map_err(|e| e.to_string())?;
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
    let groups = scheme::parity_groups(&task.topology, rule).map_err(|e| e.to_string())?;
    let group = groups
        .of(task.node)
        .ok_or_else(|| format!("node {} is in no group", task.node))?;
    if group.parity == 0 {
        return Err(Failure::Other("level 3 needs at least two nodes".into()));
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
    let store = ErasureStore::open(local_dir, &task.job_id, who).map_err(|e| e.to_string())?;
    let ranks = task.topology.ranks_on(task.node);
    for &rank in &ranks {
        let (ckpt, meta) = own_file(task, reader, rank)?;
        store
            .copies()
            .link_from(&ckpt, &meta)
            .map_err(|e| e.to_string())?;
    }
    let (blob, entries) = store.blob(task.id, &ranks).map_err(|e| e.to_string())?;
    let expected = task.blob_lens.get(&task.node).copied();
    if expected != Some(blob.len()) {
        return Err(Failure::Other(format!(
            "node {}'s blob holds {} bytes, the ranks announced {expected:?}",
            task.node,
            blob.len()
        )));
    }
    let piece = info.piece;
    let codec = scheme::erasure_code(&info.code, s.k(), s.p).map_err(|e| e.to_string())?;
    let mut window = Vec::new();
    let endpoint = |node: u32| {
        task.peers
            .get(&node)
            .map(|e| (node, e))
            .ok_or_else(|| format!("no manager is known for node {node}"))
    };
    // One window of one piece in memory at a time, with its terms.
    for (q, t) in s.data_stripes(me).into_iter().enumerate() {
        let index = s.data_index(t, me).unwrap_or(0);
        let coefficients = codec.coefficients(index).map_err(|e| e.to_string())?;
        let mut offset = 0;
        while let Some(len) = proto::window_len(piece, offset) {
            window.resize(len as usize, 0);
            blob.read_at(&mut window, q as u64 * piece + offset)
                .map_err(|e| e.to_string())?;
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
    let layout = Layout {
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

    fn read_next(&mut self, out: &mut [u8]) -> Result<(), String> {
        if out.len() > self.data.len() {
            return Err(format!(
                "{} bytes asked of {} left",
                out.len(),
                self.data.len()
            ));
        }
        let (now, rest) = self.data.split_at(out.len());
        scale(self.coefficient, now, out);
        self.data = rest;
        Ok(())
    }
}
