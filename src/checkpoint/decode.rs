//! The pieces of a level-3 rebuild that move bytes: the windows a group
//! member's shards are moved in (read by
//! [`ShardReader`](crate::level::erasure::ShardReader)), and cutting the
//! blobs being decoded back into the files of their ranks as they come.
//!
//! A decoder never holds more than one window of every member's shard of
//! one stripe, and the windows it decoded; see
//! [`rebuild`](super::rebuild) for the exchange.

use crate::format::Metadata;
use crate::level::erasure::BlobEntry;
use crate::level::Level;

/// Bytes of a shard moved and decoded at a time.
pub(crate) const WINDOW: u64 = 4 << 20;

/// The windows of a shard of `piece` bytes: (offset, length).
pub(super) fn windows(piece: u64) -> impl Iterator<Item = (u64, usize)> {
    (0..piece.div_ceil(WINDOW)).map(move |i| {
        let at = i * WINDOW;
        (at, WINDOW.min(piece - at) as usize)
    })
}

/// What a [`Splitter`] found in the bytes fed to it.
pub(super) enum Cut<'a> {
    /// A rank's file starts: its level-1 record.
    Head(Metadata),
    /// The next bytes of the current rank's file.
    Data(u32, &'a [u8]),
}

/// A blob being decoded, fed in order and cut into its ranks' records
/// and files (the padding after the last file is dropped).
pub(super) struct Splitter {
    entries: std::vec::IntoIter<BlobEntry>,
    current: Option<BlobEntry>,
    record: Vec<u8>,
    data_left: u64,
}

impl Splitter {
    /// Cuts a blob of these entries.
    pub(super) fn new(entries: Vec<BlobEntry>) -> Self {
        let mut entries = entries.into_iter();
        let current = entries.next();
        Self {
            entries,
            current,
            record: Vec::new(),
            data_left: 0,
        }
    }

    /// Feeds the next bytes of the blob; `out` gets every file start and
    /// data piece they complete, in order.
    pub(super) fn feed(
        &mut self,
        mut bytes: &[u8],
        out: &mut dyn FnMut(Cut<'_>) -> Result<(), String>,
    ) -> Result<(), String> {
        while !bytes.is_empty() {
            let Some(e) = self.current.clone() else {
                return Ok(());
            };
            let want = e.record_len as usize - self.record.len();
            if want > 0 {
                let n = want.min(bytes.len());
                self.record.extend_from_slice(&bytes[..n]);
                bytes = &bytes[n..];
                if self.record.len() == e.record_len as usize {
                    let mut meta = Metadata::from_json(&self.record, "decoded level-3 record")
                        .map_err(|e| e.to_string())?;
                    if meta.rank != e.rank || meta.file_len != e.data_len {
                        return Err(format!(
                            "decoded record of rank {} does not match the layout",
                            e.rank
                        ));
                    }
                    meta.level = Level::L1.number();
                    self.data_left = e.data_len;
                    out(Cut::Head(meta))?;
                    if self.data_left == 0 {
                        self.next_entry();
                    }
                }
                continue;
            }
            let n = usize::try_from(self.data_left)
                .unwrap_or(usize::MAX)
                .min(bytes.len());
            out(Cut::Data(e.rank, &bytes[..n]))?;
            bytes = &bytes[n..];
            self.data_left -= n as u64;
            if self.data_left == 0 {
                self.next_entry();
            }
        }
        Ok(())
    }

    fn next_entry(&mut self) {
        self.current = self.entries.next();
        self.record.clear();
    }
}

#[cfg(test)]
mod tests;
