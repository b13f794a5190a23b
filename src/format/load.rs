//! How a stored region is loaded into memory: which threads copy its
//! chunks, and where the file's mapping is released.
//!
//! A region's chunks are independent (each has its own CRC, a compressed one
//! its own frame), so a large region may be loaded by several threads, each
//! taking every n-th chunk, the kernel filling the page tables of each chunk
//! just before it is copied. How many threads a load may use is the
//! caller's choice (it knows how many ranks share the node's cores). The mapping a new process made is
//! unmapped by a background thread once the file is dropped, so tearing
//! down its page tables does not delay the program's return to work.

use memmap2::Mmap;
use std::sync::mpsc::Sender;
use std::sync::OnceLock;

/// Regions smaller than this are loaded by the calling thread alone.
const PARALLEL_MIN: usize = 8 << 20;
/// At most this many threads load one region.
const MAX_WORKERS: usize = 8;
/// Mappings smaller than this are unmapped where they are dropped.
const UNMAP_LATER_MIN: usize = 8 << 20;

/// How many threads load `bytes` of region data held in `chunks` chunks
/// when up to `allowed` may.
pub(super) fn workers(bytes: usize, chunks: usize, allowed: usize) -> usize {
    if bytes < PARALLEL_MIN {
        return 1;
    }
    allowed.min(chunks).clamp(1, MAX_WORKERS)
}

/// Runs `load` on every piece, spread over `workers` threads (piece `i` goes
/// to thread `i % workers`), each thread with its own `state`. Returns the
/// error of the first failing piece in order, after every thread stopped.
pub(super) fn spread<P: Send, S, E: Send>(
    pieces: Vec<P>,
    workers: usize,
    state: impl Fn() -> S + Sync,
    load: impl Fn(&mut S, P) -> Result<(), E> + Sync,
) -> Result<(), E> {
    if workers <= 1 {
        let mut s = state();
        return pieces.into_iter().try_for_each(|p| load(&mut s, p));
    }
    let mut shares: Vec<Vec<(usize, P)>> = (0..workers).map(|_| Vec::new()).collect();
    for (i, p) in pieces.into_iter().enumerate() {
        shares[i % workers].push((i, p));
    }
    let (state, load) = (&state, &load);
    let failures = std::thread::scope(|scope| {
        let handles: Vec<_> = shares
            .into_iter()
            .map(|share| {
                scope.spawn(move || {
                    let mut s = state();
                    for (i, p) in share {
                        if let Err(e) = load(&mut s, p) {
                            return Some((i, e));
                        }
                    }
                    None
                })
            })
            .collect();
        handles
            .into_iter()
            .filter_map(|h| match h.join() {
                Ok(failure) => failure,
                Err(panic) => std::panic::resume_unwind(panic),
            })
            .collect::<Vec<_>>()
    });
    match failures.into_iter().min_by_key(|(i, _)| *i) {
        Some((_, e)) => Err(e),
        None => Ok(()),
    }
}

/// Drops `map`, a large mapping made for loading, on a background thread.
pub(super) fn unmap_later(map: Mmap) {
    static UNMAPPER: OnceLock<Option<Sender<Mmap>>> = OnceLock::new();
    if map.len() < UNMAP_LATER_MIN {
        return;
    }
    let unmapper = UNMAPPER.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel::<Mmap>();
        std::thread::Builder::new()
            .name("frame-unmap".into())
            .spawn(move || rx.into_iter().for_each(drop))
            .ok()
            .map(|_| tx)
    });
    if let Some(tx) = unmapper {
        // A send fails only if the thread is gone; the mapping then comes
        // back in the error and is dropped here.
        let _ = tx.send(map);
    }
}

#[cfg(test)]
mod tests;
