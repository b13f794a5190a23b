//! Level 3 recovery: files kept whole on a surviving node are sent as
//! they are; the data of lost nodes is decoded, stripe by stripe, by one
//! rank of each affected group from the shards the surviving members send
//! it, then sent to the ranks it belongs to. Every rank then installs its
//! file into level 1 (see [`fetch`](super::fetch)).

use super::Checkpointer;
use crate::comm::agree_on_problems;
use crate::error::Result;
use crate::format::Metadata;
use crate::level::erasure::{Codec, ErasureStore, GroupManifest, ParityKey, Stripes};
use crate::level::Level;
use crate::recovery::erasure::{self, Decode, Kept, Offer};
use crate::recovery::Inventory;

/// Tag of the shards sent to a decoder.
const TAG_SHARD: u64 = (1 << 32) + 0x1002;

impl Checkpointer<'_> {
    /// Level 3. Collective.
    pub(super) fn fetch_erasure(&mut self, l1: &Inventory) -> Result<Option<u64>> {
        let (offer, store) = self.erasure_offer(l1, Check::Newest);
        let offers: Vec<Offer> = self.exchange(&offer)?;
        self.stats.recovery_rounds += 1;
        // One attempt, as every level of the baseline.
        match erasure::plan(&offers, &[]) {
            Some(plan) if self.rebuild_once(&plan, store.as_ref())? => Ok(Some(plan.id)),
            _ => Ok(None),
        }
    }

    /// What this rank can give towards a level-3 restore: its own level-1
    /// checkpoints and, on a node's lowest rank, the group manifests, files
    /// and parity shards the node keeps. With [`Check::None`] no data is
    /// read (a shard counts when its file has the manifest's length); with
    /// [`Check::Newest`] only the newest committed checkpoint is offered,
    /// and only the files and shards that read back whole (files with
    /// every CRC checked).
    pub(super) fn erasure_offer(
        &self,
        l1: &Inventory,
        check: Check,
    ) -> (Offer, Option<ErasureStore>) {
        let world = self.comm.size() as u32;
        let mut offer = Offer {
            own: l1.valid.iter().map(|h| (h.id, h.stamp)).collect(),
            node: self.comm.node(),
            kept: Vec::new(),
        };
        let store = if self.is_node_leader() {
            ErasureStore::open_existing(&self.cfg.storage.local_dir, &self.cfg.job.id)
                .ok()
                .flatten()
        } else {
            None
        };
        if let Some(s) = &store {
            let (held, _) = s.copies().scan(world);
            let committed = s.copies().committed();
            let mut ids: Vec<u64> = s
                .ids()
                .into_iter()
                .filter(|id| committed.contains(id))
                .collect();
            if check == Check::Newest {
                ids = ids.into_iter().max().into_iter().collect();
            }
            for id in ids {
                let Some(manifest) = s.manifest(id) else {
                    continue;
                };
                let parity = held_parity(s, &manifest, check);
                offer.kept.push(Kept {
                    files: held
                        .iter()
                        .filter(|h| h.id == id && h.stamp == manifest.stamp)
                        .filter(|h| {
                            check == Check::None || s.copies().read(id, h.rank, world).is_ok()
                        })
                        .map(|h| h.rank)
                        .collect(),
                    parity,
                    manifest,
                });
            }
        }
        (offer, store)
    }

    /// Carries out one level-3 plan; whether every rank got its file.
    /// Collective.
    pub(super) fn rebuild_once(
        &mut self,
        plan: &crate::recovery::erasure::ErasurePlan,
        store: Option<&ErasureStore>,
    ) -> Result<bool> {
        let started = std::time::Instant::now();
        let done = self.rebuild_once_timed(plan, store);
        self.stats.fetch_time += started.elapsed();
        done
    }

    fn rebuild_once_timed(
        &mut self,
        plan: &crate::recovery::erasure::ErasurePlan,
        store: Option<&ErasureStore>,
    ) -> Result<bool> {
        let world = self.comm.size() as u32;
        let me = self.comm.rank() as u32;
        let mut local: Option<String> = None;
        // Whole files first (eager sends), then the decodes, then receives.
        for &(rank, from) in &plan.direct {
            if from == me {
                let read = store
                    .ok_or_else(|| "this node keeps no level-3 files".to_string())
                    .and_then(|s| {
                        s.copies()
                            .read(plan.id, rank, world)
                            .map_err(|e| e.to_string())
                    });
                self.send_file(rank as usize, read)?;
            }
        }
        for d in &plan.decode {
            if let Some(e) = self.decode_group(d, store)? {
                local.get_or_insert(e);
            }
        }
        let source = plan
            .direct
            .iter()
            .find(|(r, _)| *r == me)
            .map(|(_, from)| *from)
            .or_else(|| {
                plan.decode
                    .iter()
                    .find(|d| d.targets.contains(&me))
                    .map(|d| d.decoder)
            });
        if let Some(from) = source {
            if let Err(e) = self.receive_and_install(from as usize)? {
                local.get_or_insert(e);
            }
        }
        let trouble = agree_on_problems(self.comm, local.as_deref())?;
        for (rank, reason) in &trouble {
            tracing::warn!(checkpoint = plan.id, rank, reason = %reason, "could not rebuild from level 3");
        }
        Ok(trouble.is_empty())
    }

    /// This rank's part in decoding group `d`: sending its node's shards
    /// to the decoder, or (as the decoder) rebuilding the lost blobs and
    /// sending each target rank its file. Returns a local problem.
    fn decode_group(&mut self, d: &Decode, store: Option<&ErasureStore>) -> Result<Option<String>> {
        let me = self.comm.rank() as u32;
        let m = &d.manifest;
        let s = Stripes {
            g: m.nodes.len(),
            p: m.parity as usize,
        };
        let stripes: Vec<usize> = (0..s.g)
            .filter(|t| d.missing.iter().any(|pos| s.data_index(*t, *pos).is_some()))
            .collect();
        let mine = d
            .present
            .iter()
            .find(|(_, r)| *r == me)
            .map(|(pos, _)| *pos);
        if let Some(pos) = mine.filter(|_| me != d.decoder) {
            let shards = store
                .ok_or("this node keeps no level-3 data".to_string())
                .and_then(|st| shards_of(st, m, pos, &stripes));
            match shards {
                Ok(list) => {
                    for shard in list {
                        self.comm
                            .send_tagged(d.decoder as usize, TAG_SHARD, &shard)?;
                    }
                }
                Err(e) => {
                    // Send empty shards so the decoder does not wait forever.
                    for _ in &stripes {
                        self.comm.send_tagged(d.decoder as usize, TAG_SHARD, &[])?;
                    }
                    return Ok(Some(e));
                }
            }
            return Ok(None);
        }
        if me != d.decoder {
            return Ok(None);
        }
        // The decoder: every present position's shards, per stripe.
        let mut got: Vec<(usize, Vec<Vec<u8>>)> = Vec::new();
        let mut problem = None;
        for &(pos, rank) in &d.present {
            let list = if rank == me {
                store
                    .ok_or("this node keeps no level-3 data".to_string())
                    .and_then(|st| shards_of(st, m, pos, &stripes))
                    .unwrap_or_else(|e| {
                        problem.get_or_insert(e);
                        Vec::new()
                    })
            } else {
                let mut list = Vec::new();
                for _ in &stripes {
                    list.push(self.comm.recv_tagged(rank as usize, TAG_SHARD)?.to_vec());
                }
                list
            };
            got.push((pos, list));
        }
        let files = match problem {
            Some(e) => Err(e),
            None => decode(m, &s, &stripes, got, &d.missing),
        };
        for &target in &d.targets {
            let file = files.as_ref().map_err(Clone::clone).and_then(|f| {
                f.iter()
                    .find(|(meta, _)| meta.rank == target)
                    .cloned()
                    .ok_or_else(|| format!("rank {target}'s file is not in the decoded data"))
            });
            self.send_file(target as usize, file)?;
        }
        Ok(files.err())
    }
}

/// The parity keys of `m` kept here.
/// How much of a node's level-3 files an offer checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Check {
    /// Nothing is read: files and shards of the right length count.
    None,
    /// The baseline's validation: the newest committed checkpoint only,
    /// every file and shard read back.
    Newest,
}

fn held_parity(s: &ErasureStore, m: &GroupManifest, check: Check) -> Vec<ParityKey> {
    let st = Stripes {
        g: m.nodes.len(),
        p: m.parity as usize,
    };
    let mut keys = Vec::new();
    for t in 0..st.g {
        for j in 0..st.p {
            let key = ParityKey {
                stripe: t as u32,
                index: j as u32,
            };
            let held = match check {
                Check::None => s.has_parity(m.checkpoint_id, key, m.piece),
                Check::Newest => s.read_parity(m.checkpoint_id, key, m.piece).is_ok(),
            };
            if held {
                keys.push(key);
            }
        }
    }
    keys
}

/// Position `pos`'s shard of each of `stripes`: a piece of its blob, or a
/// parity shard it holds.
fn shards_of(
    st: &ErasureStore,
    m: &GroupManifest,
    pos: usize,
    stripes: &[usize],
) -> Result<Vec<Vec<u8>>, String> {
    let s = Stripes {
        g: m.nodes.len(),
        p: m.parity as usize,
    };
    let piece = m.piece as usize;
    let ranks: Vec<u32> = m
        .blobs
        .get(pos)
        .map(|b| b.iter().map(|e| e.rank).collect())
        .unwrap_or_default();
    let (mut blob, _) = st
        .blob(m.checkpoint_id, &ranks)
        .map_err(|e| e.to_string())?;
    blob.resize(piece * s.k(), 0);
    let order = s.data_stripes(pos);
    stripes
        .iter()
        .map(|&t| match s.parity_index(t, pos) {
            Some(j) => st
                .read_parity(
                    m.checkpoint_id,
                    ParityKey {
                        stripe: t as u32,
                        index: j as u32,
                    },
                    m.piece,
                )
                .map_err(|e| e.to_string()),
            None => {
                let q = order.iter().position(|x| *x == t).unwrap_or(0);
                Ok(blob[q * piece..(q + 1) * piece].to_vec())
            }
        })
        .collect()
}

/// Rebuilds the blobs of `missing` positions and splits them into files.
/// The shards received are moved, not copied, and the stripes are decoded
/// on every core (the other ranks wait for this decoder's files).
fn decode(
    m: &GroupManifest,
    s: &Stripes,
    stripes: &[usize],
    got: Vec<(usize, Vec<Vec<u8>>)>,
    missing: &[usize],
) -> Result<Vec<(Metadata, Vec<u8>)>, String> {
    let piece = m.piece as usize;
    let codec = Codec::new(s.k(), s.p).map_err(|e| e.to_string())?;
    let mut per_stripe: Vec<Vec<Option<Vec<u8>>>> = vec![vec![None; s.g]; stripes.len()];
    for (pos, list) in got {
        let mut list = list.into_iter();
        for (i, &t) in stripes.iter().enumerate() {
            let Some(shard) = list.next().filter(|b| b.len() == piece) else {
                return Err(format!("position {pos} sent no usable shard of stripe {t}"));
            };
            let slot = match s.data_index(t, pos) {
                Some(x) => x,
                None => s.k() + s.parity_index(t, pos).unwrap_or(0),
            };
            per_stripe[i][slot] = Some(shard);
        }
    }
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, stripes.len().max(1));
    let share = stripes.len().div_ceil(threads).max(1);
    let codec = &codec;
    let failed = std::thread::scope(|scope| {
        let workers: Vec<_> = per_stripe
            .chunks_mut(share)
            .map(|part| {
                scope.spawn(move || {
                    part.iter_mut()
                        .try_for_each(|shards| codec.reconstruct(shards))
                        .map_err(|e| e.to_string())
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| {
                w.join()
                    .unwrap_or_else(|_| Err("a decoding thread panicked".into()))
            })
            .find_map(Result::err)
    });
    if let Some(e) = failed {
        return Err(e);
    }
    let mut blobs: Vec<Vec<u8>> = missing.iter().map(|_| vec![0u8; piece * s.k()]).collect();
    for (shards, &t) in per_stripe.iter_mut().zip(stripes) {
        let data = s.data_nodes(t);
        for (b, &pos) in missing.iter().enumerate() {
            if let Some(x) = data.iter().position(|p| *p == pos) {
                let q = s
                    .data_stripes(pos)
                    .iter()
                    .position(|y| *y == t)
                    .unwrap_or(0);
                let shard = shards[x].take().ok_or("stripe not decoded")?;
                blobs[b][q * piece..(q + 1) * piece].copy_from_slice(&shard);
            }
        }
    }
    let mut files = Vec::new();
    for (b, &pos) in missing.iter().enumerate() {
        let mut at = 0usize;
        for e in m.blobs.get(pos).into_iter().flatten() {
            let (rl, dl) = (e.record_len as usize, e.data_len as usize);
            let record = blobs[b]
                .get(at..at + rl)
                .ok_or("blob shorter than its layout")?;
            let mut meta =
                Metadata::from_json(record, "decoded level-3 record").map_err(|e| e.to_string())?;
            if meta.rank != e.rank || meta.file_len != e.data_len {
                return Err(format!(
                    "decoded record of rank {} does not match the layout",
                    e.rank
                ));
            }
            meta.level = Level::L1.number();
            let data = blobs[b]
                .get(at + rl..at + rl + dl)
                .ok_or("blob shorter than its layout")?;
            files.push((meta, data.to_vec()));
            at += rl + dl;
        }
    }
    Ok(files)
}
