//! Protected regions: the memory a program asks frame to save and restore.
//!
//! A region is identified by a `u32` id and holds elements of one plain-old-data
//! type ([`ElemType`]). The [`Region`] trait describes anything that can be
//! protected: scalars, `Vec`s (which may change size between snapshots and are
//! resized on recovery), boxed slices and arrays (fixed size). [`Protected`] is
//! the handle user code keeps; [`RawRegion`] is the (pointer, length) form the
//! C interface needs, and the only unsafe boundary of this module.

mod protected;
mod raw;

pub(crate) use protected::{ErasedRegion, HeldRegionMut, Registry};
pub use protected::{Protected, ReadGuard, WriteGuard};
pub use raw::RawRegion;

use serde::{Deserialize, Serialize};
use std::fmt;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// Identifies a protected region; ids are chosen by the program.
pub type RegionId = u32;

/// The element type of a protected region, as recorded in checkpoints.
///
/// The numeric codes are part of the file format and never change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[repr(u8)]
pub enum ElemType {
    /// `u8`
    U8 = 1,
    /// `u16`
    U16 = 2,
    /// `u32`
    U32 = 3,
    /// `u64`
    U64 = 4,
    /// `i8`
    I8 = 5,
    /// `i16`
    I16 = 6,
    /// `i32`
    I32 = 7,
    /// `i64`
    I64 = 8,
    /// `f32`
    F32 = 9,
    /// `f64`
    F64 = 10,
    /// Untyped bytes ([`Byte`]).
    Byte = 11,
}

impl ElemType {
    /// Every element type, in code order.
    pub const ALL: [ElemType; 11] = [
        ElemType::U8,
        ElemType::U16,
        ElemType::U32,
        ElemType::U64,
        ElemType::I8,
        ElemType::I16,
        ElemType::I32,
        ElemType::I64,
        ElemType::F32,
        ElemType::F64,
        ElemType::Byte,
    ];

    /// Size of one element in bytes.
    pub fn size(self) -> usize {
        match self {
            ElemType::U8 | ElemType::I8 | ElemType::Byte => 1,
            ElemType::U16 | ElemType::I16 => 2,
            ElemType::U32 | ElemType::I32 | ElemType::F32 => 4,
            ElemType::U64 | ElemType::I64 | ElemType::F64 => 8,
        }
    }

    /// The on-disk code of this type.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The type with on-disk code `code`, if there is one.
    pub fn from_code(code: u8) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.code() == code)
    }

    /// The lowercase name used in tools and metadata (`"f64"`, `"byte"`, ...).
    pub fn name(self) -> &'static str {
        match self {
            ElemType::U8 => "u8",
            ElemType::U16 => "u16",
            ElemType::U32 => "u32",
            ElemType::U64 => "u64",
            ElemType::I8 => "i8",
            ElemType::I16 => "i16",
            ElemType::I32 => "i32",
            ElemType::I64 => "i64",
            ElemType::F32 => "f32",
            ElemType::F64 => "f64",
            ElemType::Byte => "byte",
        }
    }
}

impl fmt::Display for ElemType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An untyped byte, for regions whose content frame should not interpret.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
#[repr(transparent)]
pub struct Byte(pub u8);

/// A plain-old-data element type that regions can hold.
///
/// Implemented for `u8`..`u64`, `i8`..`i64`, `f32`, `f64` and [`Byte`]; every
/// bit pattern of these types is valid, which is what makes loading raw
/// checkpoint bytes into them safe.
pub trait Element: FromBytes + IntoBytes + Immutable + Copy + Send + Sync + 'static {
    /// The recorded type.
    const TYPE: ElemType;
}

macro_rules! elements {
    ($($t:ty => $e:ident),* $(,)?) => {$(
        impl Element for $t {
            const TYPE: ElemType = ElemType::$e;
        }
        impl Region for $t {
            fn elem_type(&self) -> ElemType { ElemType::$e }
            fn count(&self) -> usize { 1 }
            fn as_bytes(&self) -> &[u8] { IntoBytes::as_bytes(self) }
            fn load_target(&mut self, count: usize) -> Result<&mut [u8], usize> {
                if count == 1 { Ok(IntoBytes::as_mut_bytes(self)) } else { Err(1) }
            }
        }
    )*};
}

elements!(
    u8 => U8, u16 => U16, u32 => U32, u64 => U64,
    i8 => I8, i16 => I16, i32 => I32, i64 => I64,
    f32 => F32, f64 => F64, Byte => Byte,
);

/// Something frame can protect: typed elements laid out contiguously.
pub trait Region: Send + Sync + 'static {
    /// The element type.
    fn elem_type(&self) -> ElemType;
    /// Number of elements currently held.
    fn count(&self) -> usize;
    /// The elements as bytes (what a snapshot saves).
    fn as_bytes(&self) -> &[u8];
    /// Prepares the region to receive `count` elements and returns the bytes to
    /// fill. Resizable regions resize; fixed-size regions return `Err(current
    /// count)` when `count` differs.
    fn load_target(&mut self, count: usize) -> Result<&mut [u8], usize>;
}

impl<T: Element> Region for Vec<T> {
    fn elem_type(&self) -> ElemType {
        T::TYPE
    }
    fn count(&self) -> usize {
        self.len()
    }
    fn as_bytes(&self) -> &[u8] {
        IntoBytes::as_bytes(self.as_slice())
    }
    fn load_target(&mut self, count: usize) -> Result<&mut [u8], usize> {
        self.resize(count, T::new_zeroed());
        Ok(IntoBytes::as_mut_bytes(self.as_mut_slice()))
    }
}

impl<T: Element> Region for Box<[T]> {
    fn elem_type(&self) -> ElemType {
        T::TYPE
    }
    fn count(&self) -> usize {
        self.len()
    }
    fn as_bytes(&self) -> &[u8] {
        IntoBytes::as_bytes(&**self)
    }
    fn load_target(&mut self, count: usize) -> Result<&mut [u8], usize> {
        if count == self.len() {
            Ok(IntoBytes::as_mut_bytes(&mut **self))
        } else {
            Err(self.len())
        }
    }
}

impl<T: Element, const N: usize> Region for [T; N] {
    fn elem_type(&self) -> ElemType {
        T::TYPE
    }
    fn count(&self) -> usize {
        N
    }
    fn as_bytes(&self) -> &[u8] {
        IntoBytes::as_bytes(self.as_slice())
    }
    fn load_target(&mut self, count: usize) -> Result<&mut [u8], usize> {
        if count == N {
            Ok(IntoBytes::as_mut_bytes(self.as_mut_slice()))
        } else {
            Err(N)
        }
    }
}

/// Description of a region as stored in a checkpoint (or as currently protected).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegionInfo {
    /// The region id.
    pub id: RegionId,
    /// The element type.
    pub elem: ElemType,
    /// Number of elements.
    pub count: u64,
}

impl RegionInfo {
    /// Size of the region's data in bytes.
    pub fn bytes(&self) -> u64 {
        self.count.saturating_mul(self.elem.size() as u64)
    }
}

#[cfg(test)]
mod tests;
