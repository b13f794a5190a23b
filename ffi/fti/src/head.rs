//! Dedicated ranks (`head = 1`): the first rank of every node runs the
//! node's manager instead of the program, as FTI's heads do. It never
//! returns from `FTI_Init`: it serves until every program rank of its node
//! has called `FTI_Finalize`, then finalizes MPI and exits.
//!
//! The head tells its node's program ranks where its manager listens (one
//! message each on the job's private duplicate of the world communicator),
//! and each of them tells it when it is done.

use frame_core::auth::Secret;
use frame_core::comm::net::{Bind, Endpoint};
use frame_core::config::Config;
use frame_core::manager::{Link, Manager, Options};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;

/// Tag of the head's message with its manager's endpoint.
const TAG_ENDPOINT: i32 = 1;
/// Tag of a program rank's message that it finalized.
const TAG_DONE: i32 = 2;
/// The largest endpoint message a program rank accepts.
const MAX_ENDPOINT: usize = 4096;

/// A program rank's tie to its node's head.
pub(crate) struct Heads {
    world: SimpleCommunicator,
    head: i32,
}

impl Heads {
    /// Waits for the head's endpoint. Fails on a message that is not one.
    pub fn join(
        world: SimpleCommunicator,
        head: i32,
        secret: Secret,
    ) -> Result<(Self, Link), String> {
        let (bytes, _) = world
            .process_at_rank(head)
            .receive_vec_with_tag::<u8>(TAG_ENDPOINT);
        if bytes.len() > MAX_ENDPOINT {
            return Err(format!(
                "the head (rank {head}) sent {} bytes for its address",
                bytes.len()
            ));
        }
        let endpoint: Endpoint = serde_json::from_slice(&bytes)
            .map_err(|e| format!("the head (rank {head}) sent an unreadable address: {e}"))?;
        Ok((Self { world, head }, Link { endpoint, secret }))
    }

    /// Tells the head this rank is done with it.
    pub fn release(self) {
        self.world
            .process_at_rank(self.head)
            .send_with_tag(&[0u8][..], TAG_DONE);
    }
}

/// Runs the manager of `node` for the program ranks `members` (world
/// ranks), then ends the process. Start-up problems are sent to the
/// members in place of an endpoint (an empty message), so that they fail
/// instead of waiting.
pub(crate) fn serve(
    world: &SimpleCommunicator,
    node: u32,
    members: &[i32],
    cfg: &Config,
    secret: Secret,
) -> ! {
    let local_dir = cfg.local_dir_of(node, false);
    let started = frame_core::safefs::Dir::open_or_create(&local_dir)
        .map_err(|e| e.to_string())
        .and_then(|_| {
            let bind = match cfg.manager.address.parse() {
                Ok(ip) => Bind::Tcp(ip),
                Err(_) => {
                    Bind::Unix(local_dir.join(format!(".manager-{}-node-{node}.sock", cfg.job.id)))
                }
            };
            Manager::start(Options {
                node,
                local_dir: local_dir.clone(),
                queue: cfg.manager.queue as usize,
                when_full: cfg.manager.when_full,
                bind,
                secret,
            })
            .map_err(|e| e.to_string())
        });
    let message = match &started {
        Ok(m) => serde_json::to_vec(m.endpoint()).unwrap_or_default(),
        Err(e) => {
            eprintln!(
                "frame (FTI): head of node {node}: cannot start the manager in {}: {e}",
                local_dir.display()
            );
            Vec::new()
        }
    };
    for m in members {
        world
            .process_at_rank(*m)
            .send_with_tag(&message[..], TAG_ENDPOINT);
    }
    for m in members {
        let _ = world
            .process_at_rank(*m)
            .receive_vec_with_tag::<u8>(TAG_DONE);
    }
    drop(started);
    // SAFETY: the program initialised MPI; this process makes no MPI call
    // after this one.
    unsafe { mpi::ffi::MPI_Finalize() };
    std::process::exit(0)
}
