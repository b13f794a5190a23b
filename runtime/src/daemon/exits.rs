//! The end of a daemon's processes: how each ended, whether it had joined,
//! and what the root is told (a rank's clean exit or failure; a standby is
//! replaced).

use super::{Daemon, Event};
use crate::proto::{now_ns, ToRoot};
use std::process::ExitStatus;
use std::time::Duration;

/// How long a process that exited without a hello is given for a hello it
/// may have sent just before dying (read after its exit was noticed).
const LATE_HELLO: Duration = Duration::from_millis(500);

/// A process that exited before joining: rank, incarnation, how it ended.
pub(super) type Unjoined = (Option<u32>, u64, String);

pub(super) fn describe(status: &std::io::Result<ExitStatus>) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status {
        Ok(s) => match (s.code(), s.signal()) {
            (Some(c), _) => format!("exited with status {c}"),
            (_, Some(sig)) => format!("killed by signal {sig}"),
            _ => "ended".into(),
        },
        Err(e) => format!("could not be waited for: {e}"),
    }
}

impl Daemon {
    pub(super) async fn on_exit(
        &mut self,
        pid: u32,
        status: std::io::Result<ExitStatus>,
    ) -> std::io::Result<()> {
        let Some(p) = self.procs.remove(&pid) else {
            return Ok(());
        };
        if self.shutting_down {
            return Ok(());
        }
        let how = match &p.killed_for {
            Some(why) => format!("killed by its daemon: {why}"),
            None => describe(&status),
        };
        if !p.has_joined() && !self.finishing && !self.program_joins {
            // Its hello may still be unread: decide a moment later.
            self.unjoined.insert(pid, (p.rank, p.incarnation, how));
            let ev = self.events.clone();
            tokio::spawn(async move {
                tokio::time::sleep(LATE_HELLO).await;
                let _ = ev.send(Event::Unjoined(pid));
            });
            return Ok(());
        }
        let clean = p.finishing && status.as_ref().is_ok_and(|s| s.success());
        if let Some(help) = p.helps {
            // A helper that finished its part exits; one that died ends
            // its team (unless the daemon killed it, ending the team).
            let done = status.as_ref().is_ok_and(|s| s.success());
            if !done && p.killed_for.is_none() && !self.finishing {
                self.end_team(help.rank, &format!("its helper (part {}) {how}", help.part));
            }
            self.fill_standby();
            return Ok(());
        }
        if let Some(rank) = p.rank.filter(|_| !clean) {
            // Its helpers cannot go on without it.
            self.end_team(rank, "the replacement it helped ended");
        }
        self.report_exit(p.rank, p.incarnation, how, clean).await
    }

    /// Reports the end of a process that had joined: a rank's clean exit at
    /// the end of the job, or its failure; a standby is replaced.
    pub(super) async fn report_exit(
        &mut self,
        rank: Option<u32>,
        incarnation: u64,
        how: String,
        clean: bool,
    ) -> std::io::Result<()> {
        match rank {
            Some(rank) if clean => self.to_root.send(&ToRoot::Exited { rank }).await,
            Some(rank) => {
                let failed = ToRoot::Failed {
                    rank,
                    incarnation,
                    how,
                    at_ns: now_ns(),
                };
                self.to_root.send(&failed).await
            }
            // A standby died: start another one.
            None => {
                self.fill_standby();
                Ok(())
            }
        }
    }
}
