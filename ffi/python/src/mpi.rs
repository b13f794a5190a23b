//! An mpi4py communicator as frame's communicator, for a Python program
//! that runs under MPI (`mpiexec`) instead of frame's runtime: frame works
//! on a duplicate of it (the program's own messages never meet frame's),
//! with nodes as `[topology] ranks_per_node` says. Only in a package built
//! with the `mpi` feature (`ffi/python/install --mpi`), against the MPI
//! mpi4py uses.

use frame_core::comm::Comm;
use frame_core::config::Config;
use pyo3::prelude::*;

#[cfg(feature = "mpi")]
pub(crate) fn comm_of(obj: &Bound<'_, PyAny>, cfg: &Config) -> PyResult<Box<dyn Comm>> {
    use crate::errors;
    use frame_core::comm::mpi::{MpiComm, Nodes};
    use mpi::ffi;
    use mpi::raw::FromRaw;
    use mpi::topology::SimpleCommunicator;
    use pyo3::exceptions::PyTypeError;

    let py = obj.py();
    let mpi4py = py.import("mpi4py.MPI").map_err(|e| {
        PyTypeError::new_err(format!(
            "comm: mpi4py cannot be imported ({e}); install it to give an MPI communicator"
        ))
    })?;
    if !obj.is_instance(&mpi4py.getattr("Intracomm")?)? {
        let kind = obj
            .get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_default();
        return Err(PyTypeError::new_err(format!(
            "comm: expected an mpi4py intra-communicator (such as MPI.COMM_WORLD), got {kind}"
        )));
    }
    let handle: isize = mpi4py.getattr("_handleof")?.call1((obj,))?.extract()?;
    // The handle as this MPI spells a communicator: an integer (MPICH) or
    // a pointer (Open MPI).
    let raw: ffi::MPI_Comm = if std::mem::size_of::<ffi::MPI_Comm>() == 4 {
        // SAFETY: a 4-byte handle is MPICH's int.
        unsafe { std::mem::transmute_copy(&(handle as i32)) }
    } else {
        // SAFETY: a pointer-sized handle.
        unsafe { std::mem::transmute_copy(&handle) }
    };
    // A duplicate of the program's communicator, ours to free.
    // SAFETY: reads MPI's null communicator, a constant.
    let mut dup = unsafe { ffi::RSMPI_COMM_NULL };
    // SAFETY: `raw` is the live communicator mpi4py holds for `obj`.
    let rc = unsafe { ffi::MPI_Comm_dup(raw, &mut dup) };
    if rc != 0 {
        return Err(errors::Error::new_err(format!(
            "comm: MPI_Comm_dup failed with MPI error {rc}"
        )));
    }
    // SAFETY: a live intra-communicator we own, used only through `own`.
    let own = unsafe { SimpleCommunicator::from_raw(dup) };
    let comm = MpiComm::new(&own, Nodes::from_config(cfg)).map_err(errors::from_comm)?;
    drop(own);
    Ok(Box::new(comm))
}

#[cfg(not(feature = "mpi"))]
pub(crate) fn comm_of(_obj: &Bound<'_, PyAny>, _cfg: &Config) -> PyResult<Box<dyn Comm>> {
    Err(pyo3::exceptions::PyTypeError::new_err(
        "comm: this frame package was built without MPI (build it with ffi/python/install --mpi, against the MPI mpi4py uses)",
    ))
}
