//! The session's global data sets and the subsets of them the protected
//! variables are: what they are and the checks they pass (the calls are in
//! `datasets`).
//!
//! A global data set is an array of `dims` elements of one type, in
//! row-major order; a subset is the hyperslab of it (`offset`, `count` per
//! dimension) one protected variable holds.

use crate::status::Failure;
use std::collections::BTreeMap;
use std::os::raw::c_int;

/// FTI's largest number of dimensions.
pub(crate) const MAX_DIMS: usize = 32;

/// `FTIT_hsize_t`: HDF5's size type, 64 bits.
#[allow(non_camel_case_types)]
pub type FTIT_hsize_t = u64;

/// A global data set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Global {
    pub name: String,
    /// Elements per dimension, outermost first.
    pub dims: Vec<u64>,
    /// Bytes per element.
    pub width: usize,
    /// Set by `FTI_RecoverDatasetDimension` from the file recovered from.
    pub recovered_dims: bool,
}

impl Global {
    /// Bytes of the whole data set, if they can be counted.
    pub fn bytes(&self) -> Option<u64> {
        self.dims
            .iter()
            .try_fold(self.width as u64, |n, d| n.checked_mul(*d))
    }
}

/// The part of a global data set one protected variable holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Subset {
    /// The global data set's id.
    pub did: c_int,
    pub offset: Vec<u64>,
    pub count: Vec<u64>,
}

impl Subset {
    /// Elements it holds.
    pub fn elements(&self) -> Option<u64> {
        self.count.iter().try_fold(1u64, |n, c| n.checked_mul(*c))
    }
}

/// The session's data sets.
#[derive(Default, Debug)]
pub(crate) struct Datasets {
    pub global: BTreeMap<c_int, Global>,
    /// By protected variable id.
    pub subsets: BTreeMap<u32, Subset>,
    /// A variable's own name and shape (`FTI_DefineDataset`,
    /// `FTI_SetAttribute`).
    pub shapes: BTreeMap<u32, (String, Vec<u64>)>,
    /// Groups handed out (`FTI_InitGroup`).
    pub groups: c_int,
}

/// `rank` sizes read from `dims`, each positive.
///
/// # Safety
/// `dims` must be null or point to `rank` readable values.
pub(crate) unsafe fn sizes<T: Copy + TryInto<u64>>(
    rank: c_int,
    dims: *const T,
    what: &str,
    positive: bool,
) -> Result<Vec<u64>, Failure> {
    let n = usize::try_from(rank)
        .ok()
        .filter(|n| (1..=MAX_DIMS).contains(n))
        .ok_or_else(|| Failure::new(format!("{rank} dimensions (must be 1 to {MAX_DIMS})")))?;
    if dims.is_null() {
        return Err(Failure::new(format!("the {what} are null")));
    }
    // SAFETY: checked non-null; the caller passes `rank` values.
    let raw = unsafe { std::slice::from_raw_parts(dims, n) };
    raw.iter()
        .map(|d| {
            (*d).try_into()
                .ok()
                .filter(|d| !positive || *d > 0)
                .ok_or_else(|| {
                    Failure::new(format!(
                        "the {what} must be {}",
                        if positive { "positive" } else { "non-negative" }
                    ))
                })
        })
        .collect()
}

/// Checks `subset` against its global data set: as many dimensions, and
/// inside it.
pub(crate) fn check_subset(global: &Global, subset: &Subset) -> Result<(), Failure> {
    if subset.offset.len() != global.dims.len() {
        return Err(Failure::new(format!(
            "{} dimensions, the global data set {} has {}",
            subset.offset.len(),
            global.name,
            global.dims.len()
        )));
    }
    for (k, ((o, c), d)) in subset
        .offset
        .iter()
        .zip(&subset.count)
        .zip(&global.dims)
        .enumerate()
    {
        if o.checked_add(*c).is_none_or(|end| end > *d) {
            return Err(Failure::new(format!(
                "dimension {k}: {c} elements from {o} pass the global data set {}'s {d}",
                global.name
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
