//! FTI's type handles: the eleven basic C types, and the types a program
//! registers with `FTI_InitType` (opaque bytes of a given size).

use crate::status::{guard, Failure, FTI_SCES};
use frame_core::region::ElemType;
use std::cell::RefCell;
use std::os::raw::{c_int, c_long};

/// A type handle, as C sees it (`fti_id_t`).
#[allow(non_camel_case_types)]
pub type fti_id_t = c_int;

/// `char`
#[no_mangle]
pub static FTI_CHAR: fti_id_t = 1;
/// `short`
#[no_mangle]
pub static FTI_SHRT: fti_id_t = 2;
/// `int`
#[no_mangle]
pub static FTI_INTG: fti_id_t = 3;
/// `long`
#[no_mangle]
pub static FTI_LONG: fti_id_t = 4;
/// `unsigned char`
#[no_mangle]
pub static FTI_UCHR: fti_id_t = 5;
/// `unsigned short`
#[no_mangle]
pub static FTI_USHT: fti_id_t = 6;
/// `unsigned int`
#[no_mangle]
pub static FTI_UINT: fti_id_t = 7;
/// `unsigned long`
#[no_mangle]
pub static FTI_ULNG: fti_id_t = 8;
/// `float`
#[no_mangle]
pub static FTI_SFLT: fti_id_t = 9;
/// `double`
#[no_mangle]
pub static FTI_DBLE: fti_id_t = 10;
/// `long double`
#[no_mangle]
pub static FTI_LDBE: fti_id_t = 11;

/// The first handle `FTI_InitType` gives out.
const FIRST_USER: fti_id_t = 100;
/// The largest type a program may register, in bytes.
const MAX_TYPE: c_int = 1 << 30;

/// `long double` as the platform's C compilers lay it out.
const LONG_DOUBLE: usize = 16;

thread_local! {
    static USER: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

/// How frame stores elements of a type: its element type and how many
/// bytes one C element takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    pub elem: ElemType,
    pub width: usize,
}

impl Layout {
    fn of(elem: ElemType) -> Self {
        Self {
            elem,
            width: elem.size(),
        }
    }

    fn bytes(width: usize) -> Self {
        Self {
            elem: ElemType::Byte,
            width,
        }
    }

    /// frame's element count for `count` C elements.
    pub fn elements(&self, count: usize) -> Option<usize> {
        count.checked_mul(self.width / self.elem.size())
    }
}

/// The layout of handle `tid`.
pub(crate) fn layout(tid: fti_id_t) -> Result<Layout, Failure> {
    let long = if std::mem::size_of::<c_long>() == 8 {
        (ElemType::I64, ElemType::U64)
    } else {
        (ElemType::I32, ElemType::U32)
    };
    Ok(match tid {
        1 => Layout::of(ElemType::I8),
        2 => Layout::of(ElemType::I16),
        3 => Layout::of(ElemType::I32),
        4 => Layout::of(long.0),
        5 => Layout::of(ElemType::U8),
        6 => Layout::of(ElemType::U16),
        7 => Layout::of(ElemType::U32),
        8 => Layout::of(long.1),
        9 => Layout::of(ElemType::F32),
        10 => Layout::of(ElemType::F64),
        11 => Layout::bytes(LONG_DOUBLE),
        t if t >= FIRST_USER => USER
            .with(|u| u.borrow().get((t - FIRST_USER) as usize).copied())
            .map(Layout::bytes)
            .ok_or_else(|| {
                Failure::new(format!("type handle {tid} was not made by FTI_InitType"))
            })?,
        _ => return Err(Failure::new(format!("unknown type handle {tid}"))),
    })
}

/// A new handle for elements of `size` bytes (1 to 2^30).
pub(crate) fn register(size: i64) -> Result<fti_id_t, Failure> {
    if !(1..=i64::from(MAX_TYPE)).contains(&size) {
        return Err(Failure::new(format!(
            "a type of {size} bytes (must be 1 to {MAX_TYPE})"
        )));
    }
    Ok(USER.with(|u| {
        let mut u = u.borrow_mut();
        u.push(size as usize);
        FIRST_USER + (u.len() as fti_id_t - 1)
    }))
}

/// Registers a type of `size` bytes and stores its handle in `*type`.
///
/// # Safety
/// `type` must be null or point to a writable `fti_id_t`.
#[no_mangle]
pub unsafe extern "C" fn FTI_InitType(r#type: *mut fti_id_t, size: c_int) -> c_int {
    guard("FTI_InitType", || {
        if r#type.is_null() {
            return Err(Failure::new("the type pointer is null"));
        }
        let handle = register(i64::from(size))?;
        // SAFETY: checked non-null; the caller guarantees it is writable.
        unsafe { r#type.write(handle) };
        Ok(FTI_SCES)
    })
}

#[cfg(test)]
mod tests;
