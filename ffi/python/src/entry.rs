//! `frame.run`, the resilient entry of a Python program, and the
//! `Context` class it hands the program's function.
//!
//! Under `frame run` the process is one rank: `run` calls the function
//! with the job's context and calls it again after every failure (a
//! survivor rolls back: its next frame call raises `frame.Interrupted`,
//! which propagates out of the function; a replacement process starts in
//! it). Started on its own, the program is the only rank and the function
//! runs once.

use crate::comm::Comm;
use crate::errors::{self, from_comm};
use crate::live::{self, Token};
use crate::released;
use frame_runtime::State;
use pyo3::prelude::*;
use std::path::PathBuf;

/// Runs `main(ctx)` under frame's runtime and returns the process's exit
/// status (0 when every rank finished; pass it to `sys.exit`).
#[pyfunction]
pub(crate) fn run(py: Python<'_>, main: Py<PyAny>) -> PyResult<u8> {
    if live::current().is_some() {
        return Err(errors::state(
            "frame.run was called inside the resilient function of another frame.run",
        ));
    }
    if !main.bind(py).is_callable() {
        return Err(pyo3::exceptions::PyTypeError::new_err(
            "frame.run needs a function taking the context: frame.run(main)",
        ));
    }
    Ok(released(py, || {
        frame_runtime::run_status(|ctx| call(ctx, &main))
    }))
}

/// Calls the program's function with `ctx`; an error unless it returned.
fn call(ctx: &mut frame_runtime::Context<'_>, main: &Py<PyAny>) -> Result<(), String> {
    Python::attach(|py| {
        let outcome = live::enter(ctx, |token| {
            let ctx = Py::new(py, Context { token })?;
            main.call1(py, (ctx,))
        })
        .and_then(|r| r);
        match outcome {
            Ok(_) => Ok(()),
            // The runtime enters the function again (after the recovery
            // that interrupted it).
            Err(e) if e.is_instance_of::<errors::Interrupted>(py) => Err(e.to_string()),
            Err(e) => {
                let text = e.to_string();
                eprintln!("frame: the resilient function raised an exception:");
                e.print(py);
                Err(text)
            }
        }
    })
}

/// What the runtime tells the resilient function: who this rank is, how
/// it entered and what failed; its communicator; and the per-iteration
/// fault point. Valid only inside the call that received it.
#[pyclass(module = "frame", frozen)]
pub(crate) struct Context {
    token: Token,
}

impl Context {
    /// The entry this context belongs to.
    pub(crate) fn token(&self) -> Token {
        self.token
    }
}

#[pymethods]
impl Context {
    /// This rank (0 to size - 1).
    #[getter]
    fn rank(&self) -> PyResult<usize> {
        live::with_context(self.token, |c| Ok(c.rank()))
    }

    /// The number of ranks in the job.
    #[getter]
    fn size(&self) -> PyResult<usize> {
        live::with_context(self.token, |c| Ok(c.comm().size()))
    }

    /// The node this rank runs on.
    #[getter]
    fn node(&self) -> PyResult<u32> {
        live::with_context(self.token, |c| Ok(c.node()))
    }

    /// How this rank entered: "new" (first start), "reinited" (a survivor
    /// rolled back after a failure elsewhere) or "restarted" (a
    /// replacement for a rank that failed).
    #[getter]
    fn state(&self) -> PyResult<&'static str> {
        live::with_context(self.token, |c| {
            Ok(match c.state() {
                State::New => "new",
                State::Reinited => "reinited",
                State::Restarted => "restarted",
            })
        })
    }

    /// The runtime's epoch: 1 at the start, one more after each recovery.
    #[getter]
    fn epoch(&self) -> PyResult<u64> {
        live::with_context(self.token, |c| Ok(c.epoch()))
    }

    /// The ranks that failed in the recovery that led to this entry.
    #[getter]
    fn failed_ranks(&self) -> PyResult<Vec<usize>> {
        live::with_context(self.token, |c| Ok(c.failed_ranks().to_vec()))
    }

    /// The nodes that failed in that recovery.
    #[getter]
    fn failed_nodes(&self) -> PyResult<Vec<u32>> {
        live::with_context(self.token, |c| Ok(c.failed_nodes().to_vec()))
    }

    /// The node-local storage directory of this rank.
    #[getter]
    fn node_dir(&self) -> PyResult<PathBuf> {
        live::with_context(self.token, |c| Ok(c.node_dir().to_path_buf()))
    }

    /// The communicator of this entry (every rank of the job).
    #[getter]
    fn comm(&self) -> Comm {
        Comm::new(self.token)
    }

    /// Call once per iteration with its number: shows the job's progress,
    /// fires the fault injections of `frame run --inject` set for it, and
    /// raises `frame.Interrupted` when a failure elsewhere started a
    /// recovery (so a rank computing without messages rolls back too).
    fn fault_point(&self, iteration: u64) -> PyResult<()> {
        live::with_context(self.token, |c| c.fault_point(iteration).map_err(from_comm))
    }

    fn __repr__(&self) -> String {
        live::with_context(self.token, |c| {
            Ok(format!(
                "<frame.Context rank {} of {} on node {}, epoch {}, {}>",
                c.rank(),
                c.comm().size(),
                c.node(),
                c.epoch(),
                c.state()
            ))
        })
        .unwrap_or_else(|_| "<frame.Context, ended>".into())
    }
}
