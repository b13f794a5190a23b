//! [`RawRegion`]: a region given as a raw pointer and an element count.
//!
//! This is what the C interface registers: memory owned by the caller, which
//! frame reads during snapshots and writes during recovery. Constructing one is
//! the single unsafe step; everything after goes through the safe [`Region`]
//! trait.

use super::{ElemType, Region};

/// Caller-owned memory described by (pointer, element count, element type).
///
/// The size is fixed: to change it, protect the region again with the new
/// pointer and count (the C interface does exactly that).
#[derive(Debug)]
pub struct RawRegion {
    ptr: *mut u8,
    count: usize,
    elem: ElemType,
}

// SAFETY: `RawRegion::new` requires the memory to stay valid and not be
// accessed concurrently while frame uses it, so moving the descriptor to
// another thread or sharing it behind the registry's lock is sound.
unsafe impl Send for RawRegion {}
// SAFETY: see `Send`; access is serialised by the registry's lock.
unsafe impl Sync for RawRegion {}

impl RawRegion {
    /// Describes `count` elements of type `elem` starting at `ptr`.
    ///
    /// # Safety
    /// `ptr` must be valid for reads and writes of `count * elem.size()` bytes
    /// and suitably aligned for `elem`, for as long as the region stays
    /// protected, and nothing else may access that memory while a snapshot or
    /// recovery call is running. A null `ptr` is allowed only with `count == 0`.
    pub unsafe fn new(ptr: *mut u8, count: usize, elem: ElemType) -> Self {
        Self { ptr, count, elem }
    }

    fn byte_len(&self) -> usize {
        self.count.saturating_mul(self.elem.size())
    }
}

impl Region for RawRegion {
    fn elem_type(&self) -> ElemType {
        self.elem
    }

    fn count(&self) -> usize {
        self.count
    }

    fn as_bytes(&self) -> &[u8] {
        if self.byte_len() == 0 {
            return &[];
        }
        // SAFETY: guaranteed by the contract of `RawRegion::new`.
        unsafe { std::slice::from_raw_parts(self.ptr, self.byte_len()) }
    }

    fn load_target(&mut self, count: usize) -> Result<&mut [u8], usize> {
        if count != self.count {
            return Err(self.count);
        }
        if self.byte_len() == 0 {
            return Ok(&mut []);
        }
        // SAFETY: guaranteed by the contract of `RawRegion::new`; `&mut self`
        // gives exclusive access to the descriptor.
        Ok(unsafe { std::slice::from_raw_parts_mut(self.ptr, self.byte_len()) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_region_reads_and_writes_caller_memory() {
        let mut data = [1.0f64, 2.0];
        // SAFETY: `data` outlives `raw` and is not touched while `raw` is used.
        let mut raw = unsafe { RawRegion::new(data.as_mut_ptr().cast(), 2, ElemType::F64) };
        assert_eq!(raw.as_bytes().len(), 16);
        assert_eq!(raw.load_target(3).err(), Some(2));
        let target = raw.load_target(2).expect("same count");
        target.copy_from_slice(zerocopy::IntoBytes::as_bytes(&[3.0f64, 4.0][..]));
        assert_eq!(data, [3.0, 4.0]);
    }

    #[test]
    fn empty_raw_region_needs_no_pointer() {
        // SAFETY: a null pointer with a zero count is allowed.
        let mut raw = unsafe { RawRegion::new(std::ptr::null_mut(), 0, ElemType::U8) };
        assert!(raw.as_bytes().is_empty());
        assert_eq!(raw.load_target(0).map(|b| b.len()), Ok(0));
    }
}
