//! Default collectives built on the two transport primitives of [`Comm`].
//!
//! Broadcast, reduce and gather use binomial trees rooted at the caller's
//! root (the same tree, so the same connections), the barrier is a
//! dissemination barrier. Reductions combine
//! partial results in an order fixed by the tree, so floating point sums are
//! reproducible for a given number of ranks.

use super::{check_rank, Bytes, Comm, CommError, CommResult, Rank, ReduceOp};
use zerocopy::{FromBytes, Immutable, IntoBytes};

/// Tags at or above 2^32 belong to frame's collectives.
const COLLECTIVE: u64 = 1 << 32;
const TAG_BCAST: u64 = COLLECTIVE + 1;
const TAG_REDUCE: u64 = COLLECTIVE + 2;
const TAG_GATHER: u64 = COLLECTIVE + 3;
/// Barrier rounds use `TAG_BARRIER + round`.
const TAG_BARRIER: u64 = COLLECTIVE + 0x100;

pub(super) fn barrier<C: Comm + ?Sized>(comm: &C) -> CommResult<()> {
    let (rank, size) = (comm.rank(), comm.size());
    let mut step = 1;
    let mut round = 0u64;
    while step < size {
        comm.send_tagged((rank + step) % size, TAG_BARRIER + round, &[])?;
        comm.recv_tagged((rank + size - step) % size, TAG_BARRIER + round)?;
        step <<= 1;
        round += 1;
    }
    Ok(())
}

pub(super) fn broadcast<C: Comm + ?Sized>(
    comm: &C,
    data: &mut Vec<u8>,
    root: Rank,
) -> CommResult<()> {
    check_rank(comm, root)?;
    let size = comm.size();
    let vrank = (comm.rank() + size - root) % size;
    let mut mask = 1;
    while mask < size {
        if vrank & mask != 0 {
            let parent = (vrank - mask + root) % size;
            *data = Vec::from(comm.recv_tagged(parent, TAG_BCAST)?);
            break;
        }
        mask <<= 1;
    }
    mask >>= 1;
    while mask > 0 {
        if vrank + mask < size {
            comm.send_tagged((vrank + mask + root) % size, TAG_BCAST, data)?;
        }
        mask >>= 1;
    }
    Ok(())
}

/// Reduces `acc` element-wise to rank 0 along a binomial tree, folding each
/// child's partial result into the local one with `f`, then broadcasts the
/// result so every rank ends with it.
pub(super) fn all_reduce<C, T>(
    comm: &C,
    acc: &mut [T],
    op: &'static str,
    f: fn(T, T) -> T,
) -> CommResult<()>
where
    C: Comm + ?Sized,
    T: FromBytes + IntoBytes + Immutable + Copy,
{
    let (rank, size) = (comm.rank(), comm.size());
    let mut mask = 1;
    while mask < size {
        if rank & mask == 0 {
            let child = rank | mask;
            if child < size {
                let part = comm.recv_tagged(child, TAG_REDUCE)?;
                fold_into(acc, &part, op, child, f)?;
            }
        } else {
            comm.send_tagged(rank & !mask, TAG_REDUCE, acc.as_bytes())?;
            break;
        }
        mask <<= 1;
    }
    let mut buf = if rank == 0 {
        acc.as_bytes().to_vec()
    } else {
        Vec::new()
    };
    broadcast(comm, &mut buf, 0)?;
    copy_exact(acc.as_mut_bytes(), &buf, op, 0)
}

/// Combines a received partial result (raw bytes) into `acc`.
fn fold_into<T>(
    acc: &mut [T],
    part: &[u8],
    op: &'static str,
    from: Rank,
    f: fn(T, T) -> T,
) -> CommResult<()>
where
    T: FromBytes + IntoBytes + Immutable + Copy,
{
    let mut other: Vec<T> = acc.to_vec();
    copy_exact(other.as_mut_bytes(), part, op, from)?;
    for (a, b) in acc.iter_mut().zip(other) {
        *a = f(*a, b);
    }
    Ok(())
}

/// Copies `src` into `dst`, failing with [`CommError::Mismatch`] if the lengths differ.
fn copy_exact(dst: &mut [u8], src: &[u8], op: &'static str, from: Rank) -> CommResult<()> {
    if dst.len() != src.len() {
        return Err(CommError::Mismatch {
            op,
            rank: from,
            got: src.len(),
            expected: dst.len(),
        });
    }
    dst.copy_from_slice(src);
    Ok(())
}

pub(super) fn all_reduce_u64<C: Comm + ?Sized>(
    comm: &C,
    values: &mut [u64],
    op: ReduceOp,
) -> CommResult<()> {
    let f: fn(u64, u64) -> u64 = match op {
        ReduceOp::And => |a, b| a & b,
        ReduceOp::Or => |a, b| a | b,
        ReduceOp::Min => u64::min,
        ReduceOp::Max => u64::max,
        ReduceOp::Sum => u64::wrapping_add,
    };
    all_reduce(comm, values, "all_reduce_u64", f)
}

pub(super) fn all_reduce_f64<C: Comm + ?Sized>(
    comm: &C,
    values: &mut [f64],
    op: ReduceOp,
) -> CommResult<()> {
    let f: fn(f64, f64) -> f64 = match op {
        ReduceOp::Min => f64::min,
        ReduceOp::Max => f64::max,
        ReduceOp::Sum => |a, b| a + b,
        ReduceOp::And | ReduceOp::Or => {
            return Err(CommError::Unsupported(format!(
                "{op:?} is not defined for f64 values"
            )))
        }
    };
    all_reduce(comm, values, "all_reduce_f64", f)
}

/// Gathers every rank's `data` on `root` along the binomial tree of
/// [`broadcast`]: each rank receives its subtree's contributions from its
/// children, in rank order from the root, and sends them on to its parent
/// in one message. Every rank talks to at most log2(size) + 1 others, so
/// the root does not need a connection to every rank.
pub(super) fn gather<C: Comm + ?Sized>(
    comm: &C,
    data: &[u8],
    root: Rank,
) -> CommResult<Option<Vec<Bytes>>> {
    check_rank(comm, root)?;
    let size = comm.size();
    let vrank = (comm.rank() + size - root) % size;
    // This rank's subtree, in order from `vrank`.
    let mut parts = vec![Bytes::copy_from_slice(data)];
    let mut mask = 1;
    while mask < size {
        if vrank & mask != 0 {
            let parent = (vrank - mask + root) % size;
            comm.send_tagged(parent, TAG_GATHER, &pack(&parts))?;
            return Ok(None);
        }
        let child = vrank + mask;
        if child < size {
            let from = (child + root) % size;
            let expected = mask.min(size - child);
            let got = unpack(comm.recv_tagged(from, TAG_GATHER)?, from, "gather")?;
            if got.len() != expected {
                return Err(CommError::Mismatch {
                    op: "gather",
                    rank: from,
                    got: got.len(),
                    expected,
                });
            }
            parts.extend(got);
        }
        mask <<= 1;
    }
    // At the root: in order from the root; rotate into rank order.
    parts.rotate_right(root);
    Ok(Some(parts))
}

/// One message of contributions: their count and lengths (`u64` each),
/// then the contributions one after the other.
fn pack(parts: &[Bytes]) -> Vec<u8> {
    let head: Vec<u64> = std::iter::once(parts.len() as u64)
        .chain(parts.iter().map(|p| p.len() as u64))
        .collect();
    let mut m = Vec::with_capacity(head.len() * 8 + parts.iter().map(|p| p.len()).sum::<usize>());
    m.extend_from_slice(head.as_bytes());
    for p in parts {
        m.extend_from_slice(p);
    }
    m
}

/// The contributions of a [`pack`]ed message from `from` in collective
/// `op`; a message that does not add up is a mismatch naming it.
fn unpack(message: Bytes, from: Rank, op: &'static str) -> CommResult<Vec<Bytes>> {
    let mismatch = |got: usize, expected: usize| CommError::Mismatch {
        op,
        rank: from,
        got,
        expected,
    };
    let word = |at: usize| -> Option<u64> {
        let mut w = [0u8; 8];
        w.copy_from_slice(message.get(at..at + 8)?);
        Some(u64::from_ne_bytes(w))
    };
    let count = word(0).ok_or_else(|| mismatch(message.len(), 8))?;
    // Each contribution takes at least its length's word.
    let count = usize::try_from(count)
        .ok()
        .filter(|c| c.saturating_mul(8) < message.len())
        .ok_or_else(|| mismatch(message.len(), 8))?;
    let head = (count + 1) * 8;
    let mut lens = Vec::with_capacity(count);
    let mut total = 0usize;
    for i in 0..count {
        let len = word(8 + i * 8)
            .and_then(|l| usize::try_from(l).ok())
            .ok_or_else(|| mismatch(message.len(), head))?;
        total = total.saturating_add(len);
        lens.push(len);
    }
    if message.len() - head != total {
        return Err(mismatch(message.len() - head, total));
    }
    let mut rest = message.slice(head..);
    Ok(lens.into_iter().map(|len| rest.split_to(len)).collect())
}

pub(super) fn all_gather<C: Comm + ?Sized>(comm: &C, data: &[u8]) -> CommResult<Vec<Bytes>> {
    let gathered = gather(comm, data, 0)?;
    // One broadcast of every contribution, packed as the gather's are.
    let mut message = gathered.as_deref().map(pack).unwrap_or_default();
    broadcast(comm, &mut message, 0)?;
    if let Some(parts) = gathered {
        return Ok(parts);
    }
    let parts = unpack(Bytes::from(message), 0, "all_gather")?;
    if parts.len() != comm.size() {
        return Err(CommError::Mismatch {
            op: "all_gather",
            rank: 0,
            got: parts.len(),
            expected: comm.size(),
        });
    }
    Ok(parts)
}

#[cfg(test)]
mod tests;
