//! Default collectives built on the two transport primitives of [`Comm`].
//!
//! Broadcast and reduce use binomial trees rooted at the caller's root, the
//! barrier is a dissemination barrier, gather is linear. Reductions combine
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

pub(super) fn gather<C: Comm + ?Sized>(
    comm: &C,
    data: &[u8],
    root: Rank,
) -> CommResult<Option<Vec<Bytes>>> {
    check_rank(comm, root)?;
    if comm.rank() != root {
        comm.send_tagged(root, TAG_GATHER, data)?;
        return Ok(None);
    }
    let mut all = Vec::with_capacity(comm.size());
    for src in 0..comm.size() {
        if src == root {
            all.push(Bytes::copy_from_slice(data));
        } else {
            all.push(comm.recv_tagged(src, TAG_GATHER)?);
        }
    }
    Ok(Some(all))
}

pub(super) fn all_gather<C: Comm + ?Sized>(comm: &C, data: &[u8]) -> CommResult<Vec<Bytes>> {
    let gathered = gather(comm, data, 0)?;
    // One broadcast: every contribution's length, then the contributions.
    let head = comm.size() * 8;
    let mut message = match &gathered {
        Some(parts) => {
            let lens: Vec<u64> = parts.iter().map(|p| p.len() as u64).collect();
            let mut m = Vec::with_capacity(head + parts.iter().map(|p| p.len()).sum::<usize>());
            m.extend_from_slice(lens.as_bytes());
            for p in parts {
                m.extend_from_slice(p);
            }
            m
        }
        None => Vec::new(),
    };
    broadcast(comm, &mut message, 0)?;
    if let Some(parts) = gathered {
        return Ok(parts);
    }
    let mut sizes = vec![0u64; comm.size()];
    copy_exact(
        sizes.as_mut_bytes(),
        message.get(..head).unwrap_or(&[]),
        "all_gather",
        0,
    )?;
    let total: u64 = sizes.iter().sum();
    let body = message.len().saturating_sub(head);
    if message.len() < head || total != body as u64 {
        return Err(CommError::Mismatch {
            op: "all_gather",
            rank: 0,
            got: body,
            expected: usize::try_from(total).unwrap_or(usize::MAX),
        });
    }
    let mut rest = Bytes::from(message).split_off(head);
    Ok(sizes
        .into_iter()
        .map(|len| rest.split_to(len as usize))
        .collect())
}
