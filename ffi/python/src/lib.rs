//! frame's Python interface: the extension module `frame._native`, which
//! the package `frame` (beside this crate) re-exports with its
//! documentation and type hints.
//!
//! What a Python program gets is what a Rust or C program gets: a
//! checkpointer that protects numpy arrays in place (their memory is
//! written to the checkpoint and restored into, never copied into Python
//! objects), file checkpoints, the resilient entry that `frame run`
//! re-enters after every failure, and the communicator for numpy buffers.
//!
//! Modules, one concept each:
//! - `errors`: the exception classes and how frame's errors map to them;
//! - `live`: the entry of the resilient function running on this thread,
//!   and what must go when it ends;
//! - `arrays`: the memory of a numpy array, checked for use in place;
//! - `checkpointer`: the `Checkpointer` class;
//! - `entry`: `run` and the `Context` class;
//! - `comm`: the `Comm` class;
//! - `mpi`: an mpi4py communicator as frame's (feature `mpi`).

mod arrays;
mod checkpointer;
mod comm;
mod entry;
mod errors;
mod live;
mod mpi;

use pyo3::prelude::*;

/// Runs `f` with the interpreter released (other Python threads run
/// meanwhile), on this thread.
///
/// frame's calls wait on peers and storage; they touch no Python object,
/// only memory the caller vouched for (protected arrays, buffers of the
/// call). The values they use are not `Send` (a communicator is used by
/// one thread at a time), which is why `f` is wrapped: it runs on the
/// calling thread, as `Python::detach` does, and nothing it holds escapes.
pub(crate) fn released<R>(py: Python<'_>, f: impl FnOnce() -> R) -> R {
    struct OnThisThread<T>(T);
    // SAFETY: `detach` runs its closure on the calling thread and returns
    // before this function does, so neither `f` nor its result ever
    // crosses to another thread.
    unsafe impl<T> Send for OnThisThread<T> {}
    impl<T> OnThisThread<T> {
        fn into_inner(self) -> T {
            self.0
        }
    }
    let f = OnThisThread(f);
    py.detach(move || OnThisThread(f.into_inner()()))
        .into_inner()
}

/// The extension module `frame._native`.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // The library's warnings (a level that failed, a fallback) as plain
    // lines on standard error.
    frame_log::init(frame_log::Style::Plain, "warn");
    errors::register(m)?;
    m.add_class::<checkpointer::Checkpointer>()?;
    m.add_class::<entry::Context>()?;
    m.add_class::<comm::Comm>()?;
    m.add_function(wrap_pyfunction!(entry::run, m)?)?;
    m.add("LEVELS", (1u8, 2u8, 3u8, 4u8))?;
    Ok(())
}
