//! `frame_run` and `frame_run_ulfm`: the runtime entries of a C program.

use crate::state::{self, FrameCtx};
use crate::status::{guard, Failure, FRAME_OK};
use frame_runtime::{Context, State};
use std::ffi::{c_char, c_int, c_void};

/// First start of the job.
pub const FRAME_STATE_NEW: c_int = 0;
/// A survivor, rolled back after a failure elsewhere.
pub const FRAME_STATE_REINITED: c_int = 1;
/// A replacement for a rank that failed.
pub const FRAME_STATE_RESTARTED: c_int = 2;

/// The resilient function: `ctx` is valid until it returns; `state` is a
/// `FRAME_STATE_*` value; `failed_ranks` holds `n_failed` ranks (the
/// failures recovered just before this entry). Return 0 when done; any
/// other value stops the job with an error, unless a failure interrupted
/// the function (a call returned `FRAME_EINTERRUPTED`), in which case it is
/// entered again once the job recovered.
pub type FrameMain = Option<
    unsafe extern "C" fn(
        ctx: *mut FrameCtx,
        state: c_int,
        n_failed: c_int,
        failed_ranks: *const c_int,
        user_data: *mut c_void,
    ) -> c_int,
>;

/// Runs `resilient_main` under frame's runtime and returns the process's
/// exit status (0 on success).
///
/// Under `frame run` this process is one rank: the function is entered
/// with the job's context, and entered again after every failure. Started
/// on its own, the program is the only rank and the function runs once.
/// `argc` and `argv` are the program's arguments (they are not changed;
/// NULL `argv` is allowed).
#[no_mangle]
pub unsafe extern "C" fn frame_run(
    argc: c_int,
    argv: *mut *mut c_char,
    resilient_main: FrameMain,
    user_data: *mut c_void,
) -> c_int {
    let _ = (argc, argv);
    let mut status = FRAME_OK;
    let checked = guard("frame_run", || {
        let Some(main) = resilient_main else {
            return Err(Failure::invalid("resilient_main is null"));
        };
        let code = frame_runtime::run_status(|ctx| enter(ctx, main, user_data));
        status = c_int::from(code);
        Ok(FRAME_OK)
    });
    if checked != FRAME_OK {
        return checked;
    }
    status
}

/// Calls the program's resilient function `main` with `ctx`'s state and
/// failures; an error unless it returns 0.
fn enter(ctx: &mut Context<'_>, main: MainFn, user_data: *mut c_void) -> Result<(), String> {
    let state = match ctx.state() {
        State::New => FRAME_STATE_NEW,
        State::Reinited => FRAME_STATE_REINITED,
        State::Restarted => FRAME_STATE_RESTARTED,
    };
    let failed: Vec<c_int> = ctx
        .failed_ranks()
        .iter()
        .map(|r| c_int::try_from(*r).unwrap_or(c_int::MAX))
        .collect();
    let n = c_int::try_from(failed.len()).unwrap_or(c_int::MAX);
    let returned = state::with_live(ctx, |handle| {
        // SAFETY: calling the program's function as documented; the
        // failed-rank array outlives the call.
        unsafe { main(handle, state, n, failed.as_ptr(), user_data) }
    });
    if returned == 0 {
        return Ok(());
    }
    // A return after an interruption is re-entered by the runtime,
    // whatever the value.
    // SAFETY: frame_last_error returns a NUL-terminated string of this
    // thread that lives until its next failed call.
    let last = unsafe { std::ffi::CStr::from_ptr(crate::status::frame_last_error()) };
    Err(format!(
        "resilient_main returned {returned} (last error: {})",
        last.to_string_lossy()
    ))
}

/// The resilient function, once checked not null.
type MainFn = unsafe extern "C" fn(
    ctx: *mut FrameCtx,
    state: c_int,
    n_failed: c_int,
    failed_ranks: *const c_int,
    user_data: *mut c_void,
) -> c_int;

/// Runs `resilient_main` in an MPI job that repairs itself after a
/// process failure (started by `mpirun --with-ft ulfm`; docs/ULFM.md) and
/// returns the process's exit status (0 on success), as `frame_run` does
/// under frame's own runtime: after a failure the survivors enter the
/// function again (`FRAME_STATE_REINITED`) and a spare or new process takes
/// each failed rank (`FRAME_STATE_RESTARTED`); `ctx`'s communicator is the
/// working ranks', of the job's size and order.
///
/// Initialises MPI unless the program did (then the program finalises
/// it). The job's layout (spares, new processes, nodes, error scope) is
/// `[ulfm]` of the configuration at `config_path`, or NULL for the
/// defaults and `FRAME_CONFIG`, read as `frame_init` reads it. After a
/// recovery the process ends inside this call (MPI can hang in
/// `MPI_Finalize` once a process died), with the status it would return.
/// Returns `FRAME_EUNSUPPORTED` if libframe was built without the `ulfm`
/// feature.
#[no_mangle]
pub unsafe extern "C" fn frame_run_ulfm(
    argc: c_int,
    argv: *mut *mut c_char,
    config_path: *const c_char,
    resilient_main: FrameMain,
    user_data: *mut c_void,
) -> c_int {
    let _ = (argc, argv);
    let mut status = FRAME_OK;
    let checked = guard("frame_run_ulfm", || {
        let Some(main) = resilient_main else {
            return Err(Failure::invalid("resilient_main is null"));
        };
        // SAFETY: the caller passes NULL or a NUL-terminated string.
        let path = unsafe { crate::ckpt::config_path_of(config_path) }?;
        status = ulfm::run(path.as_deref(), main, user_data)?;
        Ok(FRAME_OK)
    });
    if checked != FRAME_OK {
        return checked;
    }
    status
}

#[cfg(feature = "ulfm")]
mod ulfm {
    use super::{enter, MainFn};
    use crate::status::{Failure, FRAME_ERROR};
    use std::ffi::{c_int, c_void};

    /// Runs `main` under ULFM with the configuration at `path`.
    pub(super) fn run(
        path: Option<&std::path::Path>,
        main: MainFn,
        user_data: *mut c_void,
    ) -> Result<c_int, Failure> {
        let cfg = frame_core::config::Config::load(path)
            .map_err(|e| Failure::new(FRAME_ERROR, e.to_string()))?;
        let options = frame_runtime::ulfm::Options::from_config(&cfg);
        // MPI finalised when this goes, if this call initialised it.
        let universe = mpi::initialize_with_threading(mpi::Threading::Serialized);
        let world = mpi::topology::SimpleCommunicator::world();
        let code =
            frame_runtime::ulfm::run_status(&world, &options, |ctx| enter(ctx, main, user_data));
        drop(universe);
        Ok(c_int::from(code))
    }
}

#[cfg(not(feature = "ulfm"))]
mod ulfm {
    use super::MainFn;
    use crate::status::{Failure, FRAME_EUNSUPPORTED};
    use std::ffi::{c_int, c_void};

    /// Without the `ulfm` feature: [`FRAME_EUNSUPPORTED`].
    pub(super) fn run(
        _path: Option<&std::path::Path>,
        _main: MainFn,
        _user_data: *mut c_void,
    ) -> Result<c_int, Failure> {
        Err(Failure::new(
            FRAME_EUNSUPPORTED,
            "this libframe was built without the ulfm feature (cargo build -p frame-ffi --features ulfm against Open MPI 5)",
        ))
    }
}
