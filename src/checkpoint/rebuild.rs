//! Level 3 recovery: files kept whole on a surviving node are sent as
//! they are; the data of lost nodes is decoded by one rank of each
//! affected group from the shards the surviving members send it, window
//! by window ([`super::decode`]), and sent on to the ranks it
//! belongs to as it comes. Every rank then installs its file into level 1
//! (see [`fetch`](super::fetch)).
//!
//! Members send a window only when the decoder has room for it: the first
//! [`AHEAD`] at once, then one per credit the decoder returns as it
//! consumes one. Nothing in the exchange grows with the checkpoint.

use super::decode::{self, Cut, Splitter};
use super::Checkpointer;
use crate::comm::agree_on_problems;
use crate::error::Result;
use crate::level::erasure::ShardReader;
use crate::level::erasure::{ErasureStore, GroupManifest, ParityKey, Stripes};
use crate::recovery::erasure::{self, Decode, Kept, Offer};
use crate::recovery::Inventory;
use crate::scheme;

/// Tag of the shard windows sent to a decoder.
const TAG_SHARD: u64 = (1 << 32) + 0x1002;
/// Tag of the decoder's credits.
const TAG_CREDIT: u64 = (1 << 32) + 0x1003;
/// Windows a member sends before it waits for credit.
const AHEAD: usize = 4;

impl Checkpointer<'_> {
    /// Level 3. Collective.
    pub(super) fn fetch_erasure(&mut self, l1: &Inventory) -> Result<Option<u64>> {
        let (offer, store) = self.erasure_offer(l1, Check::Newest);
        let mut offers: Vec<Offer> = self.exchange(&offer)?;
        self.stats.recovery_rounds += 1;
        erasure::retain_committed(&mut offers);
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
    /// [`Check::Newest`] only the newest checkpoint committed here (and any
    /// newer one) is offered, and only the files and shards that read back whole (files with
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
            stood_in_for: self.stood_in_for(),
            kept: Vec::new(),
            committed: Vec::new(),
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
            // Everything held: what counts is decided after the exchange,
            // by every node's markers.
            offer.committed = s
                .copies()
                .commits()
                .into_iter()
                .map(|c| (c.checkpoint_id, c.stamp))
                .collect();
            let mut ids = s.ids();
            if check == Check::Newest {
                // The newest committed here, and any newer one another
                // node may have committed.
                let newest = offer.committed.iter().map(|(id, _)| *id).max();
                ids.retain(|id| newest.is_none_or(|n| *id >= n));
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
                            check == Check::None || s.copies().verify(id, h.rank, world).is_ok()
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
                            .open_copy(plan.id, rank, world)
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
    /// to the decoder window by window, or (as the decoder) rebuilding the
    /// lost blobs and sending each target rank its file as it comes.
    /// Returns a local problem.
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
        let steps: Vec<(usize, u64, usize)> = stripes
            .iter()
            .flat_map(|&t| decode::windows(m.piece).map(move |(at, n)| (t, at, n)))
            .collect();
        let mine = d
            .present
            .iter()
            .find(|(_, r)| *r == me)
            .map(|(pos, _)| *pos);
        let open = |pos: usize| {
            store
                .ok_or("this node keeps no level-3 data".to_string())
                .and_then(|st| ShardReader::open(st, m, pos, &stripes))
        };
        if let Some(pos) = mine.filter(|_| me != d.decoder) {
            return self.send_shards(d.decoder as usize, open(pos), &steps);
        }
        if me != d.decoder {
            return Ok(None);
        }
        // The decoder.
        let mut problem: Option<String> = None;
        let mut sources = Vec::new();
        for &(pos, rank) in &d.present {
            let local = if rank == me {
                match open(pos) {
                    Ok(r) => Some(r),
                    Err(e) => {
                        problem.get_or_insert(e);
                        None
                    }
                }
            } else {
                None
            };
            sources.push((pos, rank, local));
        }
        let codec = scheme::erasure_code(&m.code, s.k(), s.p).map_err(|e| e.to_string());
        if let Err(e) = &codec {
            problem.get_or_insert(e.clone());
        }
        let mut outs: Vec<(usize, Splitter)> = d
            .missing
            .iter()
            .map(|&pos| {
                (
                    pos,
                    Splitter::new(m.blobs.get(pos).cloned().unwrap_or_default()),
                )
            })
            .collect();
        // Per target: whether its head went out, and whether it is whole.
        let mut sent: std::collections::BTreeMap<u32, bool> = Default::default();
        let mut shards: Vec<Option<Vec<u8>>> = vec![None; s.g];
        for (i, &(t, at, n)) in steps.iter().enumerate() {
            for slot in shards.iter_mut() {
                *slot = None;
            }
            for (pos, rank, local) in &sources {
                let window = match local {
                    Some(r) => {
                        let mut buf = vec![0u8; n];
                        r.read(t, at, &mut buf).map(|()| buf)
                    }
                    None if *rank == me => Err(String::new()),
                    None => {
                        let got = self.comm.recv_tagged(*rank as usize, TAG_SHARD)?;
                        if i + AHEAD < steps.len() {
                            self.comm.send_tagged(*rank as usize, TAG_CREDIT, &[])?;
                        }
                        if got.len() == n {
                            Ok(got.to_vec())
                        } else {
                            Err(format!("position {pos} sent no usable shard of stripe {t}"))
                        }
                    }
                };
                match window {
                    Ok(w) => {
                        let slot = match s.data_index(t, *pos) {
                            Some(x) => x,
                            None => s.k() + s.parity_index(t, *pos).unwrap_or(0),
                        };
                        shards[slot] = Some(w);
                    }
                    Err(e) if !e.is_empty() => {
                        problem.get_or_insert(e);
                    }
                    Err(_) => {}
                }
            }
            if problem.is_some() {
                continue;
            }
            let Ok(codec) = &codec else { continue };
            if let Err(e) = codec.reconstruct(&mut shards) {
                problem.get_or_insert(e.to_string());
                continue;
            }
            let data = s.data_nodes(t);
            for (pos, splitter) in outs.iter_mut() {
                let Some(x) = data.iter().position(|p| p == pos) else {
                    continue;
                };
                let Some(window) = shards[x].as_deref() else {
                    problem.get_or_insert(format!("stripe {t} was not decoded"));
                    break;
                };
                let fed = splitter.feed(window, &mut |cut| {
                    match cut {
                        Cut::Head(meta) if d.targets.contains(&meta.rank) => {
                            self.send_head(meta.rank as usize, Ok(&meta))
                                .map_err(|e| e.to_string())?;
                            sent.insert(meta.rank, meta.file_len == 0);
                        }
                        Cut::Data(rank, bytes) if sent.contains_key(&rank) => {
                            self.send_piece(rank as usize, bytes)
                                .map_err(|e| e.to_string())?;
                        }
                        _ => {}
                    }
                    Ok(())
                });
                if let Err(e) = fed {
                    problem.get_or_insert(e);
                    break;
                }
            }
        }
        // Every target hears the end of its transfer: a file cut short is
        // ended with an empty piece, one never started with the problem.
        let why = problem
            .clone()
            .unwrap_or_else(|| "the decoded data holds no file of this rank".into());
        for &target in &d.targets {
            match sent.get(&target) {
                None => self.send_head(target as usize, Err(why.clone()))?,
                Some(_) if problem.is_some() => self.send_piece(target as usize, &[])?,
                Some(_) => {}
            }
        }
        Ok(problem)
    }

    /// A member's side of a decode: every window of its shards, in the
    /// decoder's order, paced by the decoder's credits. A member that
    /// cannot read its shards sends empty windows, so that the decoder
    /// never waits for nothing.
    fn send_shards(
        &self,
        decoder: usize,
        reader: std::result::Result<ShardReader, String>,
        steps: &[(usize, u64, usize)],
    ) -> Result<Option<String>> {
        let mut problem = reader.as_ref().err().cloned();
        let mut buf = Vec::new();
        for (i, &(t, at, n)) in steps.iter().enumerate() {
            if i >= AHEAD {
                self.comm.recv_tagged(decoder, TAG_CREDIT)?;
            }
            buf.clear();
            if let (Ok(r), None) = (&reader, &problem) {
                buf.resize(n, 0);
                if let Err(e) = r.read(t, at, &mut buf) {
                    problem = Some(e);
                    buf.clear();
                }
            }
            self.comm.send_tagged(decoder, TAG_SHARD, &buf)?;
        }
        Ok(problem)
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
                Check::Newest => s.check_parity(m.checkpoint_id, key, m.piece).is_ok(),
            };
            if held {
                keys.push(key);
            }
        }
    }
    keys
}
