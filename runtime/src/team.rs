//! Teams: a failed rank's replacement and the helper processes that
//! share its recomputation in a logged recovery (`recovery.spares`).
//!
//! The runtime starts `spares - 1` helpers on the replacement's node and
//! gives the team a communicator of its own (part 0 is the replacement),
//! apart from the job's: the replacement alone talks to the other ranks,
//! so their logs and the replacement's numbering are the same as without
//! helpers. How the work is split is the program's: it sets the function
//! helpers run ([`set_helper`]), and its replacement finds the team in
//! [`Context::team`](crate::Context::team), hands each helper its part of
//! the state, feeds it what it needs at every step and gathers the parts
//! back before its next checkpoint. A program that sets no helper
//! function lets its helpers go at once and recomputes alone.

use super::agent::Agent;
use super::handoff::RankEnv;
use super::proto::{FromRank, ToRank};
use frame::comm::net::NetComm;
use frame::comm::{Comm, Rank};
use frame::metrics::process_cpu_time;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

/// What a helper's function returns when it cannot do its part.
pub type HelperError = Box<dyn std::error::Error + Send + Sync>;

/// The function a helper process runs.
type Helper = Arc<dyn Fn(&Team<'_>) -> Result<(), HelperError> + Send + Sync>;

fn helper() -> &'static Mutex<Option<Helper>> {
    static HELPER: OnceLock<Mutex<Option<Helper>>> = OnceLock::new();
    HELPER.get_or_init(|| Mutex::new(None))
}

/// Sets the function a helper process of this program runs: its part of
/// a failed rank's recomputation, talking to the replacement and the
/// other helpers through [`Team::comm`]. Set it before
/// [`run`](crate::run), in every process of the program (the replacement
/// looks for it too: without it, it gets no team). It returns once its
/// part is done; the process then exits.
pub fn set_helper(f: impl Fn(&Team<'_>) -> Result<(), HelperError> + Send + Sync + 'static) {
    if let Ok(mut h) = helper().lock() {
        *h = Some(Arc::new(f));
    }
}

/// Whether this program set a helper function.
pub(crate) fn has_helper() -> bool {
    helper().lock().is_ok_and(|h| h.is_some())
}

/// The processes recomputing one failed rank's lost interval together.
pub struct Team<'a> {
    pub(crate) comm: &'a dyn Comm,
    pub(crate) rank: Rank,
    pub(crate) world: usize,
}

impl<'a> Team<'a> {
    /// The team's own communicator: its rank is the part (0: the
    /// replacement), its size the number of parts.
    pub fn comm(&self) -> &'a dyn Comm {
        self.comm
    }

    /// This process's part (0: the replacement).
    pub fn part(&self) -> usize {
        self.comm.rank()
    }

    /// Processes in the team, the replacement included.
    pub fn parts(&self) -> usize {
        self.comm.size()
    }

    /// The failed rank whose work the team shares.
    pub fn rank(&self) -> Rank {
        self.rank
    }

    /// Ranks in the job.
    pub fn world_size(&self) -> usize {
        self.world
    }
}

/// The life of a helper process: say where it listens, wait for the
/// team, run the program's helper function, report what it used.
pub(crate) fn help(env: &RankEnv, agent: &Agent, rank: u32, epoch: u64, part: u32) -> u8 {
    let (started, cpu) = (Instant::now(), process_cpu_time());
    agent.send(FromRank::Teamed {
        epoch,
        part,
        endpoint: agent.endpoint.clone(),
    });
    let report = || {
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        agent.send_flushed(FromRank::Helped {
            wall_ms: ms(started.elapsed()),
            cpu_ms: ms(process_cpu_time().saturating_sub(cpu)),
        });
    };
    let Some(f) = helper().lock().ok().and_then(|h| h.clone()) else {
        report();
        return 0;
    };
    let table = loop {
        match agent.next() {
            Some(ToRank::TeamGo { team }) => break team,
            // The job ended or restarted globally: nothing to help.
            Some(ToRank::Finish | ToRank::Reinit { .. }) | None => return 0,
            Some(_) => {}
        }
    };
    let comm = NetComm::new(
        part as usize,
        env.spec.node,
        epoch,
        Arc::clone(&agent.hub),
        Arc::new(table),
        Arc::clone(&env.security),
    );
    let team = Team {
        comm: &comm,
        rank: rank as usize,
        world: env.spec.size as usize,
    };
    let outcome = catch_unwind(AssertUnwindSafe(|| f(&team)));
    if agent.hub.interrupted().is_some_and(|e| e > epoch) {
        return 0;
    }
    let reason = match outcome {
        Ok(Ok(())) => {
            report();
            return 0;
        }
        Ok(Err(e)) => e.to_string(),
        Err(p) => format!("panicked: {}", crate::panic_text(&*p)),
    };
    agent.send_flushed(FromRank::Abort { reason });
    1
}
