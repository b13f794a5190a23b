//! `frame_run`: the runtime entry of a C program.

use crate::state::{self, FrameCtx};
use crate::status::{guard, Failure, FRAME_OK};
use frame_runtime::State;
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
        let code = frame_runtime::run_status(|ctx| {
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
                Ok(())
            } else {
                // A return after an interruption is re-entered by the
                // runtime, whatever the value.
                let last = unsafe { std::ffi::CStr::from_ptr(crate::status::frame_last_error()) };
                Err(format!(
                    "resilient_main returned {returned} (last error: {})",
                    last.to_string_lossy()
                ))
            }
        });
        status = c_int::from(code);
        Ok(FRAME_OK)
    });
    if checked != FRAME_OK {
        return checked;
    }
    status
}
