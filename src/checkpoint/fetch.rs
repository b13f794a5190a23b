//! Bringing a checkpoint back from levels 2 to 4 when level 1 cannot
//! restore one: the iterative baseline.
//!
//! For each level in turn, every rank checks what it can get at that level,
//! one collective round decides whether every rank can, and the first level
//! where all can wins. Each level is tried once, at the newest checkpoint
//! it committed that all ranks can get; damage found while fetching moves
//! on to the next level. Its files are installed into level 1 (which rebuilds
//! the lost level-1 copies), and recovery then proceeds from level 1 as
//! usual, checking every chunk while loading.
//!
//! - Level 2: the lowest rank of each node offers the copies its node keeps;
//!   after an all-gather, each rank missing its file gets it sent by a rank
//!   of a node that keeps it ([`crate::recovery::copies`]).
//! - Level 3: see [`rebuild`](super::rebuild).
//! - Level 4: each rank reads its own files from the global directory
//!   (failure-aware recovery reads them when it loads: see
//!   [`on_load`](super::on_load)).
//!
//! A file read back from level 4 is checked by the format's CRCs as it is
//! installed, not against each chunk's hash too.

use super::Checkpointer;
use crate::comm::agree_on_problems;
use crate::comm::Bytes;
use crate::error::Result;
use crate::format::Metadata;
use crate::level::stream::{PieceSource, PIECE};
use crate::level::{CopyStore, GlobalStore, Level, Pieces, StorageError};
use crate::recovery::copies::{self, Copy, Offer};
use crate::recovery::{Ballot, Decision, Held, Inventory};
use serde::{Deserialize, Serialize};

/// Tags of the file transfers (above frame's collectives).
const TAG_FETCH_HEAD: u64 = (1 << 32) + 0x1000;
const TAG_FETCH_DATA: u64 = (1 << 32) + 0x1001;

/// What a sender says before the bytes.
#[derive(Serialize, Deserialize)]
enum Head {
    File { meta: Box<Metadata>, len: u64 },
    Failed(String),
}

impl Checkpointer<'_> {
    /// Tries levels 2 to 4 in turn; returns the level whose checkpoint is
    /// now installed in level 1 on every rank, if any. Collective.
    pub(super) fn fetch_from_levels(&mut self, l1: &Inventory) -> Result<Option<(Level, u64)>> {
        if self.levels.is_none() {
            return Ok(None);
        }
        if !self.cfg.l2.interval.is_zero() {
            if let Some(id) = self.fetch_copies(l1, Level::L2)? {
                return Ok(Some((Level::L2, id)));
            }
        }
        if !self.cfg.l3.interval.is_zero() {
            if let Some(id) = self.fetch_erasure(l1)? {
                return Ok(Some((Level::L3, id)));
            }
        }
        if !self.cfg.l4.interval.is_zero() {
            if let Some(id) = self.fetch_global()? {
                return Ok(Some((Level::L4, id)));
            }
        }
        Ok(None)
    }

    /// Level 2 (or any level kept as node-local copies).
    fn fetch_copies(&mut self, l1: &Inventory, level: Level) -> Result<Option<u64>> {
        let (mut offer, store) = self.copies_offer(l1, level);
        // The baseline checks the level's newest checkpoint before its
        // round: every copy this node keeps of its newest committed one
        // (and of any newer, which another node may have committed) is
        // read and CRC-checked.
        if let Some(s) = &store {
            let newest = offer.committed.iter().map(|(id, _)| *id).max();
            let world = self.comm.size() as u32;
            offer.copies.retain(|c| {
                newest.is_none_or(|n| c.id >= n) && s.verify(c.id, c.rank, world).is_ok()
            });
        }
        let mut offers: Vec<Offer> = self.exchange(&offer)?;
        self.stats.recovery_rounds += 1;
        copies::retain_committed(&mut offers);
        // One attempt per level, at its newest checkpoint: damage sends
        // the baseline on to the next level.
        match copies::plan(&offers, &[]) {
            Some(plan) if self.transfer_copies(&plan, store.as_ref(), level)? => Ok(Some(plan.id)),
            _ => Ok(None),
        }
    }

    /// What this rank can give towards a level-2 restore: its own level-1
    /// checkpoints and, on a node's lowest rank, the copies the node keeps.
    pub(super) fn copies_offer(&self, l1: &Inventory, level: Level) -> (Offer, Option<CopyStore>) {
        let world = self.comm.size() as u32;
        let mut offer = Offer {
            node: self.comm.node(),
            own: l1.valid.iter().map(|h| (h.id, h.stamp)).collect(),
            copies: Vec::new(),
            committed: Vec::new(),
        };
        let mut store = None;
        if self.is_node_leader() {
            if let Ok(Some(s)) =
                CopyStore::open_existing(&self.cfg.storage.local_dir, &self.cfg.job.id, level)
            {
                // Everything held: what counts is decided after the
                // exchange, by every node's markers.
                offer.committed = s
                    .commits()
                    .into_iter()
                    .map(|c| (c.checkpoint_id, c.stamp))
                    .collect();
                let (held, _) = s.scan(world);
                offer.copies = held
                    .into_iter()
                    .map(|h| Copy {
                        id: h.id,
                        rank: h.rank,
                        stamp: h.stamp,
                    })
                    .collect();
                store = Some(s);
            }
        }
        (offer, store)
    }

    /// Carries out one copy plan: holders send, the ranks missing their
    /// file receive and install it; whether every rank succeeded (one
    /// agreement). Collective.
    pub(super) fn transfer_copies(
        &mut self,
        plan: &copies::CopyPlan,
        store: Option<&CopyStore>,
        level: Level,
    ) -> Result<bool> {
        let started = std::time::Instant::now();
        let done = self.transfer_copies_timed(plan, store, level);
        self.stats.fetch_time += started.elapsed();
        done
    }

    fn transfer_copies_timed(
        &mut self,
        plan: &copies::CopyPlan,
        store: Option<&CopyStore>,
        level: Level,
    ) -> Result<bool> {
        let world = self.comm.size() as u32;
        let me = self.comm.rank() as u32;
        // Eager sends first, then receives: no rank waits on another's send.
        // A rank other than its node's lowest opens the node's copies itself
        // (the ranks of a node take turns sending).
        let mut opened = None;
        for &(rank, from) in &plan.fetch {
            if from == me {
                if store.is_none() && opened.is_none() {
                    opened = CopyStore::open_existing(
                        &self.cfg.storage.local_dir,
                        &self.cfg.job.id,
                        level,
                    )
                    .ok()
                    .flatten();
                }
                let read = store
                    .or(opened.as_ref())
                    .ok_or_else(|| "this node keeps no copies".to_string())
                    .and_then(|s| s.open_copy(plan.id, rank, world).map_err(|e| e.to_string()));
                self.send_file(rank as usize, read)?;
            }
        }
        let mut local = None;
        if let Some(&(_, from)) = plan.fetch.iter().find(|(r, _)| *r == me) {
            local = self.receive_and_install(from as usize)?.err();
        }
        let trouble = agree_on_problems(self.comm, local.as_deref())?;
        for (rank, reason) in &trouble {
            tracing::warn!(checkpoint = plan.id, rank, reason = %reason, "could not fetch a level-{} copy", level.number());
        }
        Ok(trouble.is_empty())
    }

    /// Sends rank `to` its file, read piece by piece (or why it cannot).
    pub(super) fn send_file(
        &self,
        to: usize,
        read: std::result::Result<(Metadata, Pieces), String>,
    ) -> Result<()> {
        match read {
            Ok((meta, mut pieces)) => {
                self.send_head(to, Ok(&meta))?;
                if let Some(map) = pieces.map() {
                    for at in (0..map.len()).step_by(PIECE) {
                        let range = at..map.len().min(at + PIECE);
                        Pieces::populate(&map, range.clone());
                        self.send_piece(to, &map[range.clone()])?;
                        Pieces::release(&map, range);
                    }
                    return Ok(());
                }
                let mut buf = Vec::new();
                loop {
                    match pieces.next_into(&mut buf, PIECE) {
                        Ok(true) => self.send_piece(to, &buf)?,
                        Ok(false) => break,
                        Err(e) => {
                            tracing::warn!(to, error = %e, "could not read a file being sent");
                            self.send_piece(to, &[])?;
                            break;
                        }
                    }
                }
            }
            Err(why) => self.send_head(to, Err(why))?,
        }
        Ok(())
    }

    /// Announces rank `to`'s file (its pieces follow, see
    /// [`send_piece`](Self::send_piece)), or why it cannot be sent.
    pub(super) fn send_head(
        &self,
        to: usize,
        meta: std::result::Result<&Metadata, String>,
    ) -> Result<()> {
        let head = match meta {
            Ok(meta) => Head::File {
                meta: Box::new(meta.clone()),
                len: meta.file_len,
            },
            Err(why) => Head::Failed(why),
        };
        let head = serde_json::to_vec(&head).unwrap_or_default();
        Ok(self.comm.send_tagged(to, TAG_FETCH_HEAD, &head)?)
    }

    /// Sends the next piece of rank `to`'s file; an empty piece says the
    /// rest will not come.
    pub(super) fn send_piece(&self, to: usize, piece: &[u8]) -> Result<()> {
        Ok(self.comm.send_tagged(to, TAG_FETCH_DATA, piece)?)
    }

    /// Receives this rank's file from `from` piece by piece and installs it
    /// into level 1 (checked as it arrives). The outer error is a
    /// communication failure; the inner one a problem with the file. Every
    /// piece announced is received, even after a problem, so that nothing
    /// of this transfer is left waiting.
    pub(super) fn receive_and_install(
        &mut self,
        from: usize,
    ) -> Result<std::result::Result<(), String>> {
        let head = self.comm.recv_tagged(from, TAG_FETCH_HEAD)?;
        let (meta, len) = match serde_json::from_slice::<Head>(&head) {
            Ok(Head::File { meta, len }) => (meta, len),
            Ok(Head::Failed(why)) => {
                return Ok(Err(format!("rank {from} could not read the copy: {why}")))
            }
            Err(e) => return Ok(Err(format!("rank {from} sent an unreadable header: {e}"))),
        };
        let mine = len == meta.file_len && meta.rank == self.comm.rank() as u32;
        let mut arriving = Arriving {
            comm: self.comm,
            from,
            len,
            received: 0,
            ended: false,
            piece: Bytes::new(),
        };
        let installed = if mine {
            self.store.install_from(&meta, &mut arriving)
        } else {
            Err(Pull::File(format!(
                "rank {from} sent a file that is not this rank's"
            )))
        };
        while !arriving.ended && arriving.received < len {
            let piece = self.comm.recv_tagged(from, TAG_FETCH_DATA)?;
            arriving.ended = piece.is_empty();
            arriving.received += piece.len() as u64;
        }
        match installed {
            Ok(()) => Ok(Ok(())),
            Err(Pull::File(e)) => Ok(Err(e)),
            Err(Pull::Comm(e)) => Err(e),
        }
    }

    /// Level 4: each rank reads its own file of the newest checkpoint all
    /// ranks hold there.
    fn fetch_global(&mut self) -> Result<Option<u64>> {
        let world = self.comm.size() as u32;
        let me = self.comm.rank() as u32;
        let store = self.global_store();
        let mut inv = Inventory::default();
        if let Some(s) = &store {
            let committed = s.committed();
            let (held, bad) = s.scan_rank(me, world);
            inv.valid = held
                .into_iter()
                .filter(|h| committed.contains(&h.id))
                .map(|h| Held {
                    id: h.id,
                    stamp: h.stamp,
                })
                .collect();
            inv.incomplete = bad;
            // The baseline checks this rank's level-4 files newest first
            // (every chunk's hash) before its round, down to a sound one:
            // the last level has nothing to fall back on but older
            // checkpoints. Older ones are checked while installing.
            let mut ids: Vec<u64> = inv.valid.iter().map(|h| h.id).collect();
            ids.sort_unstable_by(|a, b| b.cmp(a));
            let sound = ids.into_iter().find(|&id| s.verify(id, me, world).is_ok());
            inv.valid.retain(|h| Some(h.id) <= sound);
        }
        let mut ballot = Ballot::new(&inv, &[], 0);
        self.comm
            .all_reduce_u64(ballot.values_mut(), crate::comm::ReduceOp::Min)?;
        self.stats.recovery_rounds += 1;
        match ballot.decide() {
            Decision::Restore(id) if self.install_global(store.as_ref(), id)? => Ok(Some(id)),
            _ => Ok(None),
        }
    }

    /// This job's level-4 store, if the global directory holds one.
    pub(super) fn global_store(&self) -> Option<GlobalStore> {
        GlobalStore::open_existing(&self.cfg.storage.global_dir, &self.cfg.job.id)
            .ok()
            .flatten()
    }

    /// Every rank reads its file of checkpoint `id` from level 4 (chunk
    /// hashes checked) and installs it into level 1; whether all succeeded
    /// (one agreement). Collective.
    pub(super) fn install_global(&mut self, store: Option<&GlobalStore>, id: u64) -> Result<bool> {
        let started = std::time::Instant::now();
        let done = self.install_global_timed(store, id);
        self.stats.fetch_time += started.elapsed();
        done
    }

    fn install_global_timed(&mut self, store: Option<&GlobalStore>, id: u64) -> Result<bool> {
        let world = self.comm.size() as u32;
        let me = self.comm.rank() as u32;
        let local = match store {
            Some(s) => s
                .open_copy(id, me, world)
                .and_then(|(meta, chunks)| {
                    self.store
                        .install_from(&meta, &mut chunks.checked_by_reader())
                })
                .map_err(|e| e.to_string())
                .err(),
            None => Some("no level-4 directory".to_string()),
        };
        let trouble = agree_on_problems(self.comm, local.as_deref())?;
        for (rank, reason) in &trouble {
            tracing::warn!(checkpoint = id, rank, reason = %reason, "could not fetch a level-4 copy");
        }
        Ok(trouble.is_empty())
    }

    /// The baseline's check of level 1 before its round: every chunk of
    /// this rank's newest level-1 file; a damaged one counts as missing.
    pub(super) fn checked_l1(&self, inventory: &Inventory) -> Inventory {
        let mut checked = inventory.clone();
        if let Some(newest) = checked.newest(&[]) {
            let sound = self
                .store
                .open_checkpoint(newest)
                .map(|(f, _)| f.verify().is_empty())
                .unwrap_or(false);
            if !sound {
                checked.valid.retain(|h| h.id != newest);
            }
        }
        checked
    }

    /// Every rank's `mine`, in rank order (an unreadable one counts as the
    /// default: offering nothing). Collective.
    pub(super) fn exchange<T>(&self, mine: &T) -> Result<Vec<T>>
    where
        T: Serialize + for<'de> Deserialize<'de> + Default,
    {
        let bytes = serde_json::to_vec(mine).unwrap_or_default();
        Ok(self
            .comm
            .all_gather(&bytes)?
            .iter()
            .map(|b| serde_json::from_slice(b).unwrap_or_default())
            .collect())
    }

    /// Gathers every rank's `mine` at rank 0: all of them there, in rank
    /// order, and `None` elsewhere. A report that does not decode counts
    /// as one of nothing (`T::default()`). Collective.
    pub(super) fn gather_at_root<T>(&self, mine: &T) -> Result<Option<Vec<T>>>
    where
        T: Serialize + for<'de> Deserialize<'de> + Default,
    {
        let bytes = serde_json::to_vec(mine).unwrap_or_default();
        Ok(self.comm.gather(&bytes, 0)?.map(|all| {
            all.iter()
                .map(|b| serde_json::from_slice(b).unwrap_or_default())
                .collect()
        }))
    }

    /// Sends rank 0's `value` (`what`, for errors) to every rank; the other
    /// ranks pass `None`. Collective.
    pub(super) fn broadcast_from_root<T>(&self, value: Option<&T>, what: &str) -> Result<T>
    where
        T: Serialize + for<'de> Deserialize<'de>,
    {
        let mut bytes = value
            .map(|v| serde_json::to_vec(v).unwrap_or_default())
            .unwrap_or_default();
        self.comm.broadcast(&mut bytes, 0)?;
        serde_json::from_slice(&bytes).map_err(|e| {
            crate::comm::CommError::Transport(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("the {what} rank 0 sent does not decode: {e}"),
            ))
            .into()
        })
    }

    /// Whether this rank is the lowest rank of its node.
    pub(super) fn is_node_leader(&self) -> bool {
        self.levels.as_ref().map(|l| l.is_leader()).unwrap_or(false)
    }

    /// The failed nodes this rank's node stood in for (their ids name it
    /// in what was promoted meanwhile).
    pub(super) fn stood_in_for(&self) -> Vec<u32> {
        let here = self.comm.node();
        let stood_in = self.comm.link().recovery().stood_in;
        (stood_in.into_iter())
            .filter_map(|(failed, spare)| (spare == here).then_some(failed))
            .collect()
    }
}

/// A file arriving from rank `from`, `len` bytes announced, as the pieces
/// of its installation: each message's own buffer, lent.
struct Arriving<'c> {
    comm: &'c dyn crate::comm::Comm,
    from: usize,
    len: u64,
    received: u64,
    /// The sender said the rest will not come.
    ended: bool,
    piece: Bytes,
}

impl PieceSource for Arriving<'_> {
    type Error = Pull;

    fn next_piece(&mut self) -> std::result::Result<Option<&[u8]>, Pull> {
        if self.received == self.len {
            return Ok(None);
        }
        let from = self.from;
        self.piece = self.comm.recv_tagged(from, TAG_FETCH_DATA)?;
        if self.piece.is_empty() {
            self.ended = true;
            return Err(Pull::File(format!(
                "rank {from} could not read the rest of the file"
            )));
        }
        self.received += self.piece.len() as u64;
        if self.received > self.len {
            self.ended = true;
            return Err(Pull::File(format!("rank {from} sent more than announced")));
        }
        Ok(Some(&self.piece))
    }
}

/// Why receiving a file stopped.
enum Pull {
    /// The communicator failed (recovery is interrupted).
    Comm(crate::error::Error),
    /// The file could not be had.
    File(String),
}

impl From<StorageError> for Pull {
    fn from(e: StorageError) -> Self {
        Pull::File(e.to_string())
    }
}

impl From<crate::comm::CommError> for Pull {
    fn from(e: crate::comm::CommError) -> Self {
        Pull::Comm(e.into())
    }
}
