//! `FTI_Init` and `FTI_Finalize`: the configuration file, the nodes, the
//! dedicated ranks, the program's communicator and the checkpointer.
//!
//! Every problem found before the checkpointer exists is agreed among all
//! ranks (one all-reduce), so either every rank returns from `FTI_Init` with
//! an error or none does: a bad file or a wrong `node_size` never leaves
//! some ranks waiting for others.

use crate::head::{self, Heads};
use crate::session::{self, Session};
use crate::status::{guard, Failure, FTI_SCES};
use frame_core::auth::Secret;
use frame_core::comm::mpi::MpiComm;
use frame_core::config::fti::FtiFile;
use frame_core::config::{Config, Interval, Source};
use frame_core::Checkpointer;
use mpi::collective::SystemOperation;
use mpi::ffi::MPI_Comm;
use mpi::raw::{AsRaw, FromRaw};
use mpi::topology::{Color, SimpleCommunicator};
use mpi::traits::*;
use std::ffi::CStr;
use std::os::raw::{c_char, c_int};

/// The program's communicator: every rank but the dedicated ones. Set by
/// `FTI_Init`.
#[no_mangle]
pub static mut FTI_COMM_WORLD: MPI_Comm = unsafe { std::mem::zeroed() };

/// Where this rank stands in the job.
struct Place {
    node: u32,
    /// World ranks of this node, ascending.
    node_ranks: Vec<i32>,
}

/// Duplicates `comm` into a communicator frame owns.
fn duplicate(comm: MPI_Comm) -> Result<SimpleCommunicator, Failure> {
    let mut dup = std::mem::MaybeUninit::<MPI_Comm>::uninit();
    // SAFETY: `comm` is the program's live communicator; MPI writes `dup`.
    let rc = unsafe { mpi::ffi::MPI_Comm_dup(comm, dup.as_mut_ptr()) };
    if rc != 0 {
        return Err(Failure::new(
            "MPI_Comm_dup of the communicator given to FTI_Init failed",
        ));
    }
    // SAFETY: written by a successful MPI_Comm_dup: a new communicator
    // owned by the returned value alone (and an intra-communicator: the
    // checks of this crate's MPI calls abort the job otherwise).
    Ok(unsafe { SimpleCommunicator::from_raw(dup.assume_init()) })
}

/// Every rank's local problem, agreed: all ranks fail if any does, each
/// with its own message or the first failing rank's number.
fn agree(world: &SimpleCommunicator, local: Result<(), String>) -> Result<(), Failure> {
    let mine = if local.is_err() {
        world.rank()
    } else {
        i32::MAX
    };
    let mut first = i32::MAX;
    world.all_reduce_into(&mine, &mut first, SystemOperation::min());
    match (local, first) {
        (Err(e), _) => Err(Failure::new(e)),
        (Ok(()), i32::MAX) => Ok(()),
        (Ok(()), rank) => Err(Failure::new(format!(
            "rank {rank} could not initialise FTI (see its message)"
        ))),
    }
}

/// Reads the configuration file on this rank.
fn read_config(path: *const c_char) -> Result<FtiFile, String> {
    if path.is_null() {
        return Err("the configuration file name is null".into());
    }
    // SAFETY: checked non-null; C passes a NUL-terminated string.
    let path = unsafe { CStr::from_ptr(path) }
        .to_string_lossy()
        .into_owned();
    FtiFile::load(&path, std::env::vars()).map_err(|e| e.to_string())
}

/// Finds this rank's node from the configuration, and checks `node_size`.
fn place(world: &SimpleCommunicator, fti: &FtiFile) -> Result<Place, String> {
    let (rank, size) = (world.rank(), world.size());
    let per = fti.node_size as i32;
    if fti.local_test {
        if size % per != 0 {
            return Err(format!(
                "{}: [basic] node_size = {per}: {size} ranks do not form whole nodes of {per} ranks (local_test = 1)",
                fti.path.display()
            ));
        }
        let node = rank / per;
        return Ok(Place {
            node: node as u32,
            node_ranks: (node * per..node * per + per).collect(),
        });
    }
    let local = world.split_shared(rank);
    let mut node_ranks = vec![0i32; local.size() as usize];
    local.all_gather_into(&rank, &mut node_ranks[..]);
    let leader = node_ranks.iter().copied().min().unwrap_or(rank);
    let mut leaders = vec![0i32; size as usize];
    world.all_gather_into(&leader, &mut leaders[..]);
    leaders.sort_unstable();
    leaders.dedup();
    let node = leaders.iter().position(|l| *l == leader).unwrap_or(0) as u32;
    if local.size() != per {
        return Err(format!(
            "{}: [basic] node_size = {per}: node {node} runs {} ranks but node_size = {per} (set local_test = 1 to form virtual nodes on one host)",
            fti.path.display(),
            local.size()
        ));
    }
    Ok(Place { node, node_ranks })
}

/// frame's configuration for this program: FTI's, a job id from the
/// program's name unless one is configured, and every level available to
/// `FTI_Checkpoint` even when its interval is 0.
fn frame_config(fti: &FtiFile) -> Config {
    let mut cfg = fti.config.clone();
    if cfg.source_of("job.id") == Source::Default || cfg.job.id == "fti" {
        if let Some(name) = program_name() {
            cfg.job.id = name;
        }
    }
    for interval in [
        &mut cfg.l2.interval,
        &mut cfg.l3.interval,
        &mut cfg.l4.interval,
    ] {
        if interval.is_zero() {
            *interval = Interval::Calls(u64::MAX);
        }
    }
    cfg
}

/// The program's file name as a job id (`fti-<name>`).
fn program_name() -> Option<String> {
    let exe = std::env::current_exe().ok()?;
    let name: String = exe
        .file_name()?
        .to_string_lossy()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(60)
        .collect();
    Some(format!("fti-{name}"))
}

/// Sets up logging at the file's verbosity, once per process; `rank` is
/// the rank in the program's communicator (-1 for a dedicated rank).
fn start_logging(verbosity: u8, rank: i32) {
    use tracing_subscriber::filter::LevelFilter;
    let level = match verbosity {
        1 => LevelFilter::DEBUG,
        2 if rank == 0 => LevelFilter::INFO,
        2 => LevelFilter::WARN,
        3 => LevelFilter::ERROR,
        _ => LevelFilter::OFF,
    };
    let _ = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
}

/// The job's secret, made by world rank 0 and sent to all.
fn shared_secret(world: &SimpleCommunicator) -> Result<Secret, Failure> {
    let mut hex = [0u8; 64];
    if world.rank() == 0 {
        let s = Secret::generate()
            .map_err(|e| Failure::new(format!("cannot make the job's secret: {e}")))?;
        hex.copy_from_slice(s.to_hex().as_bytes());
    }
    world.process_at_rank(0).broadcast_into(&mut hex[..]);
    Secret::from_hex(&String::from_utf8_lossy(&hex))
        .ok_or_else(|| Failure::new("the job's secret did not arrive whole"))
}

/// Initialises FTI: reads `config_file` (FTI's INI format), finds the nodes,
/// starts the managers and finds a checkpoint to recover. Returns
/// `FTI_SCES`, `FTI_NREC` when the file asks for a restart
/// (`failure` != 0) but no checkpoint is recoverable, or `FTI_NSCS`.
/// With `head = 1`, the first rank of every node does not return.
///
/// # Safety
/// `config_file` must be null or a NUL-terminated string, and MPI must be
/// initialised, with `global_comm` a live intra-communicator.
#[no_mangle]
pub unsafe extern "C" fn FTI_Init(config_file: *const c_char, global_comm: MPI_Comm) -> c_int {
    guard("FTI_Init", || {
        if session::is_open() {
            return Err(Failure::new(
                "FTI is already initialised (call FTI_Finalize first)",
            ));
        }
        let world = duplicate(global_comm)?;
        session::set_rank(world.rank() as usize);
        let fti = read_config(config_file);
        let fti = agree(&world, fti.as_ref().map(|_| ()).map_err(Clone::clone))
            .and_then(|()| fti.map_err(Failure::new))?;
        session::set_silent(fti.verbosity >= 4);
        let placed = place(&world, &fti);
        agree(&world, placed.as_ref().map(|_| ()).map_err(Clone::clone))?;
        let place = placed.map_err(Failure::new)?;
        if world.rank() == 0 && !session::silent() {
            for w in &fti.warnings {
                eprintln!("frame (FTI): warning: {w}");
            }
        }
        let cfg = frame_config(&fti);
        let (app, heads, link) = if fti.head {
            let secret = shared_secret(&world)?;
            let head = place.node_ranks[0];
            let is_head = world.rank() == head;
            let color = if is_head {
                Color::undefined()
            } else {
                Color::with_value(0)
            };
            let app = world.split_by_color_with_key(color, world.rank());
            let Some(app) = app else {
                start_logging(fti.verbosity, -1);
                let members = &place.node_ranks[1..];
                head::serve(&world, place.node, members, &cfg, secret)
            };
            let (heads, link) = Heads::join(world, head, secret).map_err(Failure::new)?;
            (app, Some(heads), Some(link))
        } else {
            (world, None, None)
        };
        start_logging(fti.verbosity, app.rank());
        let program = duplicate(app.as_raw())?;
        // SAFETY: written once here, before the program can read it; the
        // communicator stays alive for the rest of the process.
        unsafe { FTI_COMM_WORLD = program.as_raw() };
        std::mem::forget(program);
        let comm: &'static MpiComm = Box::leak(Box::new(MpiComm::with_node(&app, place.node)?));
        let ckpt = match Checkpointer::init_with_manager(&cfg, comm, link) {
            Ok(c) => c,
            Err(e) => {
                if let Some(h) = heads {
                    h.release();
                }
                return Err(e.into());
            }
        };
        let recovering = ckpt.recovering();
        let restart = fti.restart;
        session::open(Session {
            comm,
            ckpt,
            fti,
            vars: Default::default(),
            recovering,
            recovering_vars: false,
            icp: None,
            heads,
        });
        if restart && !recovering {
            return Err(Failure::no_recovery(
                "the configuration asks for a restart ([restart] failure), but no checkpoint is recoverable",
            ));
        }
        Ok(FTI_SCES)
    })
}

/// Ends FTI: waits for the promotions in flight, removes the checkpoints
/// unless `keep_last_ckpt = 1`, and releases the node's dedicated rank.
/// Collective.
#[no_mangle]
pub extern "C" fn FTI_Finalize() -> c_int {
    guard("FTI_Finalize", || {
        session::take()?.close()?;
        Ok(FTI_SCES)
    })
}
