//! Data sets: global data sets shared by the ranks and the subsets the
//! protected variables are of them (`FTI_DefineGlobalDataset`,
//! `FTI_AddSubset` and their updates and queries; what they are is
//! `subsets`'). Checkpoints at `FTI_L4_H5_SINGLE` write every global data
//! set whole into one file (see `single_file`), from which a run on another
//! number of ranks recovers each variable's subset.

use crate::args::{name_of, var_id};
use crate::session;
use crate::status::{guard, guard_value, Failure, FTI_SCES};
use crate::subsets::{check_subset, sizes, FTIT_hsize_t, Global, Subset};
use crate::types::{self, fti_id_t};
use std::collections::BTreeMap;
use std::os::raw::{c_char, c_int};

/// Defines global data set `id`: `rank` dimensions of `dim_length`
/// elements of type `tid`, named `name` (`h5group` is not used).
///
/// # Safety
/// `dim_length` must be null or point to `rank` values; `name` null or a
/// NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn FTI_DefineGlobalDataset(
    id: c_int,
    rank: c_int,
    dim_length: *const FTIT_hsize_t,
    name: *const c_char,
    _h5group: *mut std::ffi::c_void,
    tid: fti_id_t,
) -> c_int {
    guard("FTI_DefineGlobalDataset", || {
        let name = name_of(name)?;
        // SAFETY: as the caller guarantees.
        let dims = unsafe { sizes(rank, dim_length, "dimensions", true) }
            .map_err(|f| Failure::new(format!("global data set {id} ({name}): {}", f.message)))?;
        let width = types::layout(tid)?.width;
        let global = Global {
            name,
            dims,
            width,
            recovered_dims: false,
        };
        if global.bytes().is_none() {
            return Err(Failure::new(format!(
                "global data set {id} ({}) is too large",
                global.name
            )));
        }
        session::with(|s| {
            if s.datasets.global.contains_key(&id) {
                return Err(Failure::new(format!(
                    "global data set {id} is defined already"
                )));
            }
            s.datasets.global.insert(id, global);
            Ok(FTI_SCES)
        })
    })
}

/// Changes the dimensions of global data set `id`.
///
/// # Safety
/// `dim_length` must be null or point to `rank` values.
#[no_mangle]
pub unsafe extern "C" fn FTI_UpdateGlobalDataset(
    id: c_int,
    rank: c_int,
    dim_length: *const FTIT_hsize_t,
) -> c_int {
    guard("FTI_UpdateGlobalDataset", || {
        // SAFETY: as the caller guarantees.
        let dims = unsafe { sizes(rank, dim_length, "dimensions", true) }?;
        session::with(|s| {
            let g = s
                .datasets
                .global
                .get_mut(&id)
                .ok_or_else(|| Failure::new(format!("no global data set {id}")))?;
            g.dims = dims;
            Ok(FTI_SCES)
        })
    })
}

/// Makes protected variable `id` the hyperslab (`offset`, `count`) of
/// global data set `did`, replacing what it was part of before.
///
/// # Safety
/// `offset` and `count` must be null or point to `rank` values.
#[no_mangle]
pub unsafe extern "C" fn FTI_AddSubset(
    id: c_int,
    rank: c_int,
    offset: *const FTIT_hsize_t,
    count: *const FTIT_hsize_t,
    did: c_int,
) -> c_int {
    // SAFETY: as the caller guarantees.
    guard("FTI_AddSubset", || unsafe {
        subset(id, rank, offset, count, did)
    })
}

/// Changes the hyperslab protected variable `id` is of global data set
/// `did`.
///
/// # Safety
/// As [`FTI_AddSubset`].
#[no_mangle]
pub unsafe extern "C" fn FTI_UpdateSubset(
    id: c_int,
    rank: c_int,
    offset: *const FTIT_hsize_t,
    count: *const FTIT_hsize_t,
    did: c_int,
) -> c_int {
    // SAFETY: as the caller guarantees.
    guard("FTI_UpdateSubset", || unsafe {
        subset(id, rank, offset, count, did)
    })
}

/// Records variable `id` as a subset of `did`, checked against the data
/// set and the variable.
///
/// # Safety
/// As [`FTI_AddSubset`].
unsafe fn subset(
    id: c_int,
    rank: c_int,
    offset: *const FTIT_hsize_t,
    count: *const FTIT_hsize_t,
    did: c_int,
) -> Result<c_int, Failure> {
    let var = var_id(id)?;
    let subset = Subset {
        did,
        // SAFETY: `rank` values at the pointer, as the caller guarantees.
        offset: unsafe { sizes(rank, offset, "offsets", false) }?,
        // SAFETY: `rank` values at the pointer, as the caller guarantees.
        count: unsafe { sizes(rank, count, "counts", false) }?,
    };
    session::with(|s| {
        let global = s
            .datasets
            .global
            .get(&did)
            .ok_or_else(|| Failure::new(format!("variable {var}: no global data set {did}")))?;
        check_subset(global, &subset)
            .map_err(|f| Failure::new(format!("variable {var}: {}", f.message)))?;
        let v = s
            .vars
            .get(&var)
            .ok_or_else(|| Failure::new(format!("variable {var} is not protected")))?;
        if v.layout.width != global.width {
            return Err(Failure::new(format!(
                "variable {var} has elements of {} bytes, the global data set {} of {}",
                v.layout.width, global.name, global.width
            )));
        }
        s.datasets.subsets.insert(var, subset);
        Ok(FTI_SCES)
    })
}

/// The number of dimensions of global data set `did` (`FTI_NSCS` if none).
#[no_mangle]
pub extern "C" fn FTI_GetDatasetRank(did: c_int) -> c_int {
    guard("FTI_GetDatasetRank", || {
        session::with(|s| {
            s.datasets
                .global
                .get(&did)
                .map(|g| g.dims.len() as c_int)
                .ok_or_else(|| Failure::new(format!("no global data set {did}")))
        })
    })
}

thread_local! {
    /// The spans handed out, kept for as long as the thread lives (FTI
    /// returns a pointer into its own records).
    static SPANS: std::cell::RefCell<BTreeMap<c_int, Vec<FTIT_hsize_t>>> =
        const { std::cell::RefCell::new(BTreeMap::new()) };
}

/// The dimensions of global data set `did`, if it has `rank` of them (null
/// otherwise). The array stays valid until the next call for `did`.
#[no_mangle]
pub extern "C" fn FTI_GetDatasetSpan(did: c_int, rank: c_int) -> *const FTIT_hsize_t {
    guard_value(
        "FTI_GetDatasetSpan",
        |_| std::ptr::null(),
        || {
            let dims = session::with(|s| {
                let g = s
                    .datasets
                    .global
                    .get(&did)
                    .ok_or_else(|| Failure::new(format!("no global data set {did}")))?;
                if usize::try_from(rank).ok() != Some(g.dims.len()) {
                    return Err(Failure::new(format!(
                        "global data set {did} has {} dimensions, not {rank}",
                        g.dims.len()
                    )));
                }
                Ok(g.dims.clone())
            })?;
            Ok(SPANS.with(|spans| {
                let mut spans = spans.borrow_mut();
                let kept = spans.entry(did).or_default();
                *kept = dims;
                kept.as_ptr()
            }))
        },
    )
}

/// On a restart on another number of ranks (`[restart] failure = 3`),
/// sets global data set `did`'s dimensions to those of the file being
/// recovered.
#[no_mangle]
pub extern "C" fn FTI_RecoverDatasetDimension(did: c_int) -> c_int {
    guard("FTI_RecoverDatasetDimension", || {
        session::with(|s| {
            let found = s.single_recovery.as_ref().ok_or_else(|| {
                Failure::new("this is no restart from a single file ([restart] failure = 3)")
            })?;
            let stored = found.dims(did)?;
            let g = s
                .datasets
                .global
                .get_mut(&did)
                .ok_or_else(|| Failure::new(format!("no global data set {did}")))?;
            if stored.len() != g.dims.len() {
                return Err(Failure::new(format!(
                    "global data set {did} has {} dimensions, the file {}",
                    g.dims.len(),
                    stored.len()
                )));
            }
            g.dims = stored;
            g.recovered_dims = true;
            Ok(FTI_SCES)
        })
    })
}
