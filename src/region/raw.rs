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
mod tests;
