//! The XOR code: one parity shard, the byte-wise XOR of a stripe's data
//! shards; a lost shard is the XOR of the others.

use crate::level::erasure::{add, CodecError, ErasureCode};

/// XOR parity over `k` data shards.
pub(crate) struct Code {
    k: usize,
}

impl Code {
    /// A code of `k` data shards and `p` parity shards, which must be one.
    pub(crate) fn new(k: usize, p: usize) -> Result<Self, CodecError> {
        if p != 1 || k == 0 {
            return Err(CodecError(format!(
                "XOR parity takes one parity shard and some data (k = {k}, p = {p})"
            )));
        }
        Ok(Self { k })
    }
}

impl ErasureCode for Code {
    fn coefficients(&self, index: usize) -> Result<Vec<u8>, CodecError> {
        if index >= self.k {
            return Err(CodecError(format!("data shard {index} of {}", self.k)));
        }
        Ok(vec![1])
    }

    fn reconstruct(&self, shards: &mut [Option<Vec<u8>>]) -> Result<(), CodecError> {
        if shards.len() != self.k + 1 {
            return Err(CodecError(format!(
                "{} shards for {} data and one parity",
                shards.len(),
                self.k
            )));
        }
        let missing: Vec<usize> = (0..shards.len()).filter(|i| shards[*i].is_none()).collect();
        let lost = match missing[..] {
            [] => return Ok(()),
            [i] => i,
            _ => {
                return Err(CodecError(format!(
                    "{} shards lost, XOR parity rebuilds one",
                    missing.len()
                )))
            }
        };
        let mut present = shards.iter().flatten();
        let Some(first) = present.next() else {
            return Err(CodecError("no shard left".into()));
        };
        let mut sum = first.clone();
        for shard in present {
            if shard.len() != sum.len() {
                return Err(CodecError("shards of different lengths".into()));
            }
            add(&mut sum, shard);
        }
        // Only data shards are asked for; a lost parity shard is left out.
        if lost < self.k {
            shards[lost] = Some(sum);
        }
        Ok(())
    }

    fn encode(&self, data: &[&[u8]], parity: &mut [Vec<u8>]) -> Result<(), CodecError> {
        let [p] = parity else {
            return Err(CodecError(format!("{} parity shards", parity.len())));
        };
        if data.len() != self.k || data.iter().any(|d| d.len() != p.len()) {
            return Err(CodecError("shards of different lengths".into()));
        }
        p.iter_mut().for_each(|b| *b = 0);
        for d in data {
            add(p, d);
        }
        Ok(())
    }
}
