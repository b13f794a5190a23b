//! `SCR_Init`, `SCR_Finalize`, `SCR_Config` and `SCR_Get_version`: the
//! parameters, the nodes, the communicator and the checkpointer, and the
//! checkpoint a restart will read.

use crate::index::{self, Index, Pick};
use crate::session::{self, Phase, Session};
use crate::status::{guard, guard_value, Failure};
use frame_core::comm::mpi::{MpiComm, Nodes};
use frame_core::comm::Comm;
use frame_core::config::scr::{self, ScrConf, Setting};
use frame_core::Checkpointer;
use frame_interface::entry;
use mpi::topology::SimpleCommunicator;
use std::ffi::{CStr, CString};
use std::os::raw::{c_char, c_int};
use std::time::Instant;

pub(crate) use frame_interface::c_text as text;

/// Sets (`"KEY=VALUE"`), unsets (`"KEY="`) or reads (`"KEY"`) a parameter.
/// Setting and unsetting are for before `SCR_Init`; reading gives a copy
/// of the value in force (the program frees it), or NULL when the key is
/// unset.
///
/// # Safety
/// `config` is null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn SCR_Config(config: *const c_char) -> *const c_char {
    guard_value("SCR_Config", std::ptr::null(), || {
        // SAFETY: as the caller promises.
        let config = unsafe { text(config, "the parameter") }?;
        let Some(Some(value)) = self::config(config)? else {
            return Ok(std::ptr::null());
        };
        let value = CString::new(value).map_err(|_| Failure::new("the value holds a NUL byte"))?;
        // SAFETY: strdup copies a NUL-terminated string into memory the
        // program frees with free().
        Ok(unsafe { libc::strdup(value.as_ptr()) }.cast_const())
    })
}

/// `SCR_Config`'s work: `None` after setting or unsetting a key,
/// `Some(value)` for a query (`Some(None)`: the key is unset).
pub(crate) fn config(text: &str) -> Result<Option<Option<String>>, Failure> {
    let text = text.trim();
    let Some((key, value)) = text.split_once('=') else {
        return Ok(Some(query(text)));
    };
    let (key, value) = (key.trim().to_ascii_uppercase(), value.trim());
    if session::is_open() {
        return Err(Failure::new(format!(
            "{key} cannot be set after SCR_Init (set parameters before it)"
        )));
    }
    if !scr::is_parameter(&key) {
        return Err(Failure::new(format!(
            "{key} is not a parameter of SCR's (see docs/SCR_CONFORMANCE.md)"
        )));
    }
    let mut settings = session::settings();
    settings.retain(|s| s.key != key);
    if !value.is_empty() {
        settings.push(Setting::program(&key, value));
    }
    Ok(None)
}

/// The value of `key` in force, if set.
fn query(key: &str) -> Option<String> {
    let key = key.to_ascii_uppercase();
    if session::is_open() {
        return session::with(|s| Ok(s.conf.value(&key).map(str::to_string))).unwrap_or(None);
    }
    let settings = session::settings().clone();
    let cwd = std::env::current_dir().unwrap_or_default();
    ScrConf::load(&settings, frame_core::env::vars(), &cwd)
        .ok()
        .and_then(|c| c.value(&key).map(str::to_string))
}

/// The version of libscr: SCR's API version and frame's.
#[no_mangle]
pub extern "C" fn SCR_Get_version() -> *mut c_char {
    static VERSION: &CStr = c"v3.1.0 (frame libscr)";
    VERSION.as_ptr().cast_mut()
}

/// Says the configuration's warnings once, on rank 0.
fn warn_once(conf: &ScrConf, rank: usize) {
    if rank == 0 {
        for w in &conf.warnings {
            crate::say::warning(w);
        }
    }
}

/// When the batch system ends the allocation, if it says
/// (`SLURM_JOB_END_TIME`, seconds since the epoch).
fn allocation_end() -> Option<std::time::SystemTime> {
    let secs: u64 = frame_core::env::var("SLURM_JOB_END_TIME")?
        .trim()
        .parse()
        .ok()?;
    Some(std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs))
}

/// Starts libscr on `MPI_COMM_WORLD` (MPI must be initialised), or in
/// frame's resilient function under `frame_run_ulfm` on the entry's
/// working ranks (a session of an abandoned entry is let go first): reads
/// the parameters, forms the nodes, starts their managers and finds the
/// checkpoint a restart would read (restored by `SCR_Have_restart`).
/// Collective; fails on every rank alike.
#[no_mangle]
pub extern "C" fn SCR_Init() -> c_int {
    guard("SCR_Init", || {
        if session::is_open() {
            return Err(Failure::new(
                "SCR_Init was already called (call SCR_Finalize first)",
            ));
        }
        // In frame's resilient function (frame_run_ulfm), the working
        // ranks' communicator of this entry: MPI_COMM_WORLD holds spare
        // processes too, and a failure abandons the entry's session.
        let entry = frame_interface::entry::running()?;
        // libscr's own duplicate, without the program's error handler.
        // SAFETY: MPI_COMM_WORLD, or the live communicator libframe keeps
        // for the entry.
        let world = unsafe {
            frame_interface::program_comm::duplicate(
                entry.map_or(mpi::ffi::RSMPI_COMM_WORLD, |e| e.comm),
            )
        }?;
        let world: &SimpleCommunicator = &world;
        let cwd = std::env::current_dir().map_err(|e| format!("the working directory: {e}"));
        let settings = session::settings().clone();
        let loaded = cwd
            .clone()
            .and_then(|cwd| {
                ScrConf::load(&settings, frame_core::env::vars(), &cwd).map_err(|e| e.to_string())
            })
            .and_then(|mut conf| {
                conf.config
                    .private_storage_roots()
                    .map_err(|e| e.to_string())?;
                Ok(conf)
            });
        // Every rank learns of a problem on any before going further.
        let check = entry::prepare(MpiComm::with_node(world, 0)?, entry.as_ref())?;
        crate::status::set_rank(Some(check.rank()));
        let agreed =
            frame_interface::agree(&check, loaded.as_ref().map(|_| ()).map_err(Clone::clone));
        drop(check);
        if let Err(e) = agreed {
            frame_log::init(frame_log::Style::Plain, "warn");
            return Err(e);
        }
        let conf = loaded.map_err(Failure::new)?;
        let cwd = cwd.map_err(Failure::new)?;
        let rank = world_rank(world);
        // frame's own lines (a level fetched, a fallback): its warnings,
        // and with SCR_DEBUG what rank 0 restores from where.
        let verbose = conf.debug > 0 && rank == 0;
        frame_log::init(
            frame_log::Style::Plain,
            if verbose { "info" } else { "warn" },
        );
        warn_once(&conf, rank);
        let comm = MpiComm::new(world, Nodes::from_config(&conf.config))?;
        let comm = entry::prepare(comm, entry.as_ref())?;
        let comm: &'static MpiComm = Box::leak(Box::new(comm));
        let mut conf = conf;
        let mut last = [comm.node() as u64];
        comm.all_reduce_u64(&mut last, frame_core::comm::ReduceOp::Max)?;
        fit_to_nodes(&mut conf, last[0] + 1, rank);
        let config = conf.config.clone();
        let ckpt = match Checkpointer::init(&config, comm) {
            Ok(c) => c,
            Err(e) => {
                // SAFETY: leaked just above; nothing borrows it any more.
                drop(unsafe { Box::from_raw(std::ptr::from_ref(comm).cast_mut()) });
                return Err(e.into());
            }
        };
        let now = Instant::now();
        let mut s = Session {
            comm,
            ckpt: Some(ckpt),
            config,
            cwd,
            phase: Phase::Idle,
            restored: None,
            exhausted: false,
            need_calls: 0,
            last_end: now,
            spent: std::time::Duration::ZERO,
            checkpoints: 0,
            outputs: 0,
            ends_at: allocation_end(),
            epoch: entry.map(|e| e.epoch),
            conf,
        };
        let current = s.conf.current.clone();
        // choose agrees on its outcome: every rank opens, or every rank
        // ends the session it began.
        match choose(&mut s, current.as_deref(), None) {
            Ok(()) => {
                session::open(s);
                Ok(())
            }
            Err(e) => {
                let _ = s.close();
                Err(e)
            }
        }
    })
}

/// Turns partner copies and sets off on a job of one node (they need
/// two): its checkpoints stay on level 1 and reach level 4 as
/// `SCR_FLUSH` says. Said once (rank 0) when `SCR_COPY_TYPE` was set.
fn fit_to_nodes(conf: &mut ScrConf, nodes: u64, rank: usize) {
    let cfg = &mut conf.config;
    if nodes >= 2 || (cfg.l2.interval.is_zero() && cfg.l3.interval.is_zero()) {
        return;
    }
    cfg.l2.interval = frame_core::config::Interval::Calls(0);
    cfg.l3.interval = frame_core::config::Interval::Calls(0);
    if let (Some(copy), 0) = (conf.values.get("SCR_COPY_TYPE"), rank) {
        crate::say::warning(format_args!(
            "SCR_COPY_TYPE = {} ({}) needs two nodes or more, and this job runs on one: its checkpoints stay on the node (and reach the prefix as SCR_FLUSH says)",
            copy.value, copy.origin
        ));
    }
}

/// This rank in `world`.
fn world_rank(world: &SimpleCommunicator) -> usize {
    use mpi::traits::Communicator;
    world.rank() as usize
}

/// Picks the checkpoint the next restart reads (rank 0 asks the index,
/// every rank follows) and makes the checkpointer again when it is not
/// the one frame found. Collective.
pub(crate) fn choose(
    s: &mut Session,
    current: Option<&str>,
    below: Option<u64>,
) -> Result<(), Failure> {
    let natural = s
        .ckpt()?
        .recovering()
        .then(|| s.ckpt.as_ref().and_then(Checkpointer::recovery_id))
        .flatten();
    let picked = if s.rank() == 0 {
        let idx = Index::load(&s.conf.prefix).unwrap_or_else(|e| {
            crate::say::warning(format_args!(
                "the index of named checkpoints is unreadable ({e}); the newest checkpoint is restored"
            ));
            Index::default()
        });
        index::pick(&idx, natural, current, below)
    } else {
        Ok(Pick::Natural)
    };
    s.agree(picked.as_ref().map(|_| ()).map_err(Clone::clone))?;
    let picked = Pick::decode(s.rank_0s(picked.map_or(0, Pick::encode))?);
    match picked {
        Pick::Natural => Ok(()),
        Pick::Nothing => {
            s.exhausted = true;
            Ok(())
        }
        Pick::From(id) => s.restart_from(id),
    }
}

/// Ends libscr: waits for the promotions in flight, keeps the checkpoints
/// for the next run (the newest in the prefix when `SCR_FLUSH` > 0).
/// Collective.
#[no_mangle]
pub extern "C" fn SCR_Finalize() -> c_int {
    guard("SCR_Finalize", || {
        let mut s = session::take()?;
        if let Phase::Output(o) = &s.phase {
            if s.rank() == 0 {
                crate::say::warning(format_args!(
                    "SCR_Finalize before SCR_Complete_output: dataset {:?} is not kept",
                    o.table.name
                ));
            }
            if o.checkpoint {
                // Every rank goes on to close, whatever the files' removal.
                if let Err(e) = s.ckpt().and_then(|c| Ok(c.cancel_checkpoint()?)) {
                    crate::say::warning(format_args!("rank {}: {}", s.rank(), e.message));
                }
            }
        }
        let result = s.close();
        crate::status::set_rank(None);
        result
    })
}
