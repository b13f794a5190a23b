//! The Reed-Solomon code of a stripe shape (the `reed-solomon-erasure`
//! crate's, GF(2^8)).

use crate::level::erasure::{CodecError, ErasureCode};
use reed_solomon_erasure::galois_8::ReedSolomon;

/// A code of `k` data and `p` parity shards.
pub(crate) struct Code {
    rs: ReedSolomon,
}

impl Code {
    /// A code of `k` data and `p` parity shards.
    pub(crate) fn new(k: usize, p: usize) -> Result<Self, CodecError> {
        ReedSolomon::new(k, p)
            .map(|rs| Self { rs })
            .map_err(|e| CodecError(format!("{e:?} (k = {k}, p = {p})")))
    }
}

impl ErasureCode for Code {
    fn coefficients(&self, index: usize) -> Result<Vec<u8>, CodecError> {
        let mut out = vec![vec![0u8; 1]; self.rs.parity_shard_count()];
        self.rs
            .encode_single_sep(index, &[1], &mut out)
            .map_err(|e| CodecError(format!("{e:?}")))?;
        Ok(out.into_iter().map(|o| o[0]).collect())
    }

    fn reconstruct(&self, shards: &mut [Option<Vec<u8>>]) -> Result<(), CodecError> {
        self.rs
            .reconstruct_data(shards)
            .map_err(|e| CodecError(format!("{e:?}")))
    }

    fn encode(&self, data: &[&[u8]], parity: &mut [Vec<u8>]) -> Result<(), CodecError> {
        self.rs
            .encode_sep(data, parity)
            .map_err(|e| CodecError(format!("{e:?}")))
    }
}

#[cfg(test)]
mod tests;
