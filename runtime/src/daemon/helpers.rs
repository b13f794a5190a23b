//! Helpers: the processes that recompute a failed rank's lost interval
//! with its replacement in a logged recovery (`recovery.spares`). The
//! daemon of the replacement's node makes standby processes helpers (or
//! starts new ones for them), forwards where each listens for its team
//! and what it used, and releases them once the replacement listens too.
//! A team lives and dies together: a helper that dies takes its
//! replacement with it (whose failure the root then handles), and a
//! replacement that ends takes its helpers.

use super::Daemon;
use crate::proto::{FromRank, ToRank, ToRoot};
use frame::comm::net::Endpoint;
use std::time::Instant;

/// What a helper process is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Helping {
    /// The failed rank whose replacement it helps.
    pub(super) rank: u32,
    /// The epoch of the logged recovery.
    pub(super) epoch: u64,
    /// Its part of the team (1 and up; the replacement is part 0).
    pub(super) part: u32,
    /// Processes in the team, the replacement included.
    pub(super) parts: u32,
}

impl Daemon {
    /// Gives the replacement of `rank` `helpers` helpers: standbys that
    /// joined, else processes started for it (made helpers when they join).
    pub(super) async fn start_helpers(&mut self, rank: u32, epoch: u64, helpers: u32) {
        for part in 1..=helpers {
            let help = Helping {
                rank,
                epoch,
                part,
                parts: helpers + 1,
            };
            if !self.make_helper(None, help).await {
                self.waiting_help.push_back(help);
                if let Err(e) = self.spawn_standby() {
                    eprintln!("frame daemon: cannot start a helper of rank {rank}: {e}");
                }
            }
        }
    }

    /// Makes a joined standby (`pid`, or any) helper `help`; false when
    /// there is none.
    pub(super) async fn make_helper(&mut self, pid: Option<u32>, help: Helping) -> bool {
        let by = Instant::now() + self.timeout;
        let idle = self.procs.iter_mut().find(|(p_id, p)| {
            pid.is_none_or(|want| **p_id == want)
                && p.rank.is_none()
                && p.helps.is_none()
                && p.has_joined()
                && p.killed_for.is_none()
        });
        let Some((&helper, p)) = idle else {
            return false;
        };
        let order = ToRank::Help {
            rank: help.rank,
            epoch: help.epoch,
            part: help.part,
            parts: help.parts,
        };
        let sent = match p.conn.as_mut() {
            Some((_, tx)) => tx.send(&order).await.is_ok(),
            None => false,
        };
        if sent {
            p.helps = Some(help);
            // It must say where it listens within the rank timeout.
            p.rejoin_by = Some((by, help.epoch));
            // A helper recomputes beside the ranks, at their priority.
            self.demote(helper);
        }
        sent
    }

    /// A standby joined: it becomes the helper waiting longest for one.
    pub(super) async fn on_standby_joined(&mut self, pid: u32) {
        if let Some(help) = self.waiting_help.pop_front() {
            if !self.make_helper(Some(pid), help).await {
                self.waiting_help.push_front(help);
            }
        }
    }

    /// A message from helper `help` (process `pid`).
    pub(super) async fn on_helper_message(
        &mut self,
        pid: u32,
        help: Helping,
        msg: FromRank,
    ) -> std::io::Result<()> {
        // A helper waits for the daemon's answer to these two only, then
        // exits (an answer to any other would end a later wait early).
        let flush = matches!(msg, FromRank::Helped { .. } | FromRank::Abort { .. });
        let forward = match msg {
            FromRank::Teamed {
                epoch,
                part,
                endpoint,
            } => {
                if let Some(p) = self.procs.get_mut(&pid) {
                    p.rolled_back(epoch);
                }
                Some(ToRoot::Teamed {
                    rank: help.rank,
                    epoch,
                    part,
                    endpoint,
                })
            }
            FromRank::Helped { wall_ms, cpu_ms } => Some(ToRoot::Helped {
                rank: help.rank,
                part: help.part,
                wall_ms,
                cpu_ms,
            }),
            FromRank::Abort { reason } => {
                // The replacement cannot go on without it: end the team.
                self.end_team(
                    help.rank,
                    &format!("its helper (part {}) gave up: {reason}", help.part),
                );
                None
            }
            _ => None,
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

    /// The team members of `rank` listen here: release its helpers.
    pub(super) async fn release_helpers(&mut self, rank: u32, epoch: u64, team: Vec<Endpoint>) {
        let helpers = self
            .procs
            .values_mut()
            .filter(|p| p.helps.is_some_and(|h| h.rank == rank && h.epoch == epoch));
        for p in helpers {
            if let Some((_, tx)) = p.conn.as_mut() {
                let _ = tx.send(&ToRank::TeamGo { team: team.clone() }).await;
            }
        }
    }

    /// Kills the replacement of `rank` and its helpers (their work is
    /// lost with one of them); the replacement's failure goes to the root.
    pub(super) fn end_team(&mut self, rank: u32, why: &str) {
        for (pid, p) in self.procs.iter_mut() {
            let member = p.rank == Some(rank) || p.helps.is_some_and(|h| h.rank == rank);
            if member && p.killed_for.is_none() {
                p.killed_for = Some(why.to_string());
                p.signal(*pid, rustix::process::Signal::KILL);
            }
        }
    }

    /// Kills every helper (a global restart began: their teams are gone).
    pub(super) fn end_helpers(&mut self) {
        self.waiting_help.clear();
        for (pid, p) in self.procs.iter_mut() {
            if p.helps.is_some() && p.killed_for.is_none() {
                p.killed_for = Some("a global restart began".into());
                p.signal(*pid, rustix::process::Signal::KILL);
            }
        }
    }
}
