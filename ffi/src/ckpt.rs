//! The checkpointing calls: init, protect, snapshot, checkpoint, recover,
//! status, stored size, finalize.

use crate::state::{self, FrameCtx};
use crate::status::{guard, guard_value, Failure, FRAME_DONE, FRAME_OK};
use frame_core::comm::{Comm, LocalComm};
use frame_core::Level;
use frame_core::{Checkpointer, Config, ElemType};
use std::ffi::{c_char, c_int, c_void, CStr};

/// C `char` (stored as signed 8-bit integers).
pub const FRAME_CHAR: c_int = 1;
/// C `short`.
pub const FRAME_SHORT: c_int = 2;
/// C `int`.
pub const FRAME_INT: c_int = 3;
/// C `long`.
pub const FRAME_LONG: c_int = 4;
/// C `long long`.
pub const FRAME_LLONG: c_int = 5;
/// C `unsigned char`.
pub const FRAME_UCHAR: c_int = 6;
/// C `unsigned short`.
pub const FRAME_USHORT: c_int = 7;
/// C `unsigned int`.
pub const FRAME_UINT: c_int = 8;
/// C `unsigned long`.
pub const FRAME_ULONG: c_int = 9;
/// C `unsigned long long`.
pub const FRAME_ULLONG: c_int = 10;
/// C `float`.
pub const FRAME_FLOAT: c_int = 11;
/// C `double`.
pub const FRAME_DOUBLE: c_int = 12;
/// Opaque bytes (`count` is a number of bytes).
pub const FRAME_BYTES: c_int = 13;

fn int_type(size: usize, signed: bool) -> ElemType {
    match (size, signed) {
        (1, true) => ElemType::I8,
        (2, true) => ElemType::I16,
        (4, true) => ElemType::I32,
        (8, true) => ElemType::I64,
        (1, false) => ElemType::U8,
        (2, false) => ElemType::U16,
        (4, false) => ElemType::U32,
        _ => ElemType::U64,
    }
}

/// The element type of a `FRAME_*` type constant.
fn elem_type(t: c_int) -> Result<ElemType, Failure> {
    use std::ffi::{c_long, c_longlong, c_short};
    use std::mem::size_of;
    Ok(match t {
        FRAME_CHAR => ElemType::I8,
        FRAME_SHORT => int_type(size_of::<c_short>(), true),
        FRAME_INT => int_type(size_of::<c_int>(), true),
        FRAME_LONG => int_type(size_of::<c_long>(), true),
        FRAME_LLONG => int_type(size_of::<c_longlong>(), true),
        FRAME_UCHAR => ElemType::U8,
        FRAME_USHORT => int_type(size_of::<c_short>(), false),
        FRAME_UINT => int_type(size_of::<c_int>(), false),
        FRAME_ULONG => int_type(size_of::<c_long>(), false),
        FRAME_ULLONG => int_type(size_of::<c_longlong>(), false),
        FRAME_FLOAT => ElemType::F32,
        FRAME_DOUBLE => ElemType::F64,
        FRAME_BYTES => ElemType::Byte,
        other => {
            return Err(Failure::invalid(format!(
                "unknown type {other} (use a FRAME_* type constant)"
            )))
        }
    })
}

fn region_id(id: c_int) -> Result<u32, Failure> {
    u32::try_from(id).map_err(|_| Failure::invalid(format!("region id {id} is negative")))
}

/// The configuration file a call names: `None` for NULL (the defaults and
/// `FRAME_CONFIG`).
///
/// # Safety
/// `config_path` is NULL or a NUL-terminated string.
pub(crate) unsafe fn config_path_of(
    config_path: *const c_char,
) -> Result<Option<std::path::PathBuf>, Failure> {
    if config_path.is_null() {
        return Ok(None);
    }
    // SAFETY: the caller passes a NUL-terminated string.
    let text = unsafe { CStr::from_ptr(config_path) };
    let text = text
        .to_str()
        .map_err(|_| Failure::invalid("the configuration path is not UTF-8"))?;
    Ok(Some(std::path::PathBuf::from(text)))
}

/// Sets up checkpointing on this thread, and finds out with the other
/// ranks whether there is a checkpoint to recover (see `frame_status`).
/// Collective.
///
/// `config_path` is a TOML configuration file, or NULL for the defaults
/// (and `FRAME_CONFIG`, which `frame run` sets). `ctx` is the handle given to
/// the resilient function by `frame_run`, or NULL outside the runtime (the
/// program is then a single rank).
#[no_mangle]
pub unsafe extern "C" fn frame_init(config_path: *const c_char, ctx: *mut FrameCtx) -> c_int {
    guard("frame_init", || {
        // The library's warnings (a level that failed, a fallback) as plain
        // lines on standard error, unless the program logs otherwise.
        frame_log::init(frame_log::Style::Plain, "warn");
        if state::initialised() {
            return Err(Failure::state(
                "frame_init was already called (call frame_finalize first)",
            ));
        }
        // SAFETY: the caller passes NULL or a NUL-terminated string.
        let path = unsafe { config_path_of(config_path) }?;
        let cfg = Config::load(path.as_deref())
            .map_err(|e| Failure::new(crate::status::FRAME_ERROR, e.to_string()))?;
        if ctx.is_null() && frame_runtime::role() == frame_runtime::Role::Rank {
            return Err(Failure::invalid(
                "the context is null, but this process is a rank of a job: pass the ctx frame_run gave the resilient function",
            ));
        }
        let (comm, owned): (&'static dyn Comm, Option<*mut LocalComm>) = if ctx.is_null() {
            let comm = LocalComm::world(1, 1)
                .pop()
                .ok_or_else(|| Failure::state("cannot make a one-rank communicator"))?;
            let p = Box::into_raw(Box::new(comm));
            // SAFETY: freed by `frame_finalize` (or when the thread's state
            // is dropped) after the checkpointer.
            (unsafe { &*p }, Some(p))
        } else {
            (state::comm_of(ctx)?, None)
        };
        match Checkpointer::init(&cfg, comm) {
            Ok(ckpt) => {
                state::install(ckpt, owned)?;
                Ok(FRAME_OK)
            }
            Err(e) => {
                state::free_owned(owned);
                Err(e.into())
            }
        }
    })
}

/// Protects `count` elements of `type` at `ptr` as region `id` (a number
/// of your choice, at least 0). Protecting an id again replaces the region
/// (to change its size or place). The memory must stay valid until it is
/// protected again or `frame_finalize` is called.
#[no_mangle]
pub unsafe extern "C" fn frame_protect(
    id: c_int,
    ptr: *mut c_void,
    count: i64,
    r#type: c_int,
) -> c_int {
    guard("frame_protect", || {
        let id = region_id(id)?;
        let elem = elem_type(r#type)?;
        let count = usize::try_from(count)
            .map_err(|_| Failure::invalid(format!("count {count} is negative")))?;
        if ptr.is_null() && count > 0 {
            return Err(Failure::invalid(format!(
                "region {id}: the pointer is null"
            )));
        }
        if !(ptr as usize).is_multiple_of(elem.size()) {
            return Err(Failure::invalid(format!(
                "region {id}: the pointer is not aligned for its type"
            )));
        }
        state::with_ckpt(|c| {
            // SAFETY: the caller keeps `count` elements at `ptr` valid (see
            // above); null only with a count of 0.
            unsafe { c.protect_raw(id, ptr.cast(), count, elem) };
            Ok(FRAME_OK)
        })
    })
}

/// Call once per iteration of the main loop: writes a checkpoint when the
/// configured interval says so. Returns `FRAME_DONE` when it wrote one,
/// `FRAME_OK` when not. Collective.
#[no_mangle]
pub extern "C" fn frame_snapshot() -> c_int {
    guard("frame_snapshot", || {
        state::with_ckpt(|c| {
            Ok(if c.snapshot()?.is_some() {
                FRAME_DONE
            } else {
                FRAME_OK
            })
        })
    })
}

/// Waits until every node's manager has finished the promotions to levels
/// 2-4 asked of it so far (returns at once with level 1 only). For a
/// program that wants its checkpoints beyond its node before going on,
/// and for tests that kill a node once they are. Collective.
#[no_mangle]
pub extern "C" fn frame_wait_promotions() -> c_int {
    guard("frame_wait_promotions", || {
        state::with_ckpt(|c| {
            c.wait_for_promotions()?;
            Ok(FRAME_OK)
        })
    })
}

/// Writes a checkpoint now and has it kept at `level` (1 to 4) besides the
/// levels whose interval is due. `id` must be positive; frame numbers its
/// checkpoints itself and returns `FRAME_OK`. Collective.
#[no_mangle]
pub extern "C" fn frame_checkpoint(id: c_int, level: c_int) -> c_int {
    guard("frame_checkpoint", || {
        if id <= 0 {
            return Err(Failure::invalid(format!(
                "checkpoint id {id} is not positive"
            )));
        }
        let level = u8::try_from(level)
            .ok()
            .and_then(Level::from_number)
            .ok_or_else(|| Failure::invalid(format!("level {level} is not 1, 2, 3 or 4")))?;
        state::with_ckpt(|c| {
            c.checkpoint_at(level)?;
            Ok(FRAME_OK)
        })
    })
}

/// `FRAME_DONE` (1) if `frame_init` found a checkpoint to recover that has
/// not been recovered yet, `FRAME_OK` (0) if not.
#[no_mangle]
pub extern "C" fn frame_status() -> c_int {
    guard("frame_status", || {
        state::with_ckpt(|c| Ok(if c.recovering() { FRAME_DONE } else { FRAME_OK }))
    })
}

/// Restores every protected region from the checkpoint found by
/// `frame_init`. Every stored region must be protected with the same type
/// and count (`FRAME_EMISMATCH` otherwise; see `frame_stored_size`).
/// Collective.
#[no_mangle]
pub extern "C" fn frame_recover() -> c_int {
    guard("frame_recover", || {
        state::with_ckpt(|c| {
            c.recover()?;
            Ok(FRAME_OK)
        })
    })
}

/// Restores region `id` alone from the checkpoint found by `frame_init`.
/// Not collective.
#[no_mangle]
pub extern "C" fn frame_recover_var(id: c_int) -> c_int {
    guard("frame_recover_var", || {
        let id = region_id(id)?;
        state::with_ckpt(|c| {
            c.recover_region(id)?;
            Ok(FRAME_OK)
        })
    })
}

/// The size in bytes of region `id` in the checkpoint to recover (to size
/// a buffer before protecting it), or a negative status.
#[no_mangle]
pub extern "C" fn frame_stored_size(id: c_int) -> i64 {
    guard_value(
        "frame_stored_size",
        i64::from(crate::status::FRAME_EINTERNAL),
        || {
            let id = region_id(id)?;
            state::with_ckpt(|c| {
                if !c.recovering() {
                    return Err(Failure::new(
                        crate::status::FRAME_ENOREC,
                        "there is no checkpoint to recover",
                    ));
                }
                c.stored_region(id)
                    .map(|r| i64::try_from(r.bytes()).unwrap_or(i64::MAX))
                    .ok_or_else(|| Failure::invalid(format!("the checkpoint holds no region {id}")))
            })
        },
    )
}

/// Ends checkpointing on this thread: waits for background promotions and
/// removes the job's checkpoints unless configured to keep them.
/// Collective.
#[no_mangle]
pub extern "C" fn frame_finalize() -> c_int {
    guard("frame_finalize", || {
        let (ckpt, owned) = state::take()?;
        let done = ckpt.finalize();
        state::free_owned(owned);
        done?;
        Ok(FRAME_OK)
    })
}
