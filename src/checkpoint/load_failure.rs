//! Why a rank could not load a checkpoint: damaged data (another
//! checkpoint may do) or regions that do not fit (the program must change).

/// Why this rank could not load a checkpoint.
pub(super) enum LoadFailure {
    /// The data is missing or damaged: another checkpoint may do.
    Data(String),
    /// The protected regions do not fit the checkpoint: the program must change.
    Mismatch(String),
}

impl LoadFailure {
    pub(super) fn code(&self) -> u64 {
        match self {
            LoadFailure::Data(_) => 1,
            LoadFailure::Mismatch(_) => 2,
        }
    }

    pub(super) fn text(&self) -> &str {
        match self {
            LoadFailure::Data(s) | LoadFailure::Mismatch(s) => s,
        }
    }
}
