//! What a checkpoint keeps of its rank's message log (localised
//! recovery): the communicator's [`MessageCounts`] when the checkpoint was
//! written, stored as a region of its own under an id programs cannot
//! use, so that it is checksummed, promoted and kept like the data it
//! describes. A replacement restored from the checkpoint numbers its
//! messages on from them and asks the survivors for the rest. Written only
//! by a communicator that keeps a log.

use crate::comm::MessageCounts;
use crate::region::{ElemType, RegionId, RegionInfo};

/// The region id the counts are stored under.
pub(crate) const REGION: RegionId = RegionId::MAX;

/// The counts as a region: its description and bytes.
pub(super) fn encode(counts: &MessageCounts) -> (RegionInfo, Vec<u8>) {
    let bytes = serde_json::to_vec(counts).unwrap_or_default();
    let info = RegionInfo {
        id: REGION,
        elem: ElemType::U8,
        count: bytes.len() as u64,
    };
    (info, bytes)
}

/// The region ids frame keeps for localised recovery: the counts, and
/// the promotion bookkeeping (see `promotion/state.rs`).
pub(super) const RESERVED: [RegionId; 2] = [REGION, super::promotion::state::REGION];

/// Why a program's region cannot be stored beside the counts.
pub(super) fn reserved() -> String {
    format!(
        "region ids {} and {REGION} are reserved by frame for localised recovery",
        super::promotion::state::REGION
    )
}

#[cfg(test)]
mod tests;

/// The most bytes the counts of a job may take (far above what any job
/// size needs): a damaged header cannot make a rank allocate more.
const MAX_BYTES: u64 = 1 << 28;

/// The counts checkpoint `id` (its `file`) saved.
pub(super) fn decode(
    id: u64,
    file: &crate::format::CheckpointFile,
) -> Result<MessageCounts, String> {
    let bytes = file
        .load_small_region(REGION, MAX_BYTES)
        .map_err(|e| format!("checkpoint {id}: its message counts: {e}"))?
        .ok_or_else(|| {
            format!("checkpoint {id} holds no message counts (the communicator kept no log when it was written)")
        })?;
    serde_json::from_slice(&bytes)
        .map_err(|e| format!("checkpoint {id}: its message counts do not parse: {e}"))
}
