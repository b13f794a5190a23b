//! `FTI_Init` and `FTI_Finalize`: the configuration file, the nodes, the
//! dedicated ranks, the program's communicator and the checkpointer.
//!
//! Every problem found before the checkpointer exists is agreed among all
//! ranks (one all-reduce), so either every rank returns from `FTI_Init` with
//! an error or none does: a bad file or a wrong `node_size` never leaves
//! some ranks waiting for others.

use crate::restart;
use crate::session::{self, Session};
use crate::status::{guard, Failure, SaidBy, FTI_SCES};
use frame_core::comm::mpi::{placement, MpiComm, Nodes, Placement};
use frame_core::config::fti::FtiFile;
use frame_core::config::{Config, Interval, Source};
use frame_core::dedicated::{self, Role};
use frame_core::Checkpointer;
use mpi::collective::SystemOperation;
use mpi::ffi::MPI_Comm;
use mpi::raw::{AsRaw, FromRaw};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use std::ffi::CStr;
use std::os::raw::{c_char, c_int};
use std::path::PathBuf;

/// The program's communicator: every rank but the dedicated ones. Set by
/// `FTI_Init`.
#[no_mangle]
// SAFETY: a communicator handle is plain data, and all zeros its null
// value until `FTI_Init` sets it.
pub static mut FTI_COMM_WORLD: MPI_Comm = unsafe { std::mem::zeroed() };

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

/// Agrees on whether every rank's `local` step succeeded: an error on any
/// rank fails the call on all. The first failing rank's message is said
/// once: by rank 0 alone, without a rank, when every rank failed with it;
/// otherwise by that rank, and by each other failing rank whose message
/// differs. Ranks that did not fail say nothing (another rank says why).
/// Collective.
fn agree(world: &SimpleCommunicator, local: Result<(), String>) -> Result<(), Failure> {
    let me = world.rank();
    let mine = if local.is_err() { me } else { i32::MAX };
    let mut first = i32::MAX;
    world.all_reduce_into(&mine, &mut first, SystemOperation::min());
    if first == i32::MAX {
        return Ok(());
    }
    let mut text = match (&local, me == first) {
        (Err(e), true) => e.clone().into_bytes(),
        _ => Vec::new(),
    };
    let mut len = text.len() as u64;
    let root = world.process_at_rank(first);
    root.broadcast_into(&mut len);
    text.resize(usize::try_from(len).unwrap_or(0), 0);
    root.broadcast_into(&mut text[..]);
    let said = String::from_utf8_lossy(&text).into_owned();
    let alike = i32::from(local.as_ref().err() == Some(&said));
    let mut all_alike = 0;
    world.all_reduce_into(&alike, &mut all_alike, SystemOperation::logical_and());
    let who = match &local {
        _ if all_alike != 0 => SaidBy::Lowest,
        Err(e) if me == first || *e != said => SaidBy::This,
        _ => SaidBy::Another,
    };
    let message = local
        .err()
        .unwrap_or_else(|| format!("rank {first} could not initialise FTI: {said}"));
    Err(Failure::new(message).said_by(who))
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
    let mut fti = FtiFile::load(&path, std::env::vars()).map_err(|e| e.to_string())?;
    // The directories as frame uses them (a private one inside a shared
    // RAM disk), so that earlier executions' checkpoints are found there.
    fti.config
        .private_storage_roots()
        .map_err(|e| e.to_string())?;
    Ok(fti)
}

/// The nodes of the configuration.
fn nodes(fti: &FtiFile) -> Nodes {
    if fti.local_test {
        Nodes::Consecutive(fti.node_size as usize)
    } else {
        Nodes::Shared
    }
}

/// Finds this rank's node and checks `node_size` against it.
fn place(world: &SimpleCommunicator, fti: &FtiFile) -> Result<Placement, String> {
    let per = fti.node_size as i32;
    let size = world.size();
    let whole = !fti.local_test || size % per == 0;
    // Collective: every rank takes part before any error is returned.
    let place = placement(world, nodes(fti)).map_err(|e| e.to_string())?;
    let key = format!("{}: [basic] node_size = {per}", fti.path.display());
    if !whole {
        return Err(format!(
            "{key}: {size} ranks do not form whole nodes of {per} ranks (local_test = 1)"
        ));
    }
    if place.node_ranks.len() != per as usize {
        return Err(format!(
            "{key}: node {} runs {} ranks (set local_test = 1 to form virtual nodes on one host)",
            place.node,
            place.node_ranks.len()
        ));
    }
    Ok(place)
}

/// frame's configuration for this program: FTI's, a job id from the
/// program's name and the execution unless one is configured, and every
/// level available to `FTI_Checkpoint` even when its interval is 0.
fn frame_config(fti: &FtiFile, exec_id: &str) -> Config {
    let mut cfg = fti.config.clone();
    if cfg.source_of("job.id") == Source::Default {
        if let Some(job) = job_of(exec_id) {
            cfg.job.id = job;
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

/// The execution this run belongs to: on a restart (`failure` 1 or 2) the
/// file's `exec_id`, else a new one, rank 0's, sent to every rank.
/// Collective.
fn execution(world: &SimpleCommunicator, fti: &FtiFile) -> Result<String, Failure> {
    if fti.restart {
        return fti.exec_id.clone().ok_or_else(|| {
            Failure::no_recovery(format!(
                "{}: [restart] failure = {} asks for a restart, but exec_id names no execution",
                fti.path.display(),
                fti.failure
            ))
        });
    }
    let mut id = [0u8; 64];
    if world.rank() == 0 {
        // A second's resolution, as FTI's: an execution started within
        // the same second as one whose files exist gets a suffix.
        let base = restart::new_exec_id();
        let new = (0u32..)
            .map(|k| match k {
                0 => base.clone(),
                k => format!("{base}.{k}"),
            })
            .find(|id| job_dir(&fti.config, id).is_none())
            .unwrap_or(base);
        let n = new.len().min(id.len());
        id[..n].copy_from_slice(&new.as_bytes()[..n]);
    }
    world.process_at_rank(0).broadcast_into(&mut id[..]);
    let end = id.iter().position(|b| *b == 0).unwrap_or(id.len());
    Ok(String::from_utf8_lossy(&id[..end]).into_owned())
}

/// A directory of execution `exec_id`'s job (in the global directory, the
/// local one or a node's below it), if this rank sees one.
fn job_dir(cfg: &Config, exec_id: &str) -> Option<PathBuf> {
    let job = job_of(exec_id)?;
    let local = &cfg.storage.local_dir;
    let nodes = std::fs::read_dir(local)
        .map(|d| d.flatten().map(|e| e.path()).collect::<Vec<_>>())
        .unwrap_or_default();
    std::iter::once(cfg.storage.global_dir.join(&job))
        .chain(std::iter::once(local.join(&job)))
        .chain(nodes.iter().map(|n| n.join(&job)))
        .find(|p| p.is_dir())
}

/// Whether a checkpoint file (a rank's data file, or a level-4 manifest)
/// lies below `dir`: a finished execution leaves only empty directories.
/// Looks at most four levels down and at 10,000 entries.
fn holds_checkpoints(dir: &std::path::Path) -> bool {
    let mut stack = vec![(dir.to_path_buf(), 0)];
    let mut seen = 0;
    while let Some((d, depth)) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            seen += 1;
            if seen > 10_000 {
                return false;
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            match entry.file_type() {
                Ok(t) if t.is_dir() && depth < 4 => stack.push((entry.path(), depth + 1)),
                Ok(t) if t.is_file() && (name.ends_with(".fck") || name.ends_with(".l4.json")) => {
                    return true
                }
                _ => {}
            }
        }
    }
    false
}

/// Says (on the program's rank 0) that a new execution leaves the
/// checkpoints of the one the file named before alone, where they exist.
fn note_older_execution(fti: &FtiFile, exec_id: &str) {
    let Some(old) = fti.exec_id.as_deref().filter(|old| *old != exec_id) else {
        return;
    };
    let held = job_dir(&fti.config, old).filter(|d| holds_checkpoints(d));
    if let Some(dir) = held {
        crate::say::info(format_args!(
            "starting execution {exec_id} ([restart] failure = 0); the checkpoints of execution {old} are kept in {} (set failure = 1 and exec_id = {old} to restart from them)",
            dir.display()
        ));
    }
}

/// The job id of execution `exec_id` of this program
/// (`fti-<program>-<exec_id>`).
fn job_of(exec_id: &str) -> Option<String> {
    Some(format!(
        "{}-{}",
        program_name()?,
        restart::job_part(exec_id)
    ))
}

/// The program's file name as the start of a job id (`fti-<name>`).
fn program_name() -> Option<String> {
    let exe = std::env::current_exe().ok()?;
    let name = exe.file_name()?.to_string_lossy().into_owned();
    Some(format!("fti-{}", restart::job_part(&name)))
}

/// Sets up logging at the file's verbosity, once per process; `rank` is
/// the rank in the program's communicator (-1 for a dedicated rank). Lines
/// read `[ frame-FTI  Warning ] : ...`; `RUST_LOG` overrides the verbosity.
fn start_logging(verbosity: u8, rank: i32) {
    let level = match verbosity {
        1 => "debug",
        2 if rank == 0 => "info",
        2 => "warn",
        3 => "error",
        _ => "off",
    };
    frame_log::init(frame_log::Style::Fti, level);
}

/// Initialises FTI: reads `config_file` (FTI's INI format), finds the nodes,
/// starts the managers and finds a checkpoint to recover. Returns
/// `FTI_SCES`, `FTI_NREC` when the file asks for a restart
/// (`failure` != 0) but no checkpoint is recoverable, or when the job's
/// checkpoints exist but not every rank can restore one (nothing is
/// deleted and no session is opened), or `FTI_NSCS`.
/// With `head = 1`, the first rank of every node does not return.
///
/// # Safety
/// `config_file` must be null or a NUL-terminated string, and MPI must be
/// initialised, with `global_comm` a live intra-communicator.
#[no_mangle]
pub unsafe extern "C" fn FTI_Init(config_file: *const c_char, global_comm: MPI_Comm) -> c_int {
    guard("FTI_Init", || {
        if session::is_open() {
            // As FTI: initialised again. The previous session ends as at
            // a crash, so the new one finds its checkpoints.
            if session::with(|s| Ok(s.program.is_some()))? {
                return Err(Failure::new(
                    "FTI is already initialised with head = 1: its manager ranks serve that session (call FTI_Finalize first)",
                ));
            }
            session::take()?.abandon();
        }
        // A failed process must end the job under any MPI (see
        // `failure`); the duplicates below inherit the handler.
        crate::failure::install(global_comm, true);
        let world = duplicate(global_comm)?;
        crate::status::set_rank(world.rank() as usize);
        let fti = read_config(config_file);
        let fti = agree(&world, fti.as_ref().map(|_| ()).map_err(Clone::clone))
            .and_then(|()| fti.map_err(Failure::new))?;
        crate::say::set_silent(fti.verbosity >= 4);
        let placed = place(&world, &fti);
        agree(&world, placed.as_ref().map(|_| ()).map_err(Clone::clone))?;
        let place = placed.map_err(Failure::new)?;
        if world.rank() == 0 {
            for w in &fti.warnings {
                crate::say::warning(w);
            }
        }
        let exec_id = execution(&world, &fti)?;
        let seat = session::Seat {
            world_rank: world.rank(),
            world_size: world.size(),
            node: place.node as c_int,
            node_rank: place
                .node_ranks
                .iter()
                .position(|r| *r == world.rank())
                .unwrap_or(0) as c_int,
        };
        let cfg = frame_config(&fti, &exec_id);
        if fti.head && place.node_ranks[0] == world.rank() {
            start_logging(fti.verbosity, -1);
        }
        let (app, program) = if fti.head {
            match dedicated::split(&world, nodes(&fti), &cfg).map_err(Failure::new)? {
                Role::Served => {
                    // SAFETY: the program initialised MPI; this process
                    // makes no MPI call after this one, as FTI's dedicated
                    // ranks.
                    unsafe { mpi::ffi::MPI_Finalize() };
                    std::process::exit(0)
                }
                Role::Program(p) => (p.comm().duplicate(), Some(p)),
            }
        } else {
            (world, None)
        };
        let link = program.as_ref().map(|p| p.link().clone());
        start_logging(fti.verbosity, app.rank());
        let visible = duplicate(app.as_raw())?;
        crate::failure::install(visible.as_raw(), false);
        // SAFETY: written once here, before the program can read it; the
        // communicator stays alive for the rest of the process.
        unsafe { FTI_COMM_WORLD = visible.as_raw() };
        std::mem::forget(visible);
        let comm: &'static MpiComm = Box::leak(Box::new(MpiComm::with_node(&app, place.node)?));
        // As FTI's: the files of a restart are fetched (and checked) by
        // FTI_Init, which answers whether the restart can succeed.
        let ckpt = match Checkpointer::init_with_manager(&cfg, comm, link)
            .and_then(|mut c| c.fetch_now().map(|()| c))
        {
            Ok(c) => c,
            Err(e) => {
                // SAFETY: leaked just above; nothing borrows it any more.
                drop(unsafe { Box::from_raw(std::ptr::from_ref(comm).cast_mut()) });
                return Err(e.into());
            }
        };
        // The node's stage directory, beside the job's level-1 directory.
        let stage_dir = ckpt.local_dir().parent().map(|job| job.join("stage"));
        let staging = crate::stage::Staging::new(stage_dir.filter(|_| fti.staging), fti.head)
            .map_err(|e| Failure::new(format!("the stage directory: {e}")))?;
        let recovering = ckpt.recovering();
        let restart = fti.restart;
        let fti_restarts_from_single_file = fti.failure == 3;
        let keys = session::Keys {
            path: fti.path.clone(),
            exec_id: exec_id.clone(),
            writer: app.rank() == 0,
            marked: false,
        };
        if keys.writer && !fti.restart {
            note_older_execution(&fti, &exec_id);
        }
        // As FTI: the file names this execution from now on.
        keys.write(if fti.restart { fti.failure } else { 0 });
        session::open(Session {
            comm,
            ckpt,
            fti,
            vars: Default::default(),
            recovering,
            recovering_vars: false,
            icp: None,
            program,
            keys,
            names: Default::default(),
            staging,
            datasets: Default::default(),
            single_recovery: None,
            seat,
            last_checkpoint: None,
        });
        if fti_restarts_from_single_file {
            session::with(|s| {
                let place = s.fti.single_file.clone().ok_or_else(|| {
                    Failure::new(format!(
                        "{}: [restart] failure = 3 restarts from a single file: set h5_single_file_enable = 1",
                        s.fti.path.display()
                    ))
                })?;
                let found = crate::single_file::find(s.comm, &place)?;
                if frame_core::comm::Comm::rank(s.comm) == 0 {
                    crate::say::info(format_args!(
                        "restarting on {} ranks from the single file {}",
                        frame_core::comm::Comm::size(s.comm),
                        found.path().display()
                    ));
                }
                s.single_recovery = Some(found);
                s.recovering = true;
                Ok(())
            })?;
        }
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
