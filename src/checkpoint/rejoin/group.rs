//! A replacement on a spare node rebuilding its own checkpoint from level
//! 3. Its node died with its level 1; when no level-2 copy is to be had
//! (level 2 off, or its copy not there), it asks the managers of the other
//! members of its node's level-3 group for the group's manifest, finds
//! where its file lies in the lost node's blob, and decodes just those
//! bytes: for each window of them, k of the members' shards of that
//! stripe (their data pieces or parity), one Reed-Solomon reconstruction,
//! the lost piece's window kept. The file is installed into its level 1
//! as it is decoded, every chunk checked. Nobody else stops: the members'
//! managers read their shards, the ranks go on waiting. At most k windows
//! and the decoded one are held ([`WINDOW`] bytes each).

use super::super::decode::WINDOW;
use super::super::Checkpointer;
use crate::comm::StandIn;
use crate::format::Metadata;
use crate::level::erasure::{ErasureCode, GroupManifest, Stripes};
use crate::level::stream::PieceSource;
use crate::level::Level;
use crate::manager::copy_back::CopyError;
use crate::manager::proto::ShardWindow;
use crate::manager::Client;
use crate::scheme;
use std::time::Instant;

impl Checkpointer<'_> {
    /// Brings checkpoint `id` into level 1 by decoding this rank's file
    /// from the level-3 shards the other members of the failed node's
    /// group keep, through their managers; or why not.
    pub(in crate::checkpoint) fn fetch_from_group(
        &mut self,
        id: u64,
        stand_in: &StandIn,
    ) -> Result<(), String> {
        if self.cfg.l3.interval.is_zero() {
            return Err(format!(
                "no level-3 parity of it is kept: {}",
                self.cfg.describe("l3.interval")
            ));
        }
        let started = Instant::now();
        let mut members = self.group_members(id, stand_in)?;
        let m = members.manifest.clone();
        let rank = self.comm.rank() as u32;
        let (record, data) = file_range(&m, members.lost, rank)?;
        let mut bytes = Vec::new();
        {
            let mut decoding = members.decode(record.clone());
            while let Some(piece) = decoding.next_piece().map_err(|e| e.0)? {
                bytes.extend_from_slice(piece);
            }
        }
        let mut meta = Metadata::from_json(&bytes, "a level-3 record decoded from the group")
            .map_err(|e| e.to_string())?;
        if (meta.checkpoint_id, meta.rank) != (id, rank) || meta.file_len != data.end - data.start {
            return Err(format!(
                "the group's record names checkpoint {} of rank {} ({} bytes)",
                meta.checkpoint_id, meta.rank, meta.file_len
            ));
        }
        meta.level = Level::L1.number();
        let mut decoding = members.decode(data);
        self.store
            .install_from(&meta, &mut decoding)
            .map_err(|e| format!("decoding it from its level-3 group failed: {}", e.0))?;
        self.stats.fetch_time += started.elapsed();
        self.stats.recovered_from = Some(Level::L3);
        tracing::info!(
            checkpoint = id,
            group = ?m.nodes,
            bytes = meta.file_len,
            "decoded the checkpoint from the failed node's group (level 3)"
        );
        Ok(())
    }

    /// The failed node's group members that answer, with the group's
    /// manifest of checkpoint `id`.
    fn group_members(&self, id: u64, stand_in: &StandIn) -> Result<Members, String> {
        let (topology, secret) = self.stand_in_setting(stand_in)?;
        let rule = scheme::configured(&self.cfg, Level::L3).ok_or("level 3 has no scheme")?;
        let groups = scheme::parity_groups(&topology, &rule).map_err(|e| e.to_string())?;
        let group = groups
            .of(stand_in.node)
            .ok_or("its node is in no level-3 group")?;
        let mut manifest: Option<GroupManifest> = None;
        let mut clients = Vec::new();
        let mut why = Vec::new();
        for &node in group.nodes.iter().filter(|n| **n != stand_in.node) {
            let Some(endpoint) = stand_in.managers.get(&node) else {
                why.push(format!("no manager is known for node {node}"));
                continue;
            };
            let answer = Client::connect(endpoint, &secret)
                .map_err(|e| CopyError(e.to_string()))
                .and_then(|mut c| {
                    let (m, _) = c.get_shard(&self.cfg.job.id, id, None)?;
                    Ok((c, m))
                });
            match answer {
                Ok((_, m)) if m.check().is_err() => why.push(format!(
                    "node {node} keeps a damaged manifest ({})",
                    m.check().err().unwrap_or_default()
                )),
                Ok((c, m)) if manifest.as_ref().is_none_or(|k| *k == m) => {
                    manifest = Some(m);
                    clients.push((node, c));
                }
                Ok(_) => why.push(format!("node {node} keeps another group's manifest")),
                Err(e) => why.push(format!("node {node}: {}", e.0)),
            }
        }
        let m = manifest
            .ok_or_else(|| format!("no member of its group answered ({})", why.join("; ")))?;
        let lost = m
            .nodes
            .iter()
            .position(|n| *n == stand_in.node)
            .ok_or_else(|| format!("the group's manifest does not name it: {:?}", m.nodes))?;
        let s = Stripes {
            g: m.nodes.len(),
            p: m.parity as usize,
        };
        if clients.len() < s.k() {
            return Err(format!(
                "{} of the {} other members of its group answered, {} needed ({})",
                clients.len(),
                s.g - 1,
                s.k(),
                why.join("; ")
            ));
        }
        let codec = scheme::erasure_code(&m.code, s.k(), s.p).map_err(|e| e.to_string())?;
        let clients = clients
            .into_iter()
            .filter_map(|(node, c)| Some((m.nodes.iter().position(|n| *n == node)?, c)))
            .collect();
        Ok(Members {
            job_id: self.cfg.job.id.clone(),
            manifest: m,
            stripes: s,
            codec,
            lost,
            clients,
        })
    }
}

/// Where `rank`'s record and data lie in position `pos`'s blob of `m`.
fn file_range(
    m: &GroupManifest,
    pos: usize,
    rank: u32,
) -> Result<(std::ops::Range<u64>, std::ops::Range<u64>), String> {
    let blob = m
        .blobs
        .get(pos)
        .ok_or("the group's manifest has no blob for it")?;
    let mut at = 0u64;
    for e in blob {
        let data = at.saturating_add(e.record_len);
        let end = data.saturating_add(e.data_len);
        if e.rank == rank {
            return Ok((at..data, data..end));
        }
        at = end;
    }
    Err(format!("the lost node's blob holds no file of rank {rank}"))
}

/// The members of a group that answered, by group position.
struct Members {
    job_id: String,
    manifest: GroupManifest,
    stripes: Stripes,
    codec: Box<dyn ErasureCode>,
    /// The lost node's position.
    lost: usize,
    clients: Vec<(usize, Client)>,
}

impl Members {
    /// The bytes `range` of the lost node's blob, decoded a window at a time.
    fn decode(&mut self, range: std::ops::Range<u64>) -> Decoding<'_> {
        Decoding {
            members: self,
            next: range.start,
            end: range.end,
            window: Vec::new(),
        }
    }
}

/// A range of a lost blob as it is decoded.
struct Decoding<'a> {
    members: &'a mut Members,
    next: u64,
    end: u64,
    window: Vec<u8>,
}

impl PieceSource for Decoding<'_> {
    type Error = CopyError;

    fn next_piece(&mut self) -> Result<Option<&[u8]>, CopyError> {
        if self.next >= self.end {
            return Ok(None);
        }
        let Members {
            job_id,
            manifest: m,
            stripes: s,
            codec,
            lost,
            clients,
        } = &mut *self.members;
        // The blob's q-th piece is its shard in its q-th data stripe.
        let q = (self.next / m.piece) as usize;
        let offset = self.next % m.piece;
        let t = *s
            .data_stripes(*lost)
            .get(q)
            .ok_or_else(|| CopyError(format!("byte {} is past the blob", self.next)))?;
        let len = WINDOW.min(m.piece - offset).min(self.end - self.next);
        let mut shards: Vec<Option<Vec<u8>>> = vec![None; s.g];
        let mut got = 0;
        let mut why = Vec::new();
        for (pos, client) in clients.iter_mut() {
            if got == s.k() {
                break;
            }
            let slot = match (s.data_index(t, *pos), s.parity_index(t, *pos)) {
                (Some(x), _) => x,
                (None, Some(j)) => s.k() + j,
                (None, None) => continue,
            };
            let window = ShardWindow {
                nodes: m.nodes.clone(),
                pos: *pos as u32,
                stripe: t as u32,
                offset,
                len: len as u32,
            };
            match client.get_shard(job_id, m.checkpoint_id, Some(window)) {
                Ok((_, bytes)) => {
                    shards[slot] = Some(bytes.to_vec());
                    got += 1;
                }
                Err(e) => why.push(format!("position {pos}: {}", e.0)),
            }
        }
        if got < s.k() {
            return Err(CopyError(format!(
                "stripe {t}: {got} of {} shards ({})",
                s.k(),
                why.join("; ")
            )));
        }
        codec
            .reconstruct(&mut shards)
            .map_err(|e| CopyError(format!("stripe {t}: {e}")))?;
        let x = s
            .data_index(t, *lost)
            .ok_or_else(|| CopyError(format!("the lost node holds no data in stripe {t}")))?;
        self.window = shards[x].take().unwrap_or_default();
        if self.window.len() as u64 != len {
            return Err(CopyError(format!(
                "stripe {t} decoded to {} bytes",
                self.window.len()
            )));
        }
        self.next += len;
        Ok(Some(&self.window))
    }
}
