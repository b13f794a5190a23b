//! `VELOC_Init`, `VELOC_Init_single` and `VELOC_Finalize`, and the
//! program's regions (`VELOC_Mem_protect`, `VELOC_Mem_unprotect`).

use crate::session::{self, Owned, Region, Session};
use crate::status::{call, set_rank, Failure};
use frame_core::comm::mpi::{MpiComm, Nodes};
use frame_core::comm::{Comm, LocalComm, ReduceOp};
use frame_core::config::veloc::VelocFile;
use frame_core::config::Interval;
use frame_core::Checkpointer;
use mpi::ffi::MPI_Comm;
use std::ffi::{c_char, c_int, c_uint, c_void};

pub(crate) use frame_interface::c_text as text;

/// The job id of the checkpoints kept in `scratch` and `persistent`: the
/// same program run again with the same file finds them.
fn job_id(veloc: &VelocFile, single: Option<c_uint>) -> String {
    let storage = &veloc.config.storage;
    let key = format!(
        "{}\n{}",
        storage.local_dir.display(),
        storage.global_dir.display()
    );
    let crc = crc32fast::hash(key.as_bytes());
    match single {
        Some(id) => format!("veloc-{crc:08x}-{id}"),
        None => format!("veloc-{crc:08x}"),
    }
}

/// Reads the configuration file, ready for frame.
fn read_config(cfg_file: *const c_char, single: Option<c_uint>) -> Result<VelocFile, String> {
    // SAFETY: the program passes NULL or a NUL-terminated string.
    let path = unsafe { text(cfg_file, "the configuration file name") }.map_err(|f| f.message)?;
    let mut veloc = VelocFile::load(path, frame_core::env::vars()).map_err(|e| e.to_string())?;
    veloc.config.job.id = job_id(&veloc, single);
    veloc
        .config
        .private_storage_roots()
        .map_err(|e| e.to_string())?;
    Ok(veloc)
}

/// The session on `comm` with the file `veloc`, begun in `epoch` of
/// frame's resilient function (if one runs). Collective.
fn start(
    comm: &'static dyn Comm,
    owned: Owned,
    mut veloc: VelocFile,
    epoch: Option<u64>,
) -> Result<Session, Failure> {
    let mut last = [comm.node() as u64];
    comm.all_reduce_u64(&mut last, ReduceOp::Max)?;
    if last[0] == 0 {
        // As VeloC: erasure coding needs more than one node.
        veloc.config.l3.interval = Interval::Calls(0);
    }
    if comm.rank() == 0 {
        for w in &veloc.warnings {
            crate::status::warning(w);
        }
    }
    let config = veloc.config.clone();
    let index_dir = if config.l4.interval.is_zero() {
        config.storage.local_dir.clone()
    } else {
        config.storage.global_dir.clone()
    };
    let ckpt = Checkpointer::init(&config, comm)?;
    Ok(Session {
        comm,
        owned,
        ckpt: Some(ckpt),
        config,
        file: veloc,
        regions: Default::default(),
        in_frame: Default::default(),
        begun: None,
        restarting: None,
        index_dir,
        epoch,
    })
}

/// Starts libveloc on `comm` (MPI must be initialised) with the
/// configuration file `cfg_file`; in frame's resilient function under
/// `frame_run_ulfm`, a session of an abandoned entry is let go first.
/// Collective; fails on every rank alike.
///
/// # Safety
/// `cfg_file` is null or a NUL-terminated string; `comm` is a live
/// intra-communicator.
#[no_mangle]
pub unsafe extern "C" fn VELOC_Init(comm: MPI_Comm, cfg_file: *const c_char) -> c_int {
    call("VELOC_Init", || {
        if session::is_open() {
            return Err(Failure::new(
                "VELOC_Init was already called (call VELOC_Finalize first)",
            ));
        }
        frame_log::init(frame_log::Style::Plain, "warn");
        // In frame's resilient function (frame_run_ulfm), the program
        // passes the working ranks' communicator of the entry: a failure
        // abandons the entry's session.
        let entry = frame_interface::entry::running()?;
        if let Some(e) = &entry {
            // SAFETY: both are live communicators.
            unsafe { same_ranks(comm, e.comm) }?;
        }
        // libveloc's own duplicate, without the program's error handler.
        // SAFETY: `comm` is the program's live communicator.
        let world = unsafe { frame_interface::program_comm::duplicate(comm) }?;
        let loaded = read_config(cfg_file, None);
        let check =
            frame_interface::entry::prepare(MpiComm::with_node(&world, 0)?, entry.as_ref())?;
        set_rank(Some(check.rank()));
        let agreed =
            frame_interface::agree(&check, loaded.as_ref().map(|_| ()).map_err(Clone::clone));
        if let Err(e) = agreed {
            // Said before any rank returns: a program that aborts on the
            // failure could end the job before rank 0 printed it.
            if check.rank() == 0 {
                crate::status::error(format_args!("VELOC_Init: {}", e.message));
            }
            check.barrier()?;
            return Err(Failure::said());
        }
        drop(check);
        let veloc = loaded.map_err(Failure::new)?;
        let comm = MpiComm::new(&world, Nodes::from_config(&veloc.config))?;
        let comm = frame_interface::entry::prepare(comm, entry.as_ref())?;
        let raw = Box::into_raw(Box::new(comm));
        // SAFETY: freed by Session::close (or just below) after the
        // checkpointer.
        let comm: &'static MpiComm = unsafe { &*raw };
        match start(comm, Owned::Mpi(raw), veloc, entry.map(|e| e.epoch)) {
            Ok(s) => {
                session::open(s);
                Ok(())
            }
            Err(e) => {
                // SAFETY: leaked just above; nothing borrows it any more.
                drop(unsafe { Box::from_raw(raw) });
                Err(e)
            }
        }
    })
}

/// Whether `given` holds the processes of `entry` (the working ranks of
/// frame's resilient function) in the same order, or why not. Local.
///
/// # Safety
/// Both are live communicators.
unsafe fn same_ranks(given: MPI_Comm, entry: MPI_Comm) -> Result<(), Failure> {
    let (mut same, mut n, mut working) = (0, 0, 0);
    // SAFETY: as the caller promises; MPI writes one int each, and reads
    // its own constants.
    let (compared, ident, congruent) = unsafe {
        mpi::ffi::MPI_Comm_size(given, &mut n);
        mpi::ffi::MPI_Comm_size(entry, &mut working);
        (
            mpi::ffi::MPI_Comm_compare(given, entry, &mut same),
            mpi::ffi::RSMPI_IDENT,
            mpi::ffi::RSMPI_CONGRUENT,
        )
    };
    if compared == 0 && (same == ident || same == congruent) {
        return Ok(());
    }
    Err(Failure::new(format!(
        "the communicator given ({n} processes) is not the entry's working ranks ({working}, in the job's order): under frame's resilient function pass frame_mpi_comm's, or MPI_COMM_WORLD under FRAME_MPI_WORLD (docs/ULFM.md#scr-and-veloc-programs)"
    )))
}

/// Starts libveloc in a process of its own, number `id` among
/// independent ones (each keeps its own checkpoints).
///
/// # Safety
/// `cfg_file` is null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn VELOC_Init_single(id: c_uint, cfg_file: *const c_char) -> c_int {
    call("VELOC_Init_single", || {
        if session::is_open() {
            return Err(Failure::new(
                "VELOC_Init was already called (call VELOC_Finalize first)",
            ));
        }
        frame_log::init(frame_log::Style::Plain, "warn");
        let veloc = read_config(cfg_file, Some(id)).map_err(Failure::new)?;
        let local = LocalComm::world(1, 1)
            .pop()
            .ok_or_else(|| Failure::new("cannot make a one-process communicator"))?;
        let raw = Box::into_raw(Box::new(local));
        // SAFETY: freed by Session::close (or just below).
        let comm: &'static LocalComm = unsafe { &*raw };
        match start(comm, Owned::Local(raw), veloc, None) {
            Ok(s) => {
                session::open(s);
                Ok(())
            }
            Err(e) => {
                // SAFETY: leaked just above; nothing borrows it any more.
                drop(unsafe { Box::from_raw(raw) });
                Err(e)
            }
        }
    })
}

/// Ends libveloc: with `drain`, waits for the checkpoints in flight first;
/// the checkpoints stay for the next run. Collective.
#[no_mangle]
pub extern "C" fn VELOC_Finalize(drain: c_int) -> c_int {
    call("VELOC_Finalize", || {
        let mut s = session::take()?;
        // frame's finalize waits for the promotions in flight anyway;
        // every rank goes on to close, whatever the wait said.
        let drained = match (drain != 0, s.ckpt.as_mut()) {
            (true, Some(c)) => c.wait_for_promotions().map_err(Failure::from),
            _ => Ok(()),
        };
        let closed = s.close();
        set_rank(None);
        drained.and(closed)
    })
}

/// Protects `count` elements of `base_size` bytes at `ptr` as region
/// `id`; protecting `id` again replaces it. The memory must stay valid
/// while it is protected.
#[no_mangle]
pub extern "C" fn VELOC_Mem_protect(
    id: c_int,
    ptr: *mut c_void,
    count: usize,
    base_size: usize,
) -> c_int {
    call("VELOC_Mem_protect", || {
        let id =
            u32::try_from(id).map_err(|_| Failure::new(format!("region id {id} is negative")))?;
        let bytes = count.checked_mul(base_size).ok_or_else(|| {
            Failure::new(format!("region {id}: {count} x {base_size} bytes overflow"))
        })?;
        if ptr.is_null() && bytes > 0 {
            return Err(Failure::new(format!("region {id}: the pointer is NULL")));
        }
        session::with(|s| {
            s.regions.insert(
                id,
                Region {
                    ptr: ptr.cast(),
                    bytes,
                },
            );
            Ok(())
        })
    })
}

/// Stops protecting region `id`.
#[no_mangle]
pub extern "C" fn VELOC_Mem_unprotect(id: c_int) -> c_int {
    call("VELOC_Mem_unprotect", || {
        let id =
            u32::try_from(id).map_err(|_| Failure::new(format!("region id {id} is negative")))?;
        session::with(|s| match s.regions.remove(&id) {
            Some(_) => {
                // frame forgets the memory too: it may be freed now.
                if s.in_frame.remove(&id) {
                    s.ckpt()?.unprotect(id);
                }
                Ok(())
            }
            None => Err(Failure::new(format!("region {id} is not protected"))),
        })
    })
}
