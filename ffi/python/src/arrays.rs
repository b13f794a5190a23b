//! The memory of a numpy array, checked for frame to use in place: a
//! protected array is written to checkpoints and restored into where it
//! lies, and a message is sent from or received into the array itself.
//!
//! An array qualifies when it is contiguous (C or Fortran order), aligned,
//! in the machine's byte order, and of a plain numeric type: booleans,
//! signed and unsigned integers of 8 to 64 bits, floats of 16 to 64 bits,
//! complex numbers (as pairs of floats), or raw bytes (`S`, `V` without
//! fields). Arrays of Python objects, strings and dates hold pointers or
//! layouts that mean nothing in another process, and are refused.

use frame_core::ElemType;
use numpy::npyffi::NPY_ARRAY_WRITEABLE;
use numpy::{PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

/// The memory of a checked array.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Memory {
    pub ptr: *mut u8,
    /// Number of elements of `elem` (twice the array's length for complex
    /// numbers; its size in bytes for raw bytes).
    pub count: usize,
    pub elem: ElemType,
}

impl Memory {
    /// Size in bytes.
    pub fn bytes(&self) -> usize {
        self.count * self.elem.size()
    }

    /// The memory as bytes.
    ///
    /// # Safety
    /// The array it came from is alive and not resized meanwhile.
    pub unsafe fn as_slice<'a>(&self) -> &'a [u8] {
        if self.count == 0 {
            return &[];
        }
        // SAFETY: forwarded to the caller; `check` found the array
        // contiguous over `bytes()` bytes.
        unsafe { std::slice::from_raw_parts(self.ptr, self.bytes()) }
    }

    /// The memory as bytes to write.
    ///
    /// # Safety
    /// As [`as_slice`](Self::as_slice), and the array is writeable (checked
    /// by [`writable`]) and not read or written by anyone else meanwhile.
    pub unsafe fn as_mut_slice<'a>(&self) -> &'a mut [u8] {
        if self.count == 0 {
            return &mut [];
        }
        // SAFETY: forwarded to the caller.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.bytes()) }
    }
}

/// The element type frame stores a numpy dtype as, and how many of them
/// one array element is.
fn elem_of(kind: u8, itemsize: usize) -> Option<(ElemType, usize)> {
    use ElemType::*;
    Some(match (kind, itemsize) {
        (b'b', 1) | (b'u', 1) => (U8, 1),
        (b'u', 2) => (U16, 1),
        (b'u', 4) => (U32, 1),
        (b'u', 8) => (U64, 1),
        (b'i', 1) => (I8, 1),
        (b'i', 2) => (I16, 1),
        (b'i', 4) => (I32, 1),
        (b'i', 8) => (I64, 1),
        (b'f', 2) => (U16, 1),
        (b'f', 4) => (F32, 1),
        (b'f', 8) => (F64, 1),
        (b'c', 8) => (F32, 2),
        (b'c', 16) => (F64, 2),
        (b'S', n) | (b'V', n) if n > 0 => (Byte, n),
        _ => return None,
    })
}

/// Checks that `obj` is an array frame can use in place and returns it and
/// its memory; `what` names it in errors ("region 3", "the receive
/// buffer").
pub(crate) fn check<'py>(
    obj: &Bound<'py, PyAny>,
    what: &str,
) -> PyResult<(Bound<'py, PyUntypedArray>, Memory)> {
    let array = obj.cast::<PyUntypedArray>().map_err(|_| {
        let kind = obj
            .get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_else(|_| "?".into());
        PyTypeError::new_err(format!(
            "{what}: expected a numpy array, got {kind} (numpy.asarray makes one; keep it and use it in place)"
        ))
    })?;
    let dtype = array.dtype();
    let dtype_text = dtype.to_string();
    if dtype.has_fields() || dtype.has_subarray() || dtype.has_object() {
        return Err(PyTypeError::new_err(format!(
            "{what}: the array's dtype {dtype_text} is structured or holds objects (use a plain numeric dtype, or view the array as bytes: a.view(numpy.uint8))"
        )));
    }
    let Some((elem, per_item)) = elem_of(dtype.kind(), dtype.itemsize()) else {
        return Err(PyTypeError::new_err(format!(
            "{what}: frame cannot store arrays of dtype {dtype_text} (bool, integers, float16/32/64, complex64/128 and bytes are supported)"
        )));
    };
    if dtype.is_native_byteorder() == Some(false) {
        return Err(PyValueError::new_err(format!(
            "{what}: the array's dtype {dtype_text} is not in this machine's byte order (a.astype(a.dtype.newbyteorder('=')) converts it)"
        )));
    }
    if !array.is_contiguous() {
        return Err(PyValueError::new_err(format!(
            "{what}: the array is not contiguous (a slice with steps or a transposed view); frame uses an array's memory in place, so give it a contiguous array (numpy.ascontiguousarray makes a copy: keep the copy and use it)"
        )));
    }
    if !array.is_aligned() {
        return Err(PyValueError::new_err(format!(
            "{what}: the array is not aligned for its dtype {dtype_text}"
        )));
    }
    // SAFETY: `array` is a numpy array (checked by the cast above).
    let ptr = unsafe { (*array.as_array_ptr()).fields.data }.cast::<u8>();
    Ok((
        array.clone(),
        Memory {
            ptr,
            count: array.len() * per_item,
            elem,
        },
    ))
}

/// Like [`check`], and the array must be writeable.
pub(crate) fn writable<'py>(
    obj: &Bound<'py, PyAny>,
    what: &str,
) -> PyResult<(Bound<'py, PyUntypedArray>, Memory)> {
    let (array, memory) = check(obj, what)?;
    // SAFETY: `array` is a numpy array.
    let flags = unsafe { (*array.as_array_ptr()).fields.flags };
    if flags & NPY_ARRAY_WRITEABLE == 0 {
        return Err(PyValueError::new_err(format!(
            "{what}: the array is read-only (frame writes into it)"
        )));
    }
    Ok((array, memory))
}
