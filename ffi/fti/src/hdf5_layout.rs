//! What FTI programs describe for FTI's HDF5 output: groups
//! (`FTI_InitGroup`, `FTI_RenameGroup`), a variable's own data set name and
//! shape (`FTI_DefineDataset`, `FTI_SetAttribute`). frame writes no HDF5:
//! it keeps the names and checks that a shape holds its variable.

use crate::args::{name_of, var_id};
use crate::session;
use crate::status::{guard, Failure, FTI_SCES};
use crate::subsets::{sizes, MAX_DIMS};
use std::os::raw::{c_char, c_int};

/// Records protected variable `id`'s own shape (`rank` dimensions of
/// `dim_length`) and name, for FTI's HDF5 output; the shape must hold the
/// variable's elements.
///
/// # Safety
/// `dim_length` must be null or point to `rank` ints; `name` null or a
/// NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn FTI_DefineDataset(
    id: c_int,
    rank: c_int,
    dim_length: *const c_int,
    name: *const c_char,
    _h5group: *mut std::ffi::c_void,
) -> c_int {
    guard("FTI_DefineDataset", || {
        let var = var_id(id)?;
        let name = if name.is_null() {
            format!("Dataset_{id}")
        } else {
            name_of(name)?
        };
        // SAFETY: as the caller guarantees.
        let dims = unsafe { sizes(rank, dim_length, "dimensions", true) }
            .map_err(|f| Failure::new(format!("variable {var}: {}", f.message)))?;
        session::with(|s| {
            let v = s
                .vars
                .get(&var)
                .ok_or_else(|| Failure::new(format!("variable {var} is not protected")))?;
            let elements = dims.iter().try_fold(1u64, |n, d| n.checked_mul(*d));
            if elements != Some(v.count as u64) {
                return Err(Failure::new(format!(
                    "variable {var} holds {} elements, not the {dims:?} its shape says",
                    v.count
                )));
            }
            s.datasets.shapes.insert(var, (name, dims));
            Ok(FTI_SCES)
        })
    })
}

/// FTI's HDF5 group: its number, name and path, and its parent's children.
#[repr(C)]
pub struct FTIT_H5Group {
    id: c_int,
    name: [c_char; 256],
    full_name: [c_char; 256],
    children_no: c_int,
    children_id: [c_int; 256],
}

/// Copies `text` into a fixed C buffer, cut to fit with its NUL.
fn set_text(buf: &mut [c_char; 256], text: &str) {
    let bytes = text.as_bytes();
    let n = bytes.len().min(buf.len() - 1);
    for (b, t) in buf.iter_mut().zip(&bytes[..n]) {
        *b = *t as c_char;
    }
    buf[n] = 0;
}

/// The text of a fixed C buffer.
fn text_of(buf: &[c_char; 256]) -> String {
    let end = buf.iter().position(|c| *c == 0).unwrap_or(buf.len());
    buf[..end].iter().map(|c| *c as u8 as char).collect()
}

/// Fills `h5group` as group `name` below `parent` (the root when null),
/// for FTI's HDF5 output (frame keeps names only).
///
/// # Safety
/// `h5group` must be null or point to a writable `FTIT_H5Group`; `parent`
/// null or a readable and writable one; `name` null or a NUL-terminated
/// string.
#[no_mangle]
pub unsafe extern "C" fn FTI_InitGroup(
    h5group: *mut FTIT_H5Group,
    name: *const c_char,
    parent: *mut FTIT_H5Group,
) -> c_int {
    guard("FTI_InitGroup", || {
        let name = name_of(name)?;
        if h5group.is_null() {
            return Err(Failure::new(format!("group {name}: the group is null")));
        }
        let id = session::with(|s| {
            s.datasets.groups += 1;
            Ok(s.datasets.groups)
        })?;
        // SAFETY: checked non-null; the caller passes valid groups.
        let parent = unsafe { parent.as_mut() };
        let path = match &parent {
            Some(p) => format!("{}/{name}", text_of(&p.full_name).trim_end_matches('/')),
            None => format!("/{name}"),
        };
        // SAFETY: checked non-null; the caller passes a writable group.
        let group = unsafe { &mut *h5group };
        group.id = id;
        set_text(&mut group.name, &name);
        set_text(&mut group.full_name, &path);
        group.children_no = 0;
        if let Some(p) = parent {
            let at = usize::try_from(p.children_no).unwrap_or(usize::MAX);
            if at >= p.children_id.len() {
                return Err(Failure::new(format!(
                    "group {}: no room for another child",
                    text_of(&p.name)
                )));
            }
            p.children_id[at] = id;
            p.children_no += 1;
        }
        Ok(FTI_SCES)
    })
}

/// Renames `h5group`.
///
/// # Safety
/// `h5group` must be null or point to a group `FTI_InitGroup` filled;
/// `name` null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn FTI_RenameGroup(h5group: *mut FTIT_H5Group, name: *const c_char) -> c_int {
    guard("FTI_RenameGroup", || {
        let name = name_of(name)?;
        // SAFETY: the caller passes a group FTI_InitGroup filled, or null.
        let group = unsafe { h5group.as_mut() }
            .ok_or_else(|| Failure::new(format!("group {name}: the group is null")))?;
        let path = text_of(&group.full_name);
        let parent = path.rsplit_once('/').map_or("", |(p, _)| p);
        set_text(&mut group.name, &name);
        set_text(&mut group.full_name, &format!("{parent}/{name}"));
        Ok(FTI_SCES)
    })
}

/// FTI's `FTIT_dimension`.
#[repr(C)]
pub struct FTIT_dimension {
    ndims: c_int,
    count: [u64; 32],
}

/// FTI's `FTIT_attribute`: a name and dimensions for a variable's HDF5
/// data set.
#[repr(C)]
pub struct FTIT_attribute {
    dim: FTIT_dimension,
    name: [c_char; 256],
}

/// Sets the name (`FTI_ATTRIBUTE_NAME`, 1) and/or the dimensions
/// (`FTI_ATTRIBUTE_DIM`, 2) of protected variable `id`'s HDF5 data set;
/// frame records the name and checks the dimensions hold the variable.
#[no_mangle]
pub extern "C" fn FTI_SetAttribute(id: c_int, attribute: FTIT_attribute, flag: c_int) -> c_int {
    guard("FTI_SetAttribute", || {
        let var = var_id(id)?;
        if flag & !3 != 0 || flag == 0 {
            return Err(Failure::new(format!("flag {flag} (must be 1, 2 or 3)")));
        }
        session::with(|s| {
            let v = *s
                .vars
                .get(&var)
                .ok_or_else(|| Failure::new(format!("variable {var} is not protected")))?;
            let entry = s
                .datasets
                .shapes
                .entry(var)
                .or_insert_with(|| (format!("Dataset_{id}"), vec![v.count as u64]));
            if flag & 1 != 0 {
                entry.0 = text_of(&attribute.name);
            }
            if flag & 2 != 0 {
                let n = usize::try_from(attribute.dim.ndims)
                    .ok()
                    .filter(|n| (1..=MAX_DIMS).contains(n))
                    .ok_or_else(|| {
                        Failure::new(format!(
                            "variable {var}: {} dimensions",
                            attribute.dim.ndims
                        ))
                    })?;
                let dims = attribute.dim.count[..n].to_vec();
                let elements = dims.iter().try_fold(1u64, |a, d| a.checked_mul(*d));
                if elements != Some(v.count as u64) {
                    return Err(Failure::new(format!(
                        "variable {var} holds {} elements, not the {dims:?} the attribute says",
                        v.count
                    )));
                }
                entry.1 = dims;
            }
            Ok(FTI_SCES)
        })
    })
}
