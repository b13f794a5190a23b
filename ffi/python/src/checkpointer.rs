//! The `Checkpointer` class: numpy arrays protected in place, checkpoints
//! at every level, recovery, file checkpoints, status and finalize.
//!
//! A checkpointer made inside the resilient function uses that entry's
//! communicator and goes when the entry ends (the runtime enters the
//! function again with a new one); one made outside `frame.run` is the
//! only rank of its job, with a communicator of its own. It keeps a
//! reference to every protected array, so numpy refuses to resize or free
//! one while frame may write into it.

use crate::arrays;
use crate::entry::Context;
use crate::errors::{self, from_frame};
use crate::live::{self, Token};
use crate::released;
use frame_core::comm::{Comm, LocalComm};
use frame_core::{Config, ElemType, Level, RegionId};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::rc::Rc;

/// What a live checkpointer holds. Fields drop in order: the checkpointer
/// first, then the arrays and the communicator it used.
struct Session {
    ckpt: frame_core::Checkpointer<'static>,
    arrays: BTreeMap<RegionId, Py<PyAny>>,
    owned: Option<Box<dyn Comm>>,
}

/// Checkpoints of numpy arrays and of files the program writes.
#[pyclass(module = "frame", unsendable)]
pub(crate) struct Checkpointer {
    session: Rc<RefCell<Option<Session>>>,
    /// Why the session is gone, once it is.
    gone: Rc<RefCell<&'static str>>,
}

/// The numpy dtype name of an element type.
fn dtype_name(elem: ElemType) -> &'static str {
    match elem {
        ElemType::U8 | ElemType::Byte => "uint8",
        ElemType::U16 => "uint16",
        ElemType::U32 => "uint32",
        ElemType::U64 => "uint64",
        ElemType::I8 => "int8",
        ElemType::I16 => "int16",
        ElemType::I32 => "int32",
        ElemType::I64 => "int64",
        ElemType::F32 => "float32",
        ElemType::F64 => "float64",
    }
}

fn level_of(level: u8) -> PyResult<Level> {
    Level::from_number(level)
        .ok_or_else(|| PyValueError::new_err(format!("level {level} is not 1, 2, 3 or 4")))
}

/// The communicator of entry `token`, with its lifetime erased.
fn comm_of(token: Token) -> PyResult<&'static dyn Comm> {
    let ptr =
        live::with_context(token, |c| {
            let p: *const (dyn Comm + '_) = c.comm();
            // SAFETY: only erases the lifetime: the checkpointer that uses the
            // communicator is dropped when the entry ends (an exit hook).
            Ok(unsafe {
                std::mem::transmute::<*const (dyn Comm + '_), *const (dyn Comm + 'static)>(p)
            })
        })?;
    // SAFETY: see above.
    Ok(unsafe { &*ptr })
}

impl Checkpointer {
    /// Runs `f` on the live session.
    fn with<R>(&self, f: impl FnOnce(&mut Session) -> PyResult<R>) -> PyResult<R> {
        match self.session.borrow_mut().as_mut() {
            Some(s) => f(s),
            None => Err(errors::state(*self.gone.borrow())),
        }
    }
}

#[pymethods]
impl Checkpointer {
    /// Sets up checkpointing and finds out with the other ranks whether
    /// there is a checkpoint to recover (see `recovering`). Collective.
    ///
    /// `comm` is an mpi4py communicator, for a program that runs under
    /// MPI (`mpiexec`) instead of frame's runtime.
    #[new]
    #[pyo3(signature = (ctx = None, config = None, comm = None))]
    fn new(
        py: Python<'_>,
        ctx: Option<PyRef<'_, Context>>,
        config: Option<PathBuf>,
        comm: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let cfg =
            Config::load(config.as_deref()).map_err(|e| errors::Error::new_err(e.to_string()))?;
        let token = ctx.map(|c| c.token());
        let token = match (token, live::current(), &comm) {
            (Some(_), _, Some(_)) => {
                return Err(errors::state(
                    "give either the context of frame.run or an mpi4py communicator, not both",
                ))
            }
            (Some(t), _, None) => Some(t),
            (None, Some(_), None) => {
                return Err(errors::state(
                    "a checkpointer made inside the resilient function needs its context: frame.Checkpointer(ctx)",
                ))
            }
            (None, None, None) if frame_runtime::role() == frame_runtime::Role::Rank => {
                return Err(errors::state(
                    "this process is a rank of a job: make the checkpointer inside the function given to frame.run, with its context",
                ))
            }
            (None, _, _) => None,
        };
        let owned: Option<Box<dyn Comm>> = match (token, comm) {
            (Some(_), _) => None,
            (None, Some(c)) => Some(crate::mpi::comm_of(&c, &cfg)?),
            (None, None) => Some(Box::new(LocalComm::world(1, 1).pop().ok_or_else(|| {
                errors::Error::new_err("cannot make a one-rank communicator")
            })?)),
        };
        let comm: &'static dyn Comm = match (token, owned.as_deref()) {
            (Some(t), _) => comm_of(t)?,
            (None, Some(own)) => {
                let p: *const dyn Comm = own;
                // SAFETY: the box lives in the session beside the
                // checkpointer, which is dropped first.
                unsafe { &*p }
            }
            (None, None) => return Err(errors::Error::new_err("no communicator to use")),
        };
        let ckpt =
            released(py, || frame_core::Checkpointer::init(&cfg, comm)).map_err(from_frame)?;
        let session = Rc::new(RefCell::new(Some(Session {
            ckpt,
            arrays: BTreeMap::new(),
            owned,
        })));
        let gone = Rc::new(RefCell::new("finalize was already called"));
        if let Some(t) = token {
            let (weak, why) = (Rc::downgrade(&session), Rc::clone(&gone));
            live::on_exit(
                t,
                Box::new(move || {
                    if let Some(s) = weak.upgrade() {
                        if s.borrow_mut().take().is_some() {
                            *why.borrow_mut() = "the entry of the resilient function this checkpointer was made in has ended (make a new one in each entry)";
                        }
                    }
                }),
            )?;
        }
        Ok(Self { session, gone })
    }

    /// Protects `array` as region `id` (a number of your choice): frame
    /// saves its memory in every checkpoint and restores into it. The array
    /// is used in place (never copied); it must be contiguous and
    /// writeable. Protecting an id again replaces the region. Returns the
    /// array.
    fn protect<'py>(&self, id: RegionId, array: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let (checked, memory) = arrays::writable(&array, &format!("region {id}"))?;
        self.with(|s| {
            // SAFETY: the session keeps a reference to the array (below)
            // until the region is replaced or the checkpointer goes, so
            // numpy neither frees nor resizes its memory meanwhile.
            unsafe {
                s.ckpt
                    .protect_raw(id, memory.ptr, memory.count, memory.elem)
            };
            s.arrays.insert(id, checked.into_any().unbind());
            Ok(())
        })?;
        Ok(array)
    }

    /// Stops protecting region `id`; returns whether it was protected.
    fn unprotect(&self, id: RegionId) -> PyResult<bool> {
        self.with(|s| {
            s.arrays.remove(&id);
            Ok(s.ckpt.unprotect(id))
        })
    }

    /// Call once per iteration: writes a checkpoint when the configured
    /// interval says so and returns its id, else None. Collective.
    fn snapshot(&self, py: Python<'_>) -> PyResult<Option<u64>> {
        self.with(|s| released(py, || s.ckpt.snapshot()).map_err(from_frame))
    }

    /// Writes a checkpoint now, kept at `level` (1 to 4) besides the
    /// levels whose interval is due; returns its id. Collective.
    #[pyo3(signature = (level = 1))]
    fn checkpoint(&self, py: Python<'_>, level: u8) -> PyResult<u64> {
        let level = level_of(level)?;
        self.with(|s| released(py, || s.ckpt.checkpoint_at(level)).map_err(from_frame))
    }

    /// Whether a checkpoint to recover was found and not yet recovered.
    #[getter]
    fn recovering(&self) -> PyResult<bool> {
        self.with(|s| Ok(s.ckpt.recovering()))
    }

    /// The id of the checkpoint to recover, while `recovering`.
    #[getter]
    fn recovery_id(&self) -> PyResult<Option<u64>> {
        self.with(|s| Ok(s.ckpt.recovery_id()))
    }

    /// Restores every protected array (and the files of a file
    /// checkpoint) from the checkpoint found; returns its id. Every stored
    /// region must be protected with the same dtype and size. Collective.
    fn recover(&self, py: Python<'_>) -> PyResult<u64> {
        self.with(|s| released(py, || s.ckpt.recover()).map_err(from_frame))
    }

    /// Restores region `id` alone. Not collective.
    fn recover_region(&self, py: Python<'_>, id: RegionId) -> PyResult<()> {
        self.with(|s| released(py, || s.ckpt.recover_region(id)).map_err(from_frame))
    }

    /// The dtype name and element count region `id` has in the checkpoint
    /// to recover (to allocate its array before protecting it), or None.
    fn stored_region(&self, id: RegionId) -> PyResult<Option<(&'static str, u64)>> {
        self.with(|s| {
            Ok(s.ckpt
                .stored_region(id)
                .map(|r| (dtype_name(r.elem), r.count)))
        })
    }

    /// Every region of the checkpoint to recover: id -> (dtype name, count).
    fn stored_regions(&self) -> PyResult<BTreeMap<RegionId, (&'static str, u64)>> {
        self.with(|s| {
            Ok(s.ckpt
                .stored_regions()
                .into_iter()
                .map(|r| (r.id, (dtype_name(r.elem), r.count)))
                .collect())
        })
    }

    /// What this checkpointer did: a dict of `recovering`, `recovery_id`,
    /// `checkpoints`, `last_id`, `checkpoint_seconds`,
    /// `last_checkpoint_seconds`, `raw_bytes`, `stored_bytes`,
    /// `recovered_from` (a level or None), `recovery_seconds` and
    /// `recovery_rounds`.
    fn status<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.with(|s| {
            let st = s.ckpt.stats();
            let d = PyDict::new(py);
            d.set_item("recovering", s.ckpt.recovering())?;
            d.set_item("recovery_id", s.ckpt.recovery_id())?;
            d.set_item("checkpoints", st.checkpoints)?;
            d.set_item("last_id", st.last_id)?;
            d.set_item("checkpoint_seconds", st.checkpoint_time.as_secs_f64())?;
            d.set_item(
                "last_checkpoint_seconds",
                st.last_checkpoint_time.as_secs_f64(),
            )?;
            d.set_item("raw_bytes", st.raw_bytes)?;
            d.set_item("stored_bytes", st.stored_bytes)?;
            d.set_item("recovered_from", st.recovered_from.map(|l| l.number()))?;
            d.set_item("recovery_seconds", st.recovery_time.as_secs_f64())?;
            d.set_item("recovery_rounds", st.recovery_rounds)?;
            Ok(d)
        })
    }

    /// This rank's node-local checkpoint directory.
    #[getter]
    fn local_dir(&self) -> PyResult<PathBuf> {
        self.with(|s| Ok(s.ckpt.local_dir().to_path_buf()))
    }

    /// Waits until every node's manager has finished the promotions to
    /// levels 2 to 4 asked so far. Collective.
    fn wait_for_promotions(&self, py: Python<'_>) -> PyResult<()> {
        self.with(|s| released(py, || s.ckpt.wait_for_promotions()).map_err(from_frame))
    }

    /// Begins a checkpoint of files, kept at `level` (1 to 4) besides the
    /// levels whose interval is due; it holds the protected arrays too.
    /// Not collective.
    #[pyo3(signature = (level = 1))]
    fn begin_checkpoint(&self, level: u8) -> PyResult<()> {
        let level = level_of(level)?;
        self.with(|s| s.ckpt.begin_checkpoint(level).map_err(from_frame))
    }

    /// The path at which to write file `name` of the checkpoint begun: a
    /// new, empty, private file on the node's storage. `name` is one file
    /// name (no `/`, not starting with `.`). Not collective.
    fn checkpoint_file(&self, name: &str) -> PyResult<PathBuf> {
        self.with(|s| s.ckpt.checkpoint_file(name).map_err(from_frame))
    }

    /// Ends the checkpoint begun: saves every file named with the
    /// protected arrays (kept as written when the checkpoint stays on the
    /// node, saved into it otherwise; close the files first and do not
    /// write to them after), commits it on every rank, and returns its id.
    /// Collective.
    fn end_checkpoint(&self, py: Python<'_>) -> PyResult<u64> {
        self.with(|s| released(py, || s.ckpt.end_checkpoint()).map_err(from_frame))
    }

    /// After `recover`, the path of file `name` as the restored checkpoint
    /// held it. Not collective.
    fn recovered_file(&self, name: &str) -> PyResult<PathBuf> {
        self.with(|s| s.ckpt.recovered_file(name).map_err(from_frame))
    }

    /// The names of the files `recover` restored.
    fn recovered_files(&self) -> PyResult<Vec<String>> {
        self.with(|s| Ok(s.ckpt.recovered_files().to_vec()))
    }

    /// Ends checkpointing: waits for the promotions and removes the job's
    /// checkpoints unless configured to keep them. Collective.
    fn finalize(&self, py: Python<'_>) -> PyResult<()> {
        let Some(session) = self.session.borrow_mut().take() else {
            return Err(errors::state(*self.gone.borrow()));
        };
        *self.gone.borrow_mut() = "finalize was already called";
        let Session {
            ckpt,
            arrays,
            owned,
        } = session;
        let done = released(py, || ckpt.finalize());
        drop(arrays);
        drop(owned);
        done.map_err(from_frame)
    }

    fn __repr__(&self) -> String {
        match self.session.borrow().as_ref() {
            Some(s) => format!(
                "<frame.Checkpointer rank {} of {}, {} array(s) protected{}>",
                s.ckpt.comm().rank(),
                s.ckpt.comm().size(),
                s.arrays.len(),
                if s.ckpt.recovering() {
                    ", recovering"
                } else {
                    ""
                }
            ),
            None => "<frame.Checkpointer, ended>".into(),
        }
    }
}
