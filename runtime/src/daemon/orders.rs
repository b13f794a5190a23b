//! What a daemon does on the root's orders (launch, reinit, go, finish)
//! and on its ranks' messages.

use super::{procs, Daemon};
use crate::proto::{self, FromRank, Go, Table, ToDaemon, ToRank, ToRoot};
use std::time::Instant;

impl Daemon {
    pub(super) async fn on_root_message(&mut self, msg: ToDaemon) -> std::io::Result<bool> {
        match msg {
            ToDaemon::Launch {
                epoch,
                ranks,
                state,
            } => {
                self.epoch = epoch;
                for rank in ranks {
                    self.start(Some(rank), epoch, state).await?;
                }
                self.fill_standby();
            }
            ToDaemon::Reinit {
                epoch,
                spawn,
                failed,
                ..
            } => {
                self.epoch = epoch;
                // The root forgot where the failed ranks listen (a logged
                // recovery's replacements that fell back keep running):
                // they tell it again.
                for p in self.procs.values_mut() {
                    if p.rank.is_some_and(|r| failed.ranks.contains(&r)) {
                        p.reported = procs::Reported::Nothing;
                    }
                }
                // A global restart ends every idle period.
                self.idle_governor(false, &[]);
                let by = Instant::now() + self.timeout;
                self.end_helpers();
                // The survivors roll back while the job waits for no one
                // but the replacements (their readiness releases the new
                // epoch): the replacements start first, before the
                // survivors' roll-back takes this node's cores.
                let survivors: Vec<u32> = (self.procs.iter())
                    .filter(|(_, p)| p.rank.is_some())
                    .map(|(&pid, _)| pid)
                    .collect();
                for rank in spawn {
                    self.replace(rank, epoch).await?;
                }
                for pid in survivors {
                    let Some(p) = self.procs.get_mut(&pid) else {
                        continue;
                    };
                    p.rejoin_by = Some((by, epoch));
                    if let Some((_, tx)) = p.conn.as_mut() {
                        let _ = tx.send(&ToRank::Reinit { epoch }).await;
                    }
                }
            }
            ToDaemon::Go(mut go) => {
                self.program_joins = true;
                let update = std::mem::replace(&mut go.table, Table::Changed(Vec::new()));
                let Some(table) = update.apply(self.table.as_ref()) else {
                    return Err(std::io::Error::other(
                        "the root released the ranks with changes to an address table this daemon never had",
                    ));
                };
                // Each encoded once: the whole table for the ranks that
                // never had one, the changes for the others.
                let changes = (self.table.as_ref()).and_then(|old| Table::changes(old, &table));
                let with = |table: Table| {
                    proto::encode(&ToRank::Go {
                        go: Go {
                            table,
                            ..go.clone()
                        },
                    })
                };
                let changed = changes.map(|c| with(Table::Changed(c))).transpose()?;
                // The whole table only when some rank needs it.
                let mut full: Option<bytes::Bytes> = None;
                for p in self.procs.values_mut().filter(|p| p.rank.is_some()) {
                    if let Some((_, tx)) = p.conn.as_mut() {
                        let bytes = match (&changed, p.holds_table) {
                            (Some(c), true) => c.clone(),
                            _ => match &full {
                                Some(f) => f.clone(),
                                None => full
                                    .insert(with(Table::Full(table.as_ref().clone()))?)
                                    .clone(),
                            },
                        };
                        p.holds_table = tx.send_encoded(bytes).await.is_ok();
                    }
                }
                self.table = Some(table);
                for p in self.procs.values_mut() {
                    p.reported.released();
                }
                self.demote_released();
                // Recovery is over: restock standbys off the critical path.
                self.fill_standby();
            }
            ToDaemon::Replace {
                epoch,
                rank,
                helpers,
            } => {
                self.replace(rank, epoch).await?;
                self.start_helpers(rank, epoch, helpers).await;
            }
            ToDaemon::ReleaseHelpers { rank, epoch, team } => {
                self.release_helpers(rank, epoch, team).await
            }
            ToDaemon::Release { rank, go } => {
                if let Some(p) = self.procs.values_mut().find(|p| p.rank == Some(rank)) {
                    if let Some((_, tx)) = p.conn.as_mut() {
                        let _ = tx.send(&ToRank::Go { go }).await;
                    }
                    // Its table is the root's, not the one this daemon
                    // was last released with: the next release sends all.
                    p.holds_table = false;
                    p.reported.released();
                }
                self.demote_released();
                self.fill_standby();
            }
            ToDaemon::Idle { on, ranks } => {
                let others = self
                    .procs
                    .values_mut()
                    .filter(|p| p.rank.is_some_and(|r| !ranks.contains(&r)));
                for p in others {
                    if let Some((_, tx)) = p.conn.as_mut() {
                        let _ = tx.send(&ToRank::Idle { on }).await;
                    }
                }
                self.idle_governor(on, &ranks);
            }
            ToDaemon::Kill { rank, action } => {
                for (pid, p) in self.procs.iter().filter(|(_, p)| p.rank == Some(rank)) {
                    p.signal(*pid, action.signal());
                }
            }
            ToDaemon::Die { action } => {
                let sig = action.signal();
                for (pid, p) in &self.procs {
                    p.signal(*pid, sig);
                }
                if let Some(pid) = self.manager {
                    procs::signal(pid, sig);
                }
                procs::signal(std::process::id(), sig);
            }
            ToDaemon::Finish => {
                self.finishing = true;
                for p in self.procs.values_mut() {
                    p.finishing = true;
                    if let Some((_, tx)) = p.conn.as_mut() {
                        let _ = tx.send(&ToRank::Finish).await;
                    }
                }
            }
            ToDaemon::Shutdown => {
                self.shutting_down = true;
                return Ok(false);
            }
            ToDaemon::EndConfirmed { rank, refused } => {
                let to = self.procs.values_mut().find(|p| p.rank == Some(rank));
                if let Some((_, tx)) = to.and_then(|p| p.conn.as_mut()) {
                    let _ = tx.send(&ToRank::EndConfirmed { refused }).await;
                }
            }
            ToDaemon::Lease { beat, ms } => {
                self.lease.renew(beat, ms, std::time::Instant::now());
            }
        }
        Ok(true)
    }

    pub(super) async fn on_rank_message(
        &mut self,
        pid: u32,
        rank: u32,
        msg: FromRank,
    ) -> std::io::Result<()> {
        let flush = matches!(
            msg,
            FromRank::Fired { .. } | FromRank::Abort { .. } | FromRank::Committed { id: None }
        );
        let forward = match msg {
            FromRank::Hello { .. } => None,
            FromRank::Alive { progress } => {
                if let Some(p) = self.procs.get_mut(&pid) {
                    p.progress = progress;
                }
                None
            }
            FromRank::Ready { epoch, endpoint } => {
                // A survivor that rolled back listens where it did: the root
                // holds its endpoint still and waits only for the ranks that
                // start again, so a ready the root holds already stays here.
                // A recovery costs the root a message per replaced rank, not
                // one per rank of the job.
                let known = self.procs.get_mut(&pid).is_some_and(|p| {
                    p.rolled_back(epoch);
                    let held = p.reported.holds(&endpoint);
                    if !held {
                        p.reported = procs::Reported::Sent(endpoint.clone());
                    }
                    held
                });
                (!known).then_some(ToRoot::Ready {
                    rank,
                    epoch,
                    endpoint,
                })
            }
            FromRank::Done { epoch } => Some(ToRoot::Done { rank, epoch }),
            FromRank::Ending { epoch } => Some(ToRoot::Ending { rank, epoch }),
            FromRank::Unreachable { epoch, peer } => {
                Some(ToRoot::Unreachable { rank, epoch, peer })
            }
            FromRank::Fired { injection } => Some(ToRoot::Fired { injection }),
            FromRank::Abort { reason } => Some(ToRoot::Aborted { rank, reason }),
            FromRank::Idled { wall_ms, cpu_ms } => Some(ToRoot::Idled {
                rank,
                wall_ms,
                cpu_ms,
            }),
            FromRank::Fallback { epoch, reason } => Some(ToRoot::Fallback {
                rank,
                epoch,
                reason,
            }),
            FromRank::Teamed {
                epoch,
                part,
                endpoint,
            } => Some(ToRoot::Teamed {
                rank,
                epoch,
                part,
                endpoint,
            }),
            FromRank::Helped { .. } => None,
            FromRank::Replayed {
                to,
                messages,
                bytes,
                log_bytes,
            } => Some(ToRoot::Replayed {
                rank,
                to,
                messages,
                bytes,
                log_bytes,
            }),
            FromRank::Committed { id } => (self.committed != Some(id)).then(|| {
                self.committed = Some(id);
                ToRoot::Committed { id }
            }),
        };
        if let Some(m) = forward {
            self.to_root.send(&m).await?;
        }
        if flush {
            if let Some((_, tx)) = self.procs.get_mut(&pid).and_then(|p| p.conn.as_mut()) {
                let _ = tx.send(&ToRank::Flushed).await;
            }
        }
        Ok(())
    }

    /// Lowers the standbys that took a rank and were just released to the
    /// ranks' priority (see `crowding`).
    fn demote_released(&mut self) {
        let released: Vec<u32> = (self.procs.iter())
            .filter(|(_, p)| p.prompt && p.rank.is_some())
            .map(|(&pid, _)| pid)
            .collect();
        for pid in released {
            self.demote(pid);
        }
    }
}
