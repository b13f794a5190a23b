//! The communicator calls a C program needs under the runtime: rank, size,
//! point-to-point messages, a barrier and all-reduces; and the per-iteration
//! fault point.

use crate::state::{comm_of, context, FrameCtx};
use crate::status::{guard, Failure, FRAME_OK};
use frame_core::comm::{CommExt, ReduceOp, Reducible};
use std::ffi::{c_int, c_void};

/// Element-wise sum.
pub const FRAME_SUM: c_int = 1;
/// Element-wise minimum.
pub const FRAME_MIN: c_int = 2;
/// Element-wise maximum.
pub const FRAME_MAX: c_int = 3;

fn op(o: c_int) -> Result<ReduceOp, Failure> {
    match o {
        FRAME_SUM => Ok(ReduceOp::Sum),
        FRAME_MIN => Ok(ReduceOp::Min),
        FRAME_MAX => Ok(ReduceOp::Max),
        other => Err(Failure::invalid(format!(
            "unknown operation {other} (FRAME_SUM, FRAME_MIN or FRAME_MAX)"
        ))),
    }
}

fn rank_arg(r: c_int, size: usize) -> Result<usize, Failure> {
    usize::try_from(r)
        .ok()
        .filter(|r| *r < size)
        .ok_or_else(|| Failure::invalid(format!("there is no rank {r} (the job has {size})")))
}

fn tag_arg(t: c_int) -> Result<u32, Failure> {
    u32::try_from(t).map_err(|_| Failure::invalid(format!("tag {t} is negative")))
}

/// A byte buffer from C, checked.
///
/// # Safety
/// `ptr` must be valid for `len` bytes (any value when `len` is 0).
unsafe fn bytes<'a>(ptr: *const c_void, len: i64, what: &str) -> Result<&'a [u8], Failure> {
    let len = usize::try_from(len)
        .map_err(|_| Failure::invalid(format!("{what}: size {len} is negative")))?;
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(Failure::invalid(format!("the {what} pointer is null")));
    }
    // SAFETY: forwarded to the caller.
    Ok(unsafe { std::slice::from_raw_parts(ptr.cast(), len) })
}

/// # Safety
/// As [`bytes`], for writing.
unsafe fn bytes_mut<'a>(ptr: *mut c_void, len: i64, what: &str) -> Result<&'a mut [u8], Failure> {
    let len = usize::try_from(len)
        .map_err(|_| Failure::invalid(format!("{what}: size {len} is negative")))?;
    if len == 0 {
        return Ok(&mut []);
    }
    if ptr.is_null() {
        return Err(Failure::invalid(format!("the {what} pointer is null")));
    }
    // SAFETY: forwarded to the caller.
    Ok(unsafe { std::slice::from_raw_parts_mut(ptr.cast(), len) })
}

/// This process's rank in the job (0 to size - 1), or a negative status.
#[no_mangle]
pub extern "C" fn frame_rank(ctx: *mut FrameCtx) -> c_int {
    guard("frame_rank", || {
        comm_of(ctx).map(|c| c_int::try_from(c.rank()).unwrap_or(c_int::MAX))
    })
}

/// The number of ranks in the job, or a negative status.
#[no_mangle]
pub extern "C" fn frame_size(ctx: *mut FrameCtx) -> c_int {
    guard("frame_size", || {
        comm_of(ctx).map(|c| c_int::try_from(c.size()).unwrap_or(c_int::MAX))
    })
}

/// Sends `bytes` bytes at `buf` to rank `dest` with tag `tag` (at least
/// 0). Returns once the bytes are handed over (it does not wait for the
/// receiver).
#[no_mangle]
pub unsafe extern "C" fn frame_send(
    ctx: *mut FrameCtx,
    dest: c_int,
    tag: c_int,
    buf: *const c_void,
    bytes: i64,
) -> c_int {
    guard("frame_send", || {
        let comm = comm_of(ctx)?;
        let dest = rank_arg(dest, comm.size())?;
        // SAFETY: the caller's buffer.
        let data = unsafe { self::bytes(buf, bytes, "buffer") }?;
        comm.send(dest, tag_arg(tag)?, data)?;
        Ok(FRAME_OK)
    })
}

/// Receives the next message from rank `src` with tag `tag` into `buf`,
/// which must have exactly the message's size `bytes`.
#[no_mangle]
pub unsafe extern "C" fn frame_recv(
    ctx: *mut FrameCtx,
    src: c_int,
    tag: c_int,
    buf: *mut c_void,
    bytes: i64,
) -> c_int {
    guard("frame_recv", || {
        let comm = comm_of(ctx)?;
        let src = rank_arg(src, comm.size())?;
        // SAFETY: the caller's buffer.
        let out = unsafe { bytes_mut(buf, bytes, "buffer") }?;
        comm.recv_into(src, tag_arg(tag)?, out)?;
        Ok(FRAME_OK)
    })
}

/// Sends `send_bytes` at `send_buf` to `dest` and receives `recv_bytes`
/// into `recv_buf` from `src`, both with `tag` (safe in any order).
#[no_mangle]
pub unsafe extern "C" fn frame_sendrecv(
    ctx: *mut FrameCtx,
    send_buf: *const c_void,
    send_bytes: i64,
    dest: c_int,
    recv_buf: *mut c_void,
    recv_bytes: i64,
    src: c_int,
    tag: c_int,
) -> c_int {
    guard("frame_sendrecv", || {
        let comm = comm_of(ctx)?;
        let (dest, src) = (rank_arg(dest, comm.size())?, rank_arg(src, comm.size())?);
        let tag = tag_arg(tag)?;
        // SAFETY: the caller's send buffer, of `send_bytes` bytes.
        let data = unsafe { bytes(send_buf, send_bytes, "send buffer") }?;
        // SAFETY: the caller's receive buffer, of `recv_bytes` bytes.
        let out = unsafe { bytes_mut(recv_buf, recv_bytes, "receive buffer") }?;
        comm.send(dest, tag, data)?;
        comm.recv_into(src, tag, out)?;
        Ok(FRAME_OK)
    })
}

/// Waits until every rank entered the barrier.
#[no_mangle]
pub extern "C" fn frame_barrier(ctx: *mut FrameCtx) -> c_int {
    guard("frame_barrier", || {
        comm_of(ctx)?.barrier()?;
        Ok(FRAME_OK)
    })
}

/// All-reduces `n` values of 8 bytes at `values` in place, read and written
/// with `from` and `to` (the caller's array need not be aligned).
///
/// # Safety
/// `values` must be valid for `n` values.
unsafe fn allreduce<T: Reducible>(
    ctx: *mut FrameCtx,
    values: *mut c_void,
    n: i64,
    op: c_int,
    from: fn([u8; 8]) -> T,
    to: fn(T) -> [u8; 8],
) -> Result<c_int, Failure> {
    let comm = comm_of(ctx)?;
    let op = self::op(op)?;
    // SAFETY: the caller's array of `n` values.
    let raw = unsafe { bytes_mut(values, n.saturating_mul(8), "values") }?;
    let mut v: Vec<T> = raw
        .chunks_exact(8)
        .map(|c| from(c.try_into().unwrap_or([0; 8])))
        .collect();
    comm.all_reduce(&mut v, op)?;
    for (dst, x) in raw.chunks_exact_mut(8).zip(v) {
        dst.copy_from_slice(&to(x));
    }
    Ok(FRAME_OK)
}

/// Reduces `n` 64-bit integers at `values` element-wise over all ranks with
/// `op` (`FRAME_SUM`, `FRAME_MIN`, `FRAME_MAX`); every rank gets the result
/// in place.
#[no_mangle]
pub unsafe extern "C" fn frame_allreduce_i64(
    ctx: *mut FrameCtx,
    values: *mut i64,
    n: i64,
    op: c_int,
) -> c_int {
    // SAFETY: forwarded to the caller.
    guard("frame_allreduce_i64", || unsafe {
        allreduce(
            ctx,
            values.cast(),
            n,
            op,
            i64::from_ne_bytes,
            i64::to_ne_bytes,
        )
    })
}

/// Like `frame_allreduce_i64`, for doubles.
#[no_mangle]
pub unsafe extern "C" fn frame_allreduce_f64(
    ctx: *mut FrameCtx,
    values: *mut f64,
    n: i64,
    op: c_int,
) -> c_int {
    // SAFETY: forwarded to the caller.
    guard("frame_allreduce_f64", || unsafe {
        allreduce(
            ctx,
            values.cast(),
            n,
            op,
            f64::from_ne_bytes,
            f64::to_ne_bytes,
        )
    })
}

/// Call once per iteration with its number: shows the job's progress, fires
/// fault injections set for this iteration (`frame run --inject`), and
/// returns `FRAME_EINTERRUPTED` when a failure elsewhere started a
/// recovery.
#[no_mangle]
pub extern "C" fn frame_fault_point(ctx: *mut FrameCtx, iteration: i64) -> c_int {
    guard("frame_fault_point", || {
        let it = u64::try_from(iteration)
            .map_err(|_| Failure::invalid(format!("iteration {iteration} is negative")))?;
        context(ctx, |c| Ok(c.fault_point(it)?))?;
        Ok(FRAME_OK)
    })
}
