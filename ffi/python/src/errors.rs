//! The exceptions of the `frame` package, and how frame's errors map to
//! them. Every exception carries frame's own message (which names the
//! file, key, rank or region at fault).

use frame_core::comm::CommError;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

pyo3::create_exception!(
    frame,
    Error,
    PyRuntimeError,
    "A failure of frame: storage, configuration, a peer or a checkpoint."
);
pyo3::create_exception!(
    frame,
    Interrupted,
    Error,
    "A failure elsewhere in the job started a recovery: let it propagate out of the resilient function, which `frame.run` enters again once the job recovered."
);
pyo3::create_exception!(
    frame,
    RegionMismatch,
    Error,
    "The protected arrays do not match the checkpoint being restored (type or size); see `Checkpointer.stored_region`."
);
pyo3::create_exception!(
    frame,
    NothingToRecover,
    Error,
    "There is no checkpoint to recover: the run started fresh."
);
pyo3::create_exception!(
    frame,
    NotRecoverable,
    Error,
    "Checkpoints exist but not every rank can restore one; nothing was deleted."
);
pyo3::create_exception!(
    frame,
    StateError,
    Error,
    "A call out of order: after `finalize`, outside the resilient function whose context it used, or between `begin_checkpoint` and `end_checkpoint`."
);

/// Adds the exception classes to module `m`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("Error", py.get_type::<Error>())?;
    m.add("Interrupted", py.get_type::<Interrupted>())?;
    m.add("RegionMismatch", py.get_type::<RegionMismatch>())?;
    m.add("NothingToRecover", py.get_type::<NothingToRecover>())?;
    m.add("NotRecoverable", py.get_type::<NotRecoverable>())?;
    m.add("StateError", py.get_type::<StateError>())?;
    Ok(())
}

/// The exception for an error of the checkpoint library.
pub(crate) fn from_frame(e: frame_core::Error) -> PyErr {
    use frame_core::Error as E;
    let text = e.to_string();
    match e {
        E::Comm(c) => from_comm(c),
        E::RegionMismatch { .. } => RegionMismatch::new_err(text),
        E::NothingToRecover => NothingToRecover::new_err(text),
        E::NotRecoverable { .. } => NotRecoverable::new_err(text),
        _ => Error::new_err(text),
    }
}

/// The exception for an error of the communicator.
pub(crate) fn from_comm(e: CommError) -> PyErr {
    match e {
        CommError::Interrupted { .. } => Interrupted::new_err(e.to_string()),
        other => Error::new_err(other.to_string()),
    }
}

/// A call out of order.
pub(crate) fn state(message: impl Into<String>) -> PyErr {
    StateError::new_err(message.into())
}
