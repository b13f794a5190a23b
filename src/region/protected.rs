//! [`Protected`] handles and the registry of protected regions.
//!
//! A handle shares its region with the checkpointer: the program reads and
//! writes through guards, the checkpointer takes a read lock while it saves and
//! a write lock while it restores. A snapshot never waits for a guard the
//! program still holds: it reports the region as busy instead of deadlocking.

use super::{Region, RegionId};
use std::collections::BTreeMap;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard, TryLockError};

/// Read access to a protected region (derefs to the region).
pub type ReadGuard<'a, R> = RwLockReadGuard<'a, R>;
/// Write access to a protected region (derefs mutably to the region).
pub type WriteGuard<'a, R> = RwLockWriteGuard<'a, R>;

/// A protected region, shared between the program and the checkpointer.
///
/// Obtained from [`Checkpointer::protect`](crate::Checkpointer::protect).
/// Cloning the handle shares the same region.
pub struct Protected<R: Region> {
    inner: Arc<RwLock<R>>,
}

impl<R: Region> Clone for Protected<R> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<R: Region> Protected<R> {
    /// Wraps `value` in a new handle (not yet registered with a checkpointer).
    pub fn new(value: R) -> Self {
        Self {
            inner: Arc::new(RwLock::new(value)),
        }
    }

    /// Locks the region for reading.
    pub fn read(&self) -> ReadGuard<'_, R> {
        // Regions are plain data: a panic elsewhere cannot leave them in a
        // state that is unsafe to read, so poisoning is ignored.
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Locks the region for writing. Drop the guard before calling
    /// `snapshot`, or that snapshot reports the region as busy.
    pub fn write(&self) -> WriteGuard<'_, R> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Returns a copy of the value (handy for scalars).
    pub fn get(&self) -> R
    where
        R: Copy,
    {
        *self.read()
    }

    /// Replaces the value.
    pub fn set(&self, value: R) {
        *self.write() = value;
    }

    pub(crate) fn erased(&self) -> Arc<dyn ErasedRegion> {
        Arc::clone(&self.inner) as Arc<dyn ErasedRegion>
    }
}

/// A region held under a read lock, with its type erased.
pub(crate) trait HeldRegion {
    fn region(&self) -> &dyn Region;
}

/// A region held under a write lock, with its type erased.
pub(crate) trait HeldRegionMut {
    fn region_mut(&mut self) -> &mut dyn Region;
}

impl<R: Region> HeldRegion for RwLockReadGuard<'_, R> {
    fn region(&self) -> &dyn Region {
        &**self
    }
}

impl<R: Region> HeldRegionMut for RwLockWriteGuard<'_, R> {
    fn region_mut(&mut self) -> &mut dyn Region {
        &mut **self
    }
}

/// A lockable region of any type, as the registry stores it.
pub(crate) trait ErasedRegion: Send + Sync {
    /// Read access without waiting; `None` if a writer holds the region.
    fn try_read(&self) -> Option<Box<dyn HeldRegion + '_>>;
    /// Write access without waiting; `None` if the region is in use.
    fn try_write(&self) -> Option<Box<dyn HeldRegionMut + '_>>;
}

impl<R: Region> ErasedRegion for RwLock<R> {
    fn try_read(&self) -> Option<Box<dyn HeldRegion + '_>> {
        match RwLock::try_read(self) {
            Ok(g) => Some(Box::new(g)),
            Err(TryLockError::Poisoned(p)) => Some(Box::new(p.into_inner())),
            Err(TryLockError::WouldBlock) => None,
        }
    }

    fn try_write(&self) -> Option<Box<dyn HeldRegionMut + '_>> {
        match RwLock::try_write(self) {
            Ok(g) => Some(Box::new(g)),
            Err(TryLockError::Poisoned(p)) => Some(Box::new(p.into_inner())),
            Err(TryLockError::WouldBlock) => None,
        }
    }
}

/// The protected regions of one checkpointer, by id.
#[derive(Default)]
pub(crate) struct Registry {
    regions: BTreeMap<RegionId, Arc<dyn ErasedRegion>>,
    /// Regions whose length must match the checkpoint's (never resized).
    fixed: std::collections::BTreeSet<RegionId>,
}

impl Registry {
    /// Registers `region` under `id`, replacing any earlier registration.
    pub(crate) fn insert(&mut self, id: RegionId, region: Arc<dyn ErasedRegion>) {
        self.fixed.remove(&id);
        self.regions.insert(id, region);
    }

    /// Registers `region` under `id`; recovery refuses a checkpoint whose
    /// copy of it has another length instead of resizing it.
    pub(crate) fn insert_fixed(&mut self, id: RegionId, region: Arc<dyn ErasedRegion>) {
        self.regions.insert(id, region);
        self.fixed.insert(id);
    }

    /// Whether region `id` was protected with a fixed length.
    pub(crate) fn is_fixed(&self, id: RegionId) -> bool {
        self.fixed.contains(&id)
    }

    /// Forgets region `id`; returns whether it was registered.
    pub(crate) fn remove(&mut self, id: RegionId) -> bool {
        self.fixed.remove(&id);
        self.regions.remove(&id).is_some()
    }

    /// The region registered under `id`.
    pub(crate) fn get(&self, id: RegionId) -> Option<&Arc<dyn ErasedRegion>> {
        self.regions.get(&id)
    }

    /// Registered regions in id order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (RegionId, &Arc<dyn ErasedRegion>)> {
        self.regions.iter().map(|(id, r)| (*id, r))
    }

    /// Number of registered regions.
    pub(crate) fn len(&self) -> usize {
        self.regions.len()
    }
}

#[cfg(test)]
mod tests;
