//! Localised recovery on the checkpointer's side. A rank that replaces a
//! failed one while the others go on ([`RecoveryContext::rejoin`]) restores its
//! own newest checkpoint without them (no collective call: they are not
//! in `init` or `recover`), gives its communicator the message counts
//! saved with it, and then goes through that checkpoint's commit again:
//! the survivors' logs replay the commit's messages to it, and what it
//! sends again is dropped as already received. After that it stands where
//! the others stood when the checkpoint committed, and recomputes from
//! there with the messages the survivors' logs feed it.
//!
//! A replacement on a spare node, whose failed rank's node died with its
//! level 1 ([`RecoveryContext::stand_in`]), first brings that checkpoint from the
//! level-2 copy the failed node's partner keeps, through that node's
//! manager, or else decodes it from the failed node's level-3 group
//! (`rejoin/group.rs`), and goes on as above.
//!
//! With levels 2 and 4 the replacement takes up the ranks' promotion
//! bookkeeping saved with the checkpoint (see `promotion/state.rs`),
//! including the managers' answers its commit used, so that going through
//! it again takes the same decisions (level 3's rounds included: they
//! follow the one agreed when the promotions were set up); it asks its
//! manager for nothing again. What it takes: checkpoints and promotions
//! counted in calls (a timed schedule is agreed at run time); otherwise
//! the replacement refuses at `init`, naming the key.
//!
//! [`RecoveryContext::rejoin`]: crate::comm::RecoveryContext::rejoin
//! [`RecoveryContext::stand_in`]: crate::comm::RecoveryContext::stand_in

use super::promotion::Promotions;
use super::{messages, Checkpointer, Pending, Phase};
use crate::auth::Secret;
use crate::comm::{Comm, MessageCounts, StandIn};
use crate::config::{Config, Interval};
use crate::error::{problems, Error, Result};
use crate::format::Metadata;
use crate::level::Level;
use crate::manager::Client;
use crate::metrics::{process_cpu_time, Record, RejoinRecord};
use crate::scheme::{self, partner::Partners};
use crate::topology::Topology;
use std::time::Instant;

mod group;

/// A replacement that rejoined and has not caught up yet: the checkpoint
/// it restored, when it was back at it (wall clock and the process's CPU
/// time) and how long restoring took.
#[derive(Clone, Copy, Debug)]
pub(super) struct Rejoined {
    restored: u64,
    back: Instant,
    back_cpu: std::time::Duration,
    restore: std::time::Duration,
}

/// A replacement that cannot rejoin asks for a global recovery instead
/// (and fails with its interrupt); without a runtime that does that, it
/// fails with `error`.
pub(super) fn give_up(comm: &dyn Comm, error: Error) -> Error {
    let reason = format!("rank {} cannot rejoin: {error}", comm.rank());
    comm.link().fall_back(&reason).map_or(error, Error::Comm)
}

/// Why a replacement with this configuration cannot rejoin, if it cannot.
pub(super) fn refusal(cfg: &Config) -> Option<String> {
    let timed = [
        ("snapshot.interval", cfg.snapshot.interval),
        ("l2.interval", cfg.l2.interval),
        ("l3.interval", cfg.l3.interval),
        ("l4.interval", cfg.l4.interval),
    ]
    .into_iter()
    .find(|(_, i)| !matches!(i, Interval::Calls(_)));
    if let Some((key, _)) = timed {
        return Some(format!(
            "a replacement rejoining the others (recovery mode logged) needs checkpoints and promotions counted in calls ({})",
            cfg.describe(key)
        ));
    }
    None
}

impl Checkpointer<'_> {
    /// At init: picks this rank's newest sound checkpoint, which must be
    /// at least the newest the runtime saw committed (a rank rejoins from
    /// a checkpoint; the runtime restarts globally before the first).
    pub(super) fn start_rejoin(&mut self) -> Result<()> {
        let failures = self.comm.link().recovery();
        let committed = failures.committed.unwrap_or(0);
        let mut inventory = self.store.inventory();
        let mut newest = inventory.valid.iter().map(|h| h.id).max();
        if let Some(stand_in) = failures.stand_in.filter(|_| newest < Some(committed)) {
            if let Err(l2) = self.fetch_from_partner(committed, &stand_in) {
                tracing::info!(checkpoint = committed, reason = %l2, "no level-2 copy; decoding from level 3");
                if let Err(l3) = self.fetch_from_group(committed, &stand_in) {
                    return Err(Error::Unreadable {
                        id: committed,
                        reason: format!(
                            "node {} died with it; level 2: {l2}; level 3: {l3}",
                            stand_in.node
                        ),
                    });
                }
            }
            inventory = self.store.inventory();
            newest = inventory.valid.iter().map(|h| h.id).max();
        }
        match newest {
            Some(id) if id >= committed => {
                tracing::info!(checkpoint = id, "rejoining from this rank's own checkpoint");
                self.phase = Phase::Rejoining(Pending::new(id, inventory, Vec::new()));
                Ok(())
            }
            _ => Err(Error::Init {
                problems: problems(vec![(
                    self.comm.rank(),
                    format!(
                        "cannot rejoin: checkpoint {committed} committed, and this rank holds {} in {}",
                        newest.map_or("none".into(), |id| format!("only {id}")),
                        self.store.root().display()
                    ),
                )]),
            }),
        }
    }

    /// The placement a stand-in's promotions know, and the job's secret to
    /// reach the managers with.
    pub(super) fn stand_in_setting(
        &self,
        stand_in: &StandIn,
    ) -> Result<(Topology, Secret), String> {
        let topology = Topology::new(stand_in.placement.clone())
            .map_err(|e| format!("the job's placement is unusable: {e}"))?;
        let secret = (crate::comm::place(self.comm).runtime)
            .map(|r| r.secret)
            .ok_or_else(|| "no runtime gave the job's secret".to_string())?;
        Ok((topology, secret))
    }

    /// A replacement on a spare node, its failed rank's node gone with its
    /// level 1: brings checkpoint `id` into level 1 from the level-2 copy
    /// the failed node's partner keeps, through that node's manager (see
    /// `manager/copy_back.rs`), checked as it is installed; or why not.
    fn fetch_from_partner(&mut self, id: u64, stand_in: &StandIn) -> Result<(), String> {
        if self.cfg.l2.interval.is_zero() {
            return Err(format!(
                "no copy of it is kept on another node: {}",
                self.cfg.describe("l2.interval")
            ));
        }
        let (topology, secret) = self.stand_in_setting(stand_in)?;
        let rule = scheme::configured(&self.cfg, Level::L2)
            .ok_or_else(|| "level 2 has no scheme".to_string())?;
        let partners = Partners::from_rule(&topology, &rule).map_err(|e| e.to_string())?;
        let holders = partners.of(stand_in.node);
        if holders.is_empty() {
            return Err("the job ran on a single node".to_string());
        }
        let started = Instant::now();
        // The nearest partner that gives a sound copy.
        let mut why = Vec::new();
        for partner in holders {
            let Some(endpoint) = stand_in.managers.get(&partner) else {
                why.push(format!("no manager is known for node {partner}"));
                continue;
            };
            match self.copy_from(id, partner, endpoint, &secret) {
                Ok(bytes) => {
                    self.stats.fetch_time += started.elapsed();
                    self.stats.recovered_from = Some(Level::L2);
                    tracing::info!(
                        checkpoint = id,
                        partner,
                        bytes,
                        "took the checkpoint from the failed node's partner (level 2)"
                    );
                    return Ok(());
                }
                Err(e) => why.push(e),
            }
        }
        Err(why.join("; "))
    }

    /// Installs this rank's level-2 copy of checkpoint `id` that node
    /// `partner`'s manager keeps, checked as it arrives; its length, or
    /// why not.
    fn copy_from(
        &mut self,
        id: u64,
        partner: u32,
        endpoint: &crate::comm::net::Endpoint,
        secret: &Secret,
    ) -> Result<u64, String> {
        let rank = self.comm.rank() as u32;
        let world = self.comm.size() as u32;
        let mut client = Client::connect(endpoint, secret)
            .map_err(|e| format!("node {partner}'s manager cannot be reached: {e}"))?;
        let (meta, mut arriving) = client
            .get_copy(&self.cfg.job.id, id, rank, world)
            .map_err(|e| format!("node {partner} cannot give its level-2 copy: {}", e.0))?;
        if (meta.checkpoint_id, meta.rank) != (id, rank) {
            return Err(format!(
                "node {partner} gave checkpoint {} of rank {}",
                meta.checkpoint_id, meta.rank
            ));
        }
        self.store
            .install_from(&meta, &mut arriving)
            .map_err(|e| format!("its level-2 copy from node {partner} failed: {}", e.0))?;
        Ok(meta.file_len)
    }

    /// Restores the checkpoint picked at init on this rank alone, resumes
    /// the communicator's numbering and goes through the checkpoint's
    /// commit again (collective with the others' logs).
    pub(super) fn recover_rejoining(&mut self, id: u64) -> Result<u64> {
        let started = Instant::now();
        let (counts, meta) = self.restore_alone(id).map_err(|e| give_up(self.comm, e))?;
        self.discard_newer(id);
        self.phase = Phase::Running;
        // The next stamp follows the restored checkpoint's, as on the others.
        self.session = meta.stamp;
        self.attempts = 0;
        self.comm.link().resume_messages(&counts);
        self.stats.recovered_from.get_or_insert(Level::L1);
        self.stats.recovery_time += started.elapsed();
        if let Some(levels) = self.levels.as_mut() {
            levels.set_replaying(true);
        }
        let committed = self.commit(id, meta.stamp, Ok(meta), None, started);
        if let Some(levels) = self.levels.as_mut() {
            levels.set_replaying(false);
        }
        committed?;
        tracing::info!(
            checkpoint = id,
            "rejoined: the checkpoint's commit went through again"
        );
        self.rejoined = Some(Rejoined {
            restored: id,
            back: Instant::now(),
            back_cpu: process_cpu_time(),
            restore: started.elapsed(),
        });
        Ok(id)
    }

    /// After checkpoint `id` committed: a replacement that rejoined
    /// records how long restoring and recomputing took (the first commit
    /// after the one it restored ends the recomputation).
    pub(super) fn record_rejoin(&mut self, id: u64) {
        let Some(Rejoined {
            restored,
            back,
            back_cpu,
            restore,
        }) = self.rejoined
        else {
            return;
        };
        if id <= restored {
            return;
        }
        self.rejoined = None;
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        let recompute = back.elapsed();
        tracing::info!(
            restored,
            caught_up_at = id,
            recompute_ms = ms(recompute),
            "replacement caught up"
        );
        if let Some(path) = self.cfg.metrics_file() {
            Record::Rejoin(RejoinRecord {
                job: self.cfg.job.id.clone(),
                epoch: self.comm.link().recovery().epoch,
                rank: self.comm.rank() as u32,
                checkpoint: restored,
                restore_ms: ms(restore),
                recompute_ms: ms(recompute),
                caught_up_at: id,
                recompute_cpu_ms: ms(process_cpu_time().saturating_sub(back_cpu)),
            })
            .append(path);
        }
    }

    /// Loads checkpoint `id` into the protected regions on this rank and
    /// reads its message counts and description.
    fn restore_alone(&mut self, id: u64) -> Result<(MessageCounts, Metadata)> {
        let unreadable = |reason: String| Error::Unreadable { id, reason };
        self.load_all()
            .map_err(|f| unreadable(f.text().to_string()))?;
        let (cfg, comm) = (self.cfg.clone(), self.comm);
        let (_, file) = self
            .recovery_file()
            .map_err(|f| unreadable(f.text().to_string()))?;
        let counts = messages::decode(id, file).map_err(unreadable)?;
        let levels = if super::promotion::enabled(&cfg) {
            Some(Promotions::resume(&cfg, comm, id, file)?)
        } else {
            None
        };
        let (_, meta) = self
            .store
            .open_checkpoint(id)
            .map_err(|e| unreadable(e.to_string()))?;
        self.levels = levels;
        Ok((counts, meta))
    }
}

#[cfg(test)]
mod tests;
