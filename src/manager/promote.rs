//! The transformations a manager runs for a promotion, one per level. They
//! read the node's level-1 files and write (or send) the level's copies;
//! each returns only once what it wrote is durable.

use super::proto::{Client, Reply};
use super::task::{Task, Transform};
use crate::auth::Secret;
use crate::comm::net::Endpoint;
use crate::level::l1::L1Reader;
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

    /// Sends a copy to the manager at `to`, reconnecting once if a kept
    /// connection broke.
    fn copy(
        &mut self,
        to: &Endpoint,
        job_id: &str,
        level: Level,
        meta: &crate::format::Metadata,
        bytes: &[u8],
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
            match client.copy(job_id, level, meta, bytes) {
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
    let reader = L1Reader::open(local_dir, &task.job_id, who).map_err(|e| e.to_string())?;
    let mut t = match level {
        Level::L2 => partner(task, &reader, local_dir, who, peers)?,
        Level::L4 => global(task, &reader, who)?,
        Level::L3 => return Err("level 3 is not available in this build".into()),
        Level::L1 => Transform::default(),
    };
    t.micros = started.elapsed().as_micros() as u64;
    Ok(t)
}

/// `rank`'s level-1 file of the task's checkpoint: its directory, record
/// and bytes (which must be of the task's attempt).
fn own_file(
    task: &Task,
    reader: &L1Reader,
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

/// Level 2: keep the node's own files (linked) and send a copy of each to
/// the partner node's manager.
fn partner(
    task: &Task,
    reader: &L1Reader,
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
        let (ckpt, meta, bytes) = own_file(task, reader, rank)?;
        own.link_own(&ckpt, task.id, &meta)
            .map_err(|e| e.to_string())?;
        peers.copy(endpoint, &task.job_id, Level::L2, &meta, &bytes)?;
        t.bytes_in += bytes.len() as u64;
        t.bytes_out += bytes.len() as u64;
    }
    Ok(t)
}

/// Level 4: write every rank's file of the node to the global directory.
fn global(task: &Task, reader: &L1Reader, who: u32) -> Result<Transform, String> {
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
