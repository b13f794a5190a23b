//! A node's manager on a rank of its own in an MPI job (the `mpi` feature):
//! the first rank of every node serves the node's manager instead of
//! running the program, and the other ranks form the program's
//! communicator.
//!
//! [`split`] is collective over the job's communicator. On a dedicated rank
//! it serves until every program rank of its node has let it go, then
//! returns [`Role::Served`]; the process then finalizes MPI and ends. On a
//! program rank it returns [`Role::Program`]: the program's communicator,
//! the node, and the [`Link`] to give
//! [`Checkpointer::init_with_manager`](crate::Checkpointer::init_with_manager).
//! A program rank lets its manager go when its [`Program`] is dropped (or
//! [`Program::release`]d), so a manager is never left waiting by a rank
//! that returns early.
//!
//! ```no_run
//! use frame::comm::mpi::{MpiComm, Nodes};
//! use frame::dedicated::{split, Role};
//! use frame::{config::Config, Checkpointer};
//!
//! let (universe, _) = mpi::initialize_with_threading(mpi::Threading::Serialized).unwrap();
//! let cfg = Config::load(None).unwrap();
//! let Role::Program(program) = split(&universe.world(), Nodes::from_config(&cfg), &cfg).unwrap() else {
//!     return; // this rank was its node's manager
//! };
//! let comm = MpiComm::with_node(program.comm(), program.node()).unwrap();
//! let mut ckpt = Checkpointer::init_with_manager(&cfg, &comm, Some(program.link().clone())).unwrap();
//! // ... protect, compute, snapshot ...
//! ckpt.finalize().unwrap();
//! ```
//!
//! Messages between a manager rank and its program ranks travel on a
//! private duplicate of the job's communicator: its address (as JSON, at
//! most [`MAX_ENDPOINT`] bytes; an empty message when it could not start,
//! so that the program ranks fail instead of waiting) and, later, one
//! message per program rank when it is done.

use super::{Link, Manager, Options};
use crate::auth::Secret;
use crate::comm::mpi::{placement, receive, Nodes};
use crate::comm::net::Bind;
use crate::config::Config;
use mpi::collective::SystemOperation;
use mpi::raw::AsRaw;
use mpi::topology::{Color, Communicator, SimpleCommunicator};
use mpi::traits::*;

/// Tag of a manager's message with its address.
const TAG_ENDPOINT: i32 = 1;
/// Tag of a program rank's message that it is done.
const TAG_DONE: i32 = 2;
/// The largest address message a program rank accepts.
pub const MAX_ENDPOINT: usize = 4096;

/// What [`split`] made of this rank.
pub enum Role {
    /// This rank served its node's manager; every program rank of its
    /// node is done.
    Served,
    /// This rank runs the program.
    Program(Program),
}

/// A program rank, tied to its node's manager rank.
pub struct Program {
    comm: SimpleCommunicator,
    node: u32,
    link: Link,
    _tie: Tie,
}

/// Lets the node's manager rank go when dropped.
struct Tie {
    job: SimpleCommunicator,
    manager: i32,
}

impl Drop for Tie {
    fn drop(&mut self) {
        self.job
            .process_at_rank(self.manager)
            .send_with_tag(&[0u8][..], TAG_DONE);
    }
}

impl Program {
    /// The program's communicator: every rank but the managers.
    pub fn comm(&self) -> &SimpleCommunicator {
        &self.comm
    }

    /// This rank's node.
    pub fn node(&self) -> u32 {
        self.node
    }

    /// Where the node's manager listens, with the job's secret.
    pub fn link(&self) -> &Link {
        &self.link
    }

    /// Lets the node's manager go (dropping does the same). Call it after
    /// the checkpointer finalized.
    pub fn release(self) {}
}

/// Makes the first rank of every node (grouped as `nodes` says) its
/// node's manager and the others the program. Collective over `job`; see
/// the module documentation. Fails on a node of one rank (no rank would be
/// left for the program), the same way on every rank of that node.
pub fn split(job: &impl Communicator, nodes: Nodes, cfg: &Config) -> Result<Role, String> {
    let job = job.duplicate();
    let place = placement(&job, nodes).map_err(|e| e.to_string())?;
    let mut smallest = 0i32;
    let mine = i32::try_from(place.node_ranks.len()).unwrap_or(i32::MAX);
    job.all_reduce_into(&mine, &mut smallest, SystemOperation::min());
    if smallest < 2 {
        return Err(
            "a node has a single rank: with a manager rank per node, every node needs at least 2"
                .into(),
        );
    }
    let secret = shared_secret(&job)?;
    let manager = place.node_ranks[0];
    let is_manager = job.rank() == manager;
    let color = if is_manager {
        Color::undefined()
    } else {
        Color::with_value(0)
    };
    let program = job.split_by_color_with_key(color, job.rank());
    let members = &place.node_ranks[1..];
    if is_manager {
        serve(&job, place.node, members, cfg, secret);
        return Ok(Role::Served);
    }
    // From here on, every way out lets the manager go.
    let tie = Tie { job, manager };
    let node = place.node;
    let bytes = receive(tie.job.as_raw(), manager, TAG_ENDPOINT, || {}).unwrap_or_default();
    if bytes.is_empty() || bytes.len() > MAX_ENDPOINT {
        return Err(format!(
            "the manager of node {node} (rank {manager}) did not start (see its message)"
        ));
    }
    let endpoint = serde_json::from_slice(&bytes)
        .map_err(|e| format!("the manager of node {node} sent an unreadable address: {e}"))?;
    let comm = program.ok_or("MPI gave a program rank no communicator")?;
    Ok(Role::Program(Program {
        comm,
        node,
        link: Link { endpoint, secret },
        _tie: tie,
    }))
}

/// The job's secret, made by rank 0 and sent to all (zeros when rank 0
/// could not make one: every rank then fails).
fn shared_secret(job: &SimpleCommunicator) -> Result<Secret, String> {
    let mut hex = [0u8; 64];
    if job.rank() == 0 {
        if let Ok(s) = Secret::generate() {
            hex.copy_from_slice(s.to_hex().as_bytes());
        }
    }
    job.process_at_rank(0).broadcast_into(&mut hex[..]);
    Secret::from_hex(&String::from_utf8_lossy(&hex))
        .ok_or_else(|| "rank 0 could not make the job's secret".to_string())
}

/// Runs the manager of `node` until every one of `members` is done.
fn serve(job: &SimpleCommunicator, node: u32, members: &[i32], cfg: &Config, secret: Secret) {
    // Under MPI no runtime gives the node a directory of its own.
    let root = crate::safefs::private_root(&cfg.storage.local_dir);
    let local_dir = crate::node::NodePlace::standalone(node).local_dir(
        root.as_deref().unwrap_or(&cfg.storage.local_dir),
        cfg.topology.ranks_per_node > 0,
    );
    let started = root
        .and_then(|_| crate::safefs::Dir::open_or_create(&local_dir))
        .map_err(|e| e.to_string())
        .and_then(|_| {
            let bind = match cfg.manager.address.parse() {
                Ok(ip) => Bind::Tcp(ip),
                Err(_) => Bind::Unix(super::socket_in(&local_dir, &cfg.job.id, node)),
            };
            Manager::start(Options {
                node,
                local_dir: local_dir.clone(),
                queue: cfg.manager.queue as usize,
                when_full: cfg.manager.when_full,
                bind,
                secret,
                peer_listener: None,
            })
            .map_err(|e| e.to_string())
        });
    let message = match &started {
        Ok(m) => serde_json::to_vec(m.endpoint()).unwrap_or_default(),
        Err(e) => {
            eprintln!(
                "frame: the manager of node {node} cannot start in {}: {e}",
                local_dir.display()
            );
            Vec::new()
        }
    };
    for m in members {
        job.process_at_rank(*m)
            .send_with_tag(&message[..], TAG_ENDPOINT);
    }
    // Waiting without spinning: the manager's threads need the core.
    // A member that failed is done too.
    for m in members {
        let _ = receive(job.as_raw(), *m, TAG_DONE, || {});
    }
    drop(started);
}
