//! The transformations a manager runs for a promotion, one per level. They
//! read the node's level-1 files and write (or send) the level's copies;
//! each returns only once what it wrote is durable.

use super::proto::{Client, GroupInfo, Layout, Put, Reply, Request, Term};
use super::task::{Task, Transform};
use crate::auth::Secret;
use crate::comm::net::Endpoint;
use crate::level::erasure::{Codec, ErasureStore, ParityKey, Stripes};
use crate::level::staging::Staging;
use crate::level::{CopyStore, GlobalStore, Level};
use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

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

    /// Sends bytes to the manager at `to` (see [`Client::put`]),
    /// reconnecting once if a kept connection broke.
    fn put(&mut self, to: &Endpoint, job_id: &str, what: Put, bytes: &[u8]) -> Result<(), String> {
        self.call(to, |c| c.put(job_id, what.clone(), bytes))
    }

    /// Sends a request to the manager at `to`.
    fn request(&mut self, to: &Endpoint, req: &Request) -> Result<(), String> {
        self.call(to, |c| c.call(req))
    }

    fn call(
        &mut self,
        to: &Endpoint,
        mut f: impl FnMut(&mut Client) -> std::io::Result<Reply>,
    ) -> Result<(), String> {
        let key = to.to_string();
        for attempt in 0..2 {
            if !self.clients.contains_key(&key) {
                let c = Client::connect(to, &self.secret).map_err(|e| e.to_string())?;
                self.clients.insert(key.clone(), c);
            }
            let Some(client) = self.clients.get_mut(&key) else {
                continue;
            };
            match f(client) {
                Ok(Reply::Ok) => return Ok(()),
                Ok(Reply::Error(e)) => return Err(format!("manager at {to}: {e}")),
                Ok(other) => return Err(format!("manager at {to} answered {other:?}")),
                Err(e) => {
                    self.clients.remove(&key);
                    if attempt == 1 {
                        return Err(e.to_string());
                    }
                }
            }
        }
        Err(format!("manager at {to} unreachable"))
    }
}

/// Runs one level of `task` on the node whose local directory is `local_dir`.
pub(crate) fn run(
    task: &Task,
    level: Level,
    local_dir: &Path,
    who: u32,
    peers: &mut Peers,
) -> Result<Transform, String> {
    let started = Instant::now();
    let reader = Staging::open(local_dir, &task.job_id, who).map_err(|e| e.to_string())?;
    let mut t = match level {
        Level::L2 => partner(task, &reader, local_dir, who, peers)?,
        Level::L4 => global(task, &reader, who)?,
        Level::L3 => erasure(task, &reader, local_dir, who, peers)?,
        Level::L1 => Transform::default(),
    };
    t.micros = started.elapsed().as_micros() as u64;
    Ok(t)
}

/// `rank`'s level-1 file of the task's checkpoint: its directory, record
/// and bytes (which must be of the task's attempt).
fn own_file(
    task: &Task,
    reader: &Staging,
    rank: u32,
) -> Result<(crate::safefs::Dir, crate::format::Metadata, Vec<u8>), String> {
    let (ckpt, meta) = reader
        .record(task.id, rank, task.world())
        .map_err(|e| e.to_string())?;
    if meta.stamp != task.stamp {
        return Err(format!(
            "rank {rank}'s file of checkpoint {} belongs to another attempt",
            task.id
        ));
    }
    let bytes = reader.bytes(&ckpt, &meta).map_err(|e| e.to_string())?;
    Ok((ckpt, meta, bytes))
}

/// Level 2: keep a copy of the node's own files and send one of each to
/// the partner node's manager.
fn partner(
    task: &Task,
    reader: &Staging,
    local_dir: &Path,
    who: u32,
    peers: &mut Peers,
) -> Result<Transform, String> {
    let to = task.topology.partner(task.node).ok_or_else(|| {
        format!(
            "node {} has no partner: the job runs on a single node",
            task.node
        )
    })?;
    let endpoint = task.peers.get(&to).ok_or_else(|| {
        format!(
            "no manager is known for node {to}, the partner of node {}",
            task.node
        )
    })?;
    let own =
        CopyStore::open(local_dir, &task.job_id, Level::L2, who).map_err(|e| e.to_string())?;
    let mut t = Transform::default();
    for rank in task.topology.ranks_on(task.node) {
        let (_, meta, bytes) = own_file(task, reader, rank)?;
        own.put(&meta, &bytes).map_err(|e| e.to_string())?;
        let what = Put::File {
            level: Level::L2,
            meta: Box::new(meta),
        };
        peers.put(endpoint, &task.job_id, what, &bytes)?;
        t.bytes_in += bytes.len() as u64;
        t.bytes_out += bytes.len() as u64;
    }
    Ok(t)
}

/// Level 4: write every rank's file of the node to the global directory.
fn global(task: &Task, reader: &Staging, who: u32) -> Result<Transform, String> {
    let store =
        GlobalStore::open(&task.global_dir, &task.job_id, who).map_err(|e| e.to_string())?;
    let chunk = usize::try_from(task.l4_chunk).unwrap_or(usize::MAX);
    let mut t = Transform::default();
    for rank in task.topology.ranks_on(task.node) {
        let (_, meta, bytes) = own_file(task, reader, rank)?;
        let w = store
            .write(&meta, &bytes, chunk, task.differential)
            .map_err(|e| e.to_string())?;
        t.bytes_in += bytes.len() as u64;
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
    reader: &Staging,
    local_dir: &Path,
    who: u32,
    peers: &mut Peers,
) -> Result<Transform, String> {
    let group = task
        .topology
        .group_of(task.node)
        .ok_or_else(|| format!("node {} is in no group", task.node))?;
    if group.parity == 0 {
        return Err("level 3 needs at least two nodes".into());
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
        nodes: group.nodes.clone(),
        parity: group.parity,
        piece: s.piece(largest),
    };
    let store = ErasureStore::open(local_dir, &task.job_id, who).map_err(|e| e.to_string())?;
    let ranks = task.topology.ranks_on(task.node);
    for &rank in &ranks {
        let (_, meta, bytes) = own_file(task, reader, rank)?;
        store
            .copies()
            .put(&meta, &bytes)
            .map_err(|e| e.to_string())?;
    }
    let (mut blob, entries) = store.blob(task.id, &ranks).map_err(|e| e.to_string())?;
    let expected = task.blob_lens.get(&task.node).copied();
    if expected != Some(blob.len() as u64) {
        return Err(format!(
            "node {}'s blob holds {} bytes, the ranks announced {expected:?}",
            task.node,
            blob.len()
        ));
    }
    let piece = info.piece as usize;
    blob.resize(piece * s.k(), 0);
    let codec = Codec::new(s.k(), s.p).map_err(|e| e.to_string())?;
    let mut terms = vec![Vec::new(); s.p];
    let endpoint = |node: u32| {
        task.peers
            .get(&node)
            .ok_or_else(|| format!("no manager is known for node {node}"))
    };
    for (q, t) in s.data_stripes(me).into_iter().enumerate() {
        let index = s.data_index(t, me).unwrap_or(0);
        codec
            .contribution(index, &blob[q * piece..(q + 1) * piece], &mut terms)
            .map_err(|e| e.to_string())?;
        for (j, term) in terms.iter().enumerate() {
            let holder = group.nodes[s.parity_holder(t, j)];
            let what = Put::Term(Box::new(Term {
                group: info.clone(),
                key: ParityKey {
                    stripe: t as u32,
                    index: j as u32,
                },
                from: me as u32,
            }));
            peers.put(endpoint(holder)?, &task.job_id, what, term)?;
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
        };
        peers.request(endpoint(node)?, &req)?;
    }
    let sent = (piece * s.k()) as u64;
    Ok(Transform {
        micros: 0,
        bytes_in: sent,
        bytes_out: sent * s.p as u64,
    })
}
