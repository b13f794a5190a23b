//! A roll call of the job's ranks: what each rank reported in this epoch
//! (ready with its endpoint, done, exited), and how many have, so that
//! whether every rank has reported is known in constant time per report
//! (a recovery of N ranks costs the root O(N), never O(N^2)).

/// One slot per rank, and the count of slots filled.
#[derive(Debug)]
pub(super) struct Roll<T> {
    slots: Vec<Option<T>>,
    filled: usize,
}

impl<T> Roll<T> {
    /// A roll call of `size` ranks, none reported.
    pub(super) fn new(size: usize) -> Self {
        Self {
            slots: std::iter::repeat_with(|| None).take(size).collect(),
            filled: 0,
        }
    }

    /// Rank `rank` reported `value` (replacing what it reported before).
    /// A rank outside the job is ignored.
    pub(super) fn set(&mut self, rank: usize, value: T) {
        if let Some(slot) = self.slots.get_mut(rank) {
            if slot.replace(value).is_none() {
                self.filled += 1;
            }
        }
    }

    /// Rank `rank` has to report again.
    pub(super) fn clear(&mut self, rank: usize) {
        if let Some(slot) = self.slots.get_mut(rank) {
            if slot.take().is_some() {
                self.filled -= 1;
            }
        }
    }

    /// Whether every rank reported.
    pub(super) fn all(&self) -> bool {
        self.filled == self.slots.len()
    }

    /// What every rank reported, in rank order; `None` until every rank
    /// has (a list with a gap would give the ranks after it the wrong
    /// entries).
    pub(super) fn every(&self) -> Option<Vec<T>>
    where
        T: Clone,
    {
        self.slots.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests;
