//! What the root does with each message a daemon sends: a rank ready at
//! the world barrier, done, ending or exited, a failure, a commit, a
//! report, and so on. Liveness is noted before a message gets here
//! (`liveness`); failures are handled in `failover`.

use super::{Cluster, Failure};
use crate::proto::{now_ns, ToDaemon, ToRoot};
use crate::root::RunError;
use frame::metrics::{Record, ReplayRecord};

impl Cluster<'_> {
    /// Handles message `msg` from node `node`'s daemon; true when the job
    /// ended (every rank process exited after the finish).
    pub(super) async fn on_daemon_message(
        &mut self,
        node: u32,
        msg: ToRoot,
    ) -> Result<bool, RunError> {
        match msg {
            ToRoot::Hello { .. } => {}
            ToRoot::Heartbeat { progress, .. } => self.nodes[node as usize].progress = progress,
            ToRoot::Committed { id } => {
                self.committed = id.map(|id| id.max(self.committed.unwrap_or(0)));
                if let Some(id) = id {
                    self.end_idling(id).await;
                }
            }
            ToRoot::Idled {
                rank,
                wall_ms,
                cpu_ms,
            } => self.record_idle(rank, wall_ms, cpu_ms),
            ToRoot::NeverJoined { how, .. } => {
                return Err(RunError::NeverJoined {
                    program: self.launch.program.clone(),
                    how,
                })
            }
            ToRoot::Spawned { epoch, at_ns, .. } => {
                for rec in self.open.iter_mut().filter(|r| r.epoch == epoch) {
                    rec.replacements_started_ns = rec.replacements_started_ns.max(at_ns);
                }
            }
            ToRoot::Ready {
                rank,
                epoch,
                endpoint,
            } => {
                if epoch == self.epoch && (rank as usize) < self.size() {
                    self.ready.set(rank as usize, endpoint);
                    let at = now_ns();
                    for rec in &mut self.open {
                        if rec.first_ready_ns == 0 {
                            rec.first_ready_ns = at;
                        }
                        rec.last_ready_ns = at;
                    }
                    if self.logged.rejoining.contains(&rank) {
                        self.replacement_ready(rank).await;
                    } else if self.released < self.epoch
                        && self.ready.all()
                        && self.logged.rejoining.is_empty()
                    {
                        self.release().await;
                    }
                }
            }
            ToRoot::Done { rank, epoch } => {
                if epoch == self.epoch && (rank as usize) < self.size() {
                    self.done.set(rank as usize, ());
                    if self.done.all() && self.open.is_empty() {
                        self.finishing = true;
                        self.broadcast(&ToDaemon::Finish).await;
                    }
                }
            }
            ToRoot::Unreachable { rank, epoch, peer } => {
                self.on_unreachable(node, rank, epoch, peer)
            }
            ToRoot::Ending { rank, epoch } => {
                let refused = if epoch != self.epoch {
                    Some(format!("the job moved on to epoch {}", self.epoch))
                } else if !self.open.is_empty() || !self.logged.rejoining.is_empty() {
                    Some("a recovery is under way".to_string())
                } else {
                    None
                };
                self.send(node, &ToDaemon::EndConfirmed { rank, refused })
                    .await;
            }
            ToRoot::Exited { rank } => {
                self.exited.set(rank as usize, ());
                return Ok(self.finishing && self.exited.all());
            }
            ToRoot::Failed {
                rank,
                incarnation,
                how,
                at_ns,
            } => {
                let current = self.incarnation.get(rank as usize) == Some(&incarnation)
                    && self.placement.get(rank as usize) == Some(&node);
                if current && !self.finishing {
                    self.fail(Failure::Rank { rank, how, at_ns }).await?;
                }
            }
            ToRoot::Aborted { rank, reason } => return Err(RunError::Aborted { rank, reason }),
            ToRoot::Fallback {
                rank,
                epoch,
                reason,
            } => self.on_fallback(rank, epoch, reason).await?,
            ToRoot::Teamed {
                rank,
                epoch,
                part,
                endpoint,
            } => self.on_teamed(rank, epoch, part, endpoint).await,
            ToRoot::Replayed {
                rank,
                to,
                messages,
                bytes,
                log_bytes,
            } => self.record(Record::Replay(ReplayRecord {
                failure: self.logged.last_failure,
                rank,
                to,
                messages,
                bytes,
                log_bytes,
            })),
            ToRoot::Helped {
                rank,
                part,
                wall_ms,
                cpu_ms,
            } => self.record_help(rank, part, wall_ms, cpu_ms),
            ToRoot::Fired { injection } => {
                self.fired.insert(injection);
                self.fire_other_nodes(injection).await;
            }
        }
        Ok(false)
    }
}
