//! Typed helpers on every communicator: send, receive, exchange and reduce
//! slices of plain data (`f64`, `u32`, ... anything `zerocopy` can view as
//! bytes) without converting them by hand.
//!
//! Sends hand the slice's bytes to the transport as they are; receives copy
//! the message once, straight into the caller's slice (a halo row lands in
//! the grid itself), after checking its length.
//!
//! ```
//! use frame::comm::{Comm, CommExt, LocalComm, ReduceOp};
//!
//! let out = LocalComm::run(2, 2, |comm| {
//!     let me = comm.rank();
//!     let mine = [me as f64; 4];
//!     let mut theirs = [0.0f64; 4];
//!     comm.sendrecv(&mine, 1 - me, &mut theirs, 1 - me, 7).unwrap();
//!     let mut total = [me as i32 + 1, 10];
//!     comm.all_reduce(&mut total, ReduceOp::Sum).unwrap();
//!     (theirs[0], total)
//! });
//! assert_eq!(out[0].as_ref().unwrap(), &(1.0, [3, 20]));
//! ```

use super::{collective, Comm, CommError, CommResult, Rank, ReduceOp, Tag};
use zerocopy::{FromBytes, Immutable, IntoBytes};

/// Element types [`CommExt::all_reduce`] can reduce.
pub trait Reducible: FromBytes + IntoBytes + Immutable + Copy + 'static {
    /// Reduces `values` element-wise over all ranks of `comm`.
    fn all_reduce<C: Comm + ?Sized>(comm: &C, values: &mut [Self], op: ReduceOp) -> CommResult<()>;
}

macro_rules! integers {
    ($($t:ty),*) => {$(
        impl Reducible for $t {
            fn all_reduce<C: Comm + ?Sized>(comm: &C, values: &mut [Self], op: ReduceOp) -> CommResult<()> {
                let f: fn($t, $t) -> $t = match op {
                    ReduceOp::And => |a, b| a & b,
                    ReduceOp::Or => |a, b| a | b,
                    ReduceOp::Min => |a, b| a.min(b),
                    ReduceOp::Max => |a, b| a.max(b),
                    ReduceOp::Sum => |a, b| a.wrapping_add(b),
                };
                collective::all_reduce(comm, values, concat!("all_reduce::<", stringify!($t), ">"), f)
            }
        }
    )*};
}
integers!(u8, u16, u32, i8, i16, i32, i64);

impl Reducible for u64 {
    fn all_reduce<C: Comm + ?Sized>(comm: &C, values: &mut [Self], op: ReduceOp) -> CommResult<()> {
        // The communicator's own (possibly native) implementation.
        comm.all_reduce_u64(values, op)
    }
}

impl Reducible for f64 {
    fn all_reduce<C: Comm + ?Sized>(comm: &C, values: &mut [Self], op: ReduceOp) -> CommResult<()> {
        comm.all_reduce_f64(values, op)
    }
}

impl Reducible for f32 {
    fn all_reduce<C: Comm + ?Sized>(comm: &C, values: &mut [Self], op: ReduceOp) -> CommResult<()> {
        let f: fn(f32, f32) -> f32 = match op {
            ReduceOp::Min => f32::min,
            ReduceOp::Max => f32::max,
            ReduceOp::Sum => |a, b| a + b,
            ReduceOp::And | ReduceOp::Or => {
                return Err(CommError::Unsupported(format!(
                    "{op:?} is not defined for f32 values"
                )))
            }
        };
        collective::all_reduce(comm, values, "all_reduce::<f32>", f)
    }
}

/// Typed helpers, available on every [`Comm`] (including `&dyn Comm`).
pub trait CommExt: Comm {
    /// Sends the elements of `data` to `dest` (eager, like [`Comm::send`]).
    fn send_slice<T: IntoBytes + Immutable>(
        &self,
        dest: Rank,
        tag: Tag,
        data: &[T],
    ) -> CommResult<()> {
        self.send(dest, tag, data.as_bytes())
    }

    /// Receives the next message from `src` with `tag` into `out`, which
    /// must have exactly the message's length (else
    /// [`CommError::Mismatch`], naming the sender).
    fn recv_into<T: FromBytes + IntoBytes>(
        &self,
        src: Rank,
        tag: Tag,
        out: &mut [T],
    ) -> CommResult<()> {
        let bytes = self.recv(src, tag)?;
        let dst = out.as_mut_bytes();
        if bytes.len() != dst.len() {
            return Err(CommError::Mismatch {
                op: "recv_into",
                rank: src,
                got: bytes.len(),
                expected: dst.len(),
            });
        }
        dst.copy_from_slice(&bytes);
        Ok(())
    }

    /// Sends `send` to `dest` and receives into `recv` from `src`, both with
    /// `tag` (safe in any order: sends are eager).
    fn sendrecv<T: FromBytes + IntoBytes + Immutable>(
        &self,
        send: &[T],
        dest: Rank,
        recv: &mut [T],
        src: Rank,
        tag: Tag,
    ) -> CommResult<()> {
        self.send_slice(dest, tag, send)?;
        self.recv_into(src, tag, recv)
    }

    /// Reduces `values` element-wise over all ranks; every rank gets the
    /// result. Integers support every [`ReduceOp`] (sums wrap); floats
    /// support `Min`, `Max` and `Sum`.
    fn all_reduce<T: Reducible>(&self, values: &mut [T], op: ReduceOp) -> CommResult<()> {
        T::all_reduce(self, values, op)
    }
}

impl<C: Comm + ?Sized> CommExt for C {}

#[cfg(test)]
mod tests;
