//! The buffers of MPI's collectives with a part per rank: counts as MPI's
//! integers, one receive buffer with each rank's place in it, and the
//! parts handed out without copying.

use crate::comm::{Bytes, CommError, CommResult};

/// `len` as an MPI count.
pub(super) fn count_of(len: usize, what: &str) -> CommResult<i32> {
    i32::try_from(len)
        .map_err(|_| CommError::Unsupported(format!("{what} of {len} bytes is above MPI's count")))
}

/// A buffer for every rank's part, and where each part starts.
pub(super) fn receive_buffer(counts: &[i32], what: &str) -> CommResult<(Vec<u8>, Vec<i32>)> {
    let total: i64 = counts.iter().map(|c| i64::from(*c)).sum();
    let total = count_of(total as usize, what)?;
    let displs = counts
        .iter()
        .scan(0, |at, c| {
            let d = *at;
            *at += c;
            Some(d)
        })
        .collect();
    Ok((vec![0u8; total as usize], displs))
}

/// Every rank's part of `all`, without copying.
pub(super) fn split(all: Vec<u8>, counts: &[i32], displs: &[i32]) -> Vec<Bytes> {
    let all = Bytes::from(all);
    counts
        .iter()
        .zip(displs)
        .map(|(c, d)| all.slice(*d as usize..(*d + *c) as usize))
        .collect()
}
