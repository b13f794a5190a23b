//! Composite types: `FTI_InitCompositeType`, `FTI_AddScalarField` and
//! `FTI_AddVectorField`.
//!
//! FTI uses the fields to lay a structure out in its HDF5 output; frame
//! stores a protected variable's bytes whatever their structure, so a
//! composite type is a type of its size (as `FTI_InitType` makes), and its
//! fields are checked (a known type, inside the structure) and recorded.

use crate::args::name_of;
use crate::status::{guard, guard_value, Failure, FTI_NSCS, FTI_SCES};
use crate::types::{self, fti_id_t};
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::os::raw::{c_char, c_int, c_void};

/// The most dimensions of a vector field (FTI's limit).
const MAX_DIMS: c_int = 32;

/// A composite type: its name, size in bytes and its fields' names.
#[derive(Debug)]
struct Composite {
    name: String,
    size: usize,
    fields: HashSet<String>,
}

thread_local! {
    static COMPOSITES: RefCell<HashMap<fti_id_t, Composite>> = RefCell::new(HashMap::new());
}

/// A composite type named `name` of `size` bytes; its handle, or `FTI_NSCS`.
/// `group` (FTI's HDF5 group for the type) is not used.
///
/// # Safety
/// `name` must be null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn FTI_InitCompositeType(
    name: *const c_char,
    size: usize,
    _group: *mut c_void,
) -> fti_id_t {
    guard_value(
        "FTI_InitCompositeType",
        |_| FTI_NSCS,
        || {
            let name = name_of(name)?;
            let bytes = i64::try_from(size).unwrap_or(i64::MAX);
            let handle = types::register(bytes)
                .map_err(|f| Failure::new(format!("composite type {name}: {}", f.message)))?;
            COMPOSITES.with(|c| {
                c.borrow_mut().insert(
                    handle,
                    Composite {
                        name,
                        size,
                        fields: HashSet::new(),
                    },
                )
            });
            Ok(handle)
        },
    )
}

/// Field `name` of type `fid` at `offset` bytes into composite type `id`.
///
/// # Safety
/// `name` must be null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn FTI_AddScalarField(
    id: fti_id_t,
    name: *const c_char,
    fid: fti_id_t,
    offset: usize,
) -> c_int {
    guard("FTI_AddScalarField", || {
        let name = name_of(name)?;
        add_field(id, name, fid, offset, 1)
    })
}

/// Field `name`, an array of type `tid` with `ndims` dimensions of
/// `dim_sizes`, at `offset` bytes into composite type `id`.
///
/// # Safety
/// `name` must be null or a NUL-terminated string; `dim_sizes` null or
/// `ndims` readable `int`s.
#[no_mangle]
pub unsafe extern "C" fn FTI_AddVectorField(
    id: fti_id_t,
    name: *const c_char,
    tid: fti_id_t,
    offset: usize,
    ndims: c_int,
    dim_sizes: *const c_int,
) -> c_int {
    guard("FTI_AddVectorField", || {
        let name = name_of(name)?;
        if !(1..=MAX_DIMS).contains(&ndims) {
            return Err(Failure::new(format!(
                "field {name}: {ndims} dimensions (must be 1 to {MAX_DIMS})"
            )));
        }
        if dim_sizes.is_null() {
            return Err(Failure::new(format!(
                "field {name}: the dimensions are null"
            )));
        }
        // SAFETY: checked non-null; the caller passes ndims (1..=32) ints.
        let dims = unsafe { std::slice::from_raw_parts(dim_sizes, ndims as usize) };
        let mut elements = 1usize;
        for &d in dims {
            let d = usize::try_from(d)
                .ok()
                .filter(|d| *d > 0)
                .ok_or_else(|| Failure::new(format!("field {name}: dimension {d}")))?;
            elements = elements
                .checked_mul(d)
                .ok_or_else(|| Failure::new(format!("field {name}: too many elements")))?;
        }
        add_field(id, name, tid, offset, elements)
    })
}

/// Records a field of `elements` elements of type `tid` in composite `id`.
fn add_field(
    id: fti_id_t,
    name: String,
    tid: fti_id_t,
    offset: usize,
    elements: usize,
) -> Result<c_int, Failure> {
    let width = types::layout(tid)
        .map_err(|f| Failure::new(format!("field {name}: {}", f.message)))?
        .width;
    let bytes = width
        .checked_mul(elements)
        .ok_or_else(|| Failure::new(format!("field {name}: too many bytes")))?;
    COMPOSITES.with(|c| {
        let mut c = c.borrow_mut();
        let composite = c.get_mut(&id).ok_or_else(|| {
            Failure::new(format!(
                "type handle {id} was not made by FTI_InitCompositeType"
            ))
        })?;
        if offset
            .checked_add(bytes)
            .is_none_or(|end| end > composite.size)
        {
            return Err(Failure::new(format!(
                "field {name} ({bytes} bytes at offset {offset}) does not fit in {} ({} bytes)",
                composite.name, composite.size
            )));
        }
        if composite.fields.contains(&name) {
            return Err(Failure::new(format!(
                "{} has a field {name} already",
                composite.name
            )));
        }
        composite.fields.insert(name);
        Ok(FTI_SCES)
    })
}

#[cfg(test)]
mod tests;
