//! The life of a rank process: wait at the world barrier, run the resilient
//! function, roll back and re-enter on every recovery, finish together.

use super::agent::{Agent, Began};
use super::context::{Context, Faults};
use super::handoff::RankEnv;
use super::inject::Trigger;
use super::proto::{FromRank, Table, ToRank};
use super::State;
use frame::comm::net::NetComm;
use frame::comm::LocalComm;
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::fmt::Display;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::Arc;

/// How long a finished logging rank waits for a replacement's request
/// before it looks at its daemon's messages again.
const SERVE_PERIOD: std::time::Duration = std::time::Duration::from_millis(20);

/// Runs `f` as a rank of a job started by a frame runtime.
pub(crate) fn main<F, E>(mut f: F) -> u8
where
    F: FnMut(&mut Context<'_>) -> Result<(), E>,
    E: Display,
{
    let env = match RankEnv::from_env() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("frame: {e}");
            return 2;
        }
    };
    let agent = match Agent::start(&env) {
        Ok(a) => a,
        Err(e) => {
            eprintln!(
                "frame: node {} rank process {}: {e}",
                env.spec.node,
                std::process::id()
            );
            return 2;
        }
    };
    // A replacement's way back begins when its process starts, or when a
    // standby is given the rank.
    let mut arrived = Began::now(env.epoch);
    // A standby process waits, fully started, until it replaces a failed rank.
    let (rank, mut epoch) = match env.rank {
        Some(r) => (r, env.epoch),
        None => loop {
            match agent.next() {
                Some(ToRank::Assign { rank, epoch }) => {
                    arrived = Began::now(epoch);
                    break (rank, epoch);
                }
                Some(ToRank::Help {
                    rank, epoch, part, ..
                }) => return super::team::help(&env, &agent, rank, epoch, part),
                Some(ToRank::Finish) | None => return 0,
                Some(_) => {}
            }
        },
    };
    let mut fired: BTreeSet<u32> = BTreeSet::new();
    let mut entered = false;
    // A recovery into `e` began: maybe die here (injected), else report ready.
    let rejoin = |e: u64, fired: &BTreeSet<u32>| {
        let recovery = e.saturating_sub(1);
        let due = env.spec.injections.iter().find(|(idx, inj)| {
            inj.trigger == Trigger::Reinit(recovery)
                && inj.targets(rank, env.spec.node)
                && !fired.contains(idx)
        });
        if let Some((idx, inj)) = due {
            let faults = Faults {
                agent: &agent,
                injections: &env.spec.injections,
                fired: RefCell::new(fired.clone()),
            };
            faults.fire(*idx, inj);
        }
        agent.ready(e);
    };
    rejoin(epoch, &fired);
    // Where every rank listens, as the releases so far said, and the
    // connections each epoch's communicator leaves to the next.
    let mut table: Option<Arc<Vec<frame::comm::net::Endpoint>>> = None;
    let links = frame::comm::net::Links::new();
    loop {
        let go = loop {
            match agent.next() {
                None => return 3,
                Some(ToRank::Go { mut go }) => {
                    // Every release updates the table, in the order the
                    // daemon sent them, whichever epoch it is for.
                    let update = std::mem::replace(&mut go.table, Table::Changed(Vec::new()));
                    table = update.apply(table.as_ref());
                    if table.is_none() {
                        eprintln!("frame: rank {rank}: a release changed an address table this rank never had");
                        return 3;
                    }
                    if go.epoch == epoch {
                        break go;
                    }
                }
                Some(ToRank::Reinit { epoch: e }) if e > epoch => {
                    epoch = e;
                    rejoin(e, &fired);
                }
                Some(_) => {}
            }
        };
        let released_ns = crate::proto::now_ns();
        let began = agent.began(epoch).unwrap_or(arrived);
        fired.extend(go.fired.iter().copied());
        agent
            .hub
            .poll_before_sleeping(!crate::crowding::crowded(&env.spec));
        let mut comm = NetComm::new(
            rank as usize,
            env.spec.node,
            epoch,
            Arc::clone(&agent.hub),
            table.clone().unwrap_or_default(),
            Arc::clone(&env.security),
        )
        .with_links(Arc::clone(&links));
        if let Some(limit) = env.spec.log_limit {
            comm = comm
                .with_journal(limit)
                .with_own_endpoint(agent.endpoint.clone())
                .with_fallback(agent.fallback(epoch))
                .with_replay_notes(agent.replay_notes());
        }
        let comm = comm
            .with_recovery(frame::comm::RecoveryContext {
                epoch,
                launch: env.spec.launched_ns,
                failed: go.failed.clone(),
                placement: go.nodes.clone(),
                committed: go.committed,
                rejoin: go.rejoin,
                stand_in: go.stand_in.as_deref().cloned(),
                stood_in: go.stood_in.clone(),
                reentry: Some(frame::comm::Reentry {
                    began_ns: began.at_ns,
                    released_ns,
                    cpu_at_began_ns: began.cpu_ns,
                }),
            })
            .with_commit_notes(agent.commit_notes())
            .with_end_confirm(agent.end_confirm(epoch))
            .with_lost_peers(agent.lost_peers(epoch))
            .with_runtime_node(frame::internals::node::RuntimeNode {
                dir: env.spec.node_dir.clone(),
                manager: env.manager.clone(),
                manager_peer: env.manager_peer,
                secret: env.security.secret.clone(),
            });
        // A replacement with helpers: its team's communicator.
        let team_comm = if go.rejoin && !go.helpers.is_empty() && super::team::has_helper() {
            match agent.listen_team(&env) {
                Ok((hub, endpoint)) => {
                    agent.send(FromRank::Teamed {
                        epoch,
                        part: 0,
                        endpoint: endpoint.clone(),
                    });
                    let mut table = vec![endpoint];
                    table.extend(go.helpers.iter().cloned());
                    Some(NetComm::new(
                        0,
                        env.spec.node,
                        epoch,
                        hub,
                        Arc::new(table),
                        Arc::clone(&env.security),
                    ))
                }
                Err(e) => {
                    // Its helpers wait in vain; the recomputation is its own.
                    tracing::warn!(error = %e, "cannot listen for the helpers");
                    None
                }
            }
        } else {
            None
        };
        let state = if entered { State::Reinited } else { env.state };
        entered = true;
        let mut ctx = Context {
            comm: &comm,
            state,
            epoch,
            failed_ranks: go.failed.ranks.iter().map(|r| *r as usize).collect(),
            failed_nodes: go.failed.nodes.iter().copied().collect(),
            node_dir: env.spec.node_dir.clone(),
            launcher_pid: Some(env.spec.launcher_pid),
            faults: Some(Faults {
                agent: &agent,
                injections: &env.spec.injections,
                fired: RefCell::new(fired.clone()),
            }),
            team: team_comm.as_ref().map(|c| crate::Team {
                comm: c,
                rank: rank as usize,
                world: env.spec.size as usize,
            }),
            #[cfg(feature = "ulfm")]
            mpi: None,
        };
        let outcome = catch_unwind(AssertUnwindSafe(|| f(&mut ctx)));
        if let Some(faults) = ctx.faults.take() {
            fired.extend(faults.fired.into_inner());
        }
        drop(ctx);
        if let Some(e) = agent.hub.interrupted().filter(|e| *e > epoch) {
            epoch = e;
            rejoin(e, &fired);
            continue;
        }
        // A logging rank keeps its log until the job ends: a replacement
        // still recomputing may ask for it.
        let serving = env.spec.log_limit.is_some().then_some(comm);
        match outcome {
            Ok(Ok(())) => {
                agent.send(FromRank::Done { epoch });
                loop {
                    let next = match &serving {
                        Some(comm) => {
                            if let Err(e) = comm.serve_requests_within(SERVE_PERIOD) {
                                tracing::warn!(error = %e, "could not serve a replacement");
                            }
                            match agent.next_within(std::time::Duration::ZERO) {
                                Ok(None) => continue,
                                Ok(Some(m)) => Some(m),
                                Err(()) => None,
                            }
                        }
                        None => agent.next(),
                    };
                    match next {
                        Some(ToRank::Finish) | None => return 0,
                        Some(ToRank::Reinit { epoch: e }) if e > epoch => {
                            epoch = e;
                            rejoin(e, &fired);
                            break;
                        }
                        Some(_) => {}
                    }
                }
            }
            Ok(Err(e)) => {
                agent.send_flushed(FromRank::Abort {
                    reason: e.to_string(),
                });
                return 1;
            }
            Err(p) => {
                agent.send_flushed(FromRank::Abort {
                    reason: format!("panicked: {}", crate::panic_text(&*p)),
                });
                return 101;
            }
        }
    }
}

/// Runs `f` once as the only rank, when no runtime started this process.
pub(crate) fn standalone<F, E>(mut f: F) -> u8
where
    F: FnMut(&mut Context<'_>) -> Result<(), E>,
    E: Display,
{
    let comm = match LocalComm::world(1, 1).pop() {
        Some(c) => c,
        None => return 2,
    };
    let node_dir = frame::env::var_os(&frame::env::config_var("storage.local_dir"))
        .map(PathBuf::from)
        .unwrap_or_else(|| frame::config::Config::default().storage.local_dir);
    let mut ctx = Context {
        comm: &comm,
        state: State::New,
        epoch: 1,
        failed_ranks: Vec::new(),
        failed_nodes: Vec::new(),
        node_dir,
        launcher_pid: None,
        faults: None,
        team: None,
        #[cfg(feature = "ulfm")]
        mpi: None,
    };
    match f(&mut ctx) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("error: {e}");
            1
        }
    }
}
