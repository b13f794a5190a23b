//! The `Comm` class: frame's communicator for numpy buffers. Messages are
//! sent from an array's memory and received straight into the receiving
//! array (one copy, no Python objects in between); reductions work in
//! place. Every call raises `frame.Interrupted` when a failure elsewhere
//! started a recovery.

use crate::arrays::{self, Memory};
use crate::errors::from_comm;
use crate::live::{self, Token};
use crate::released;
use frame_core::comm::{CommExt, CommResult, ReduceOp, Reducible};
use frame_core::ElemType;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

/// The communicator of one entry of the resilient function.
#[pyclass(module = "frame", frozen)]
pub(crate) struct Comm {
    token: Token,
}

impl Comm {
    pub(crate) fn new(token: Token) -> Self {
        Self { token }
    }

    /// Runs `f` on the entry's communicator with the interpreter released.
    fn on<R>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&dyn frame_core::comm::Comm) -> CommResult<R>,
    ) -> PyResult<R> {
        live::with_context(self.token, |c| {
            released(py, || f(c.comm())).map_err(from_comm)
        })
    }

    /// Checks that `rank` is a rank of the job.
    fn rank_arg(&self, rank: usize, what: &str) -> PyResult<usize> {
        let size = live::with_context(self.token, |c| Ok(c.comm().size()))?;
        if rank < size {
            Ok(rank)
        } else {
            Err(PyValueError::new_err(format!(
                "{what}: there is no rank {rank} (the job has {size})"
            )))
        }
    }
}

fn op_of(op: &str) -> PyResult<ReduceOp> {
    match op {
        "sum" => Ok(ReduceOp::Sum),
        "min" => Ok(ReduceOp::Min),
        "max" => Ok(ReduceOp::Max),
        other => Err(PyValueError::new_err(format!(
            "unknown reduction {other:?} (\"sum\", \"min\" or \"max\")"
        ))),
    }
}

/// Reduces `memory`, an array of `T`, in place.
///
/// # Safety
/// `memory` is the live, writeable memory of an array of `T` elements.
unsafe fn reduce_as<T: Reducible>(
    comm: &dyn frame_core::comm::Comm,
    memory: Memory,
    op: ReduceOp,
) -> CommResult<()> {
    let n = memory.bytes() / std::mem::size_of::<T>();
    if n == 0 {
        return comm.all_reduce::<T>(&mut [], op);
    }
    // SAFETY: forwarded to the caller; `arrays::check` found the memory
    // aligned for the array's dtype, which is `T`.
    let values = unsafe { std::slice::from_raw_parts_mut(memory.ptr.cast::<T>(), n) };
    comm.all_reduce(values, op)
}

#[pymethods]
impl Comm {
    /// This rank.
    #[getter]
    fn rank(&self) -> PyResult<usize> {
        live::with_context(self.token, |c| Ok(c.comm().rank()))
    }

    /// The number of ranks.
    #[getter]
    fn size(&self) -> PyResult<usize> {
        live::with_context(self.token, |c| Ok(c.comm().size()))
    }

    /// Sends the memory of array `data` to rank `dest` with `tag` (at
    /// least 0). Returns once the bytes are handed over; it does not wait
    /// for the receiver.
    #[pyo3(signature = (data, dest, tag = 0))]
    fn send(&self, py: Python<'_>, data: Bound<'_, PyAny>, dest: usize, tag: u32) -> PyResult<()> {
        let dest = self.rank_arg(dest, "send")?;
        let (_keep, memory) = arrays::check(&data, "send buffer")?;
        // SAFETY: `_keep` holds the array for the call.
        let bytes = unsafe { memory.as_slice() };
        self.on(py, |c| c.send(dest, tag, bytes))
    }

    /// Receives the next message from rank `src` with `tag` into array
    /// `out`, which must have exactly the message's size; returns `out`.
    #[pyo3(signature = (out, src, tag = 0))]
    fn recv<'py>(
        &self,
        py: Python<'py>,
        out: Bound<'py, PyAny>,
        src: usize,
        tag: u32,
    ) -> PyResult<Bound<'py, PyAny>> {
        let src = self.rank_arg(src, "recv")?;
        let (_keep, memory) = arrays::writable(&out, "receive buffer")?;
        // SAFETY: `_keep` holds the writeable array for the call.
        let bytes = unsafe { memory.as_mut_slice() };
        self.on(py, |c| c.recv_into(src, tag, bytes))?;
        Ok(out)
    }

    /// Sends array `data` to `dest` and receives into array `out` from
    /// `src`, both with `tag` (safe in any order: sends do not wait);
    /// returns `out`.
    #[pyo3(signature = (data, dest, out, src, tag = 0))]
    fn sendrecv<'py>(
        &self,
        py: Python<'py>,
        data: Bound<'py, PyAny>,
        dest: usize,
        out: Bound<'py, PyAny>,
        src: usize,
        tag: u32,
    ) -> PyResult<Bound<'py, PyAny>> {
        let dest = self.rank_arg(dest, "sendrecv")?;
        let src = self.rank_arg(src, "sendrecv")?;
        let (_send, sent) = arrays::check(&data, "send buffer")?;
        let (_recv, into) = arrays::writable(&out, "receive buffer")?;
        let (s, r) = (sent.ptr as usize, into.ptr as usize);
        if sent.bytes() > 0 && into.bytes() > 0 && s < r + into.bytes() && r < s + sent.bytes() {
            return Err(PyValueError::new_err(
                "sendrecv: the send and receive buffers overlap (use two arrays, or send then recv)",
            ));
        }
        // SAFETY: the arrays are held for the call; disjoint (checked).
        let (bytes, dst) = unsafe { (sent.as_slice(), into.as_mut_slice()) };
        self.on(py, |c| {
            c.send(dest, tag, bytes)?;
            c.recv_into(src, tag, dst)
        })?;
        Ok(out)
    }

    /// Waits until every rank entered the barrier.
    fn barrier(&self, py: Python<'_>) -> PyResult<()> {
        self.on(py, |c| c.barrier())
    }

    /// Reduces array `values` element-wise over all ranks with `op`
    /// ("sum", "min" or "max"), in place on every rank; returns it.
    /// Integer sums wrap. Floats are reduced in rank order, so every rank
    /// gets the same bits.
    #[pyo3(signature = (values, op = "sum"))]
    fn allreduce<'py>(
        &self,
        py: Python<'py>,
        values: Bound<'py, PyAny>,
        op: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        let op = op_of(op)?;
        let (array, memory) = arrays::writable(&values, "allreduce")?;
        let kind = {
            use numpy::{PyArrayDescrMethods, PyUntypedArrayMethods};
            array.dtype().kind()
        };
        if kind_unsupported(kind, memory.elem) {
            return Err(PyTypeError::new_err(format!(
                "allreduce: arrays of {} cannot be reduced (integers, float32 and float64 can)",
                array_dtype(&array)
            )));
        }
        self.on(py, |c| {
            // SAFETY: every arm takes the held, writeable array as the type
            // its element names.
            unsafe {
                match memory.elem {
                    ElemType::F64 => reduce_as::<f64>(c, memory, op),
                    ElemType::F32 => reduce_as::<f32>(c, memory, op),
                    ElemType::I64 => reduce_as::<i64>(c, memory, op),
                    ElemType::I32 => reduce_as::<i32>(c, memory, op),
                    ElemType::I16 => reduce_as::<i16>(c, memory, op),
                    ElemType::I8 => reduce_as::<i8>(c, memory, op),
                    ElemType::U64 => reduce_as::<u64>(c, memory, op),
                    ElemType::U32 => reduce_as::<u32>(c, memory, op),
                    ElemType::U16 => reduce_as::<u16>(c, memory, op),
                    ElemType::U8 | ElemType::Byte => reduce_as::<u8>(c, memory, op),
                }
            }
        })?;
        Ok(values)
    }

    /// Copies array `data` of rank `root` into array `data` of every other
    /// rank (of the same size); returns it.
    #[pyo3(signature = (data, root = 0))]
    fn bcast<'py>(
        &self,
        py: Python<'py>,
        data: Bound<'py, PyAny>,
        root: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        let root = self.rank_arg(root, "bcast")?;
        let (_keep, memory) = arrays::writable(&data, "bcast")?;
        // SAFETY: `_keep` holds the writeable array for the call.
        let bytes = unsafe { memory.as_mut_slice() };
        let expected = bytes.len();
        let got = self.on(py, |c| {
            let mut buf = bytes.to_vec();
            c.broadcast(&mut buf, root)?;
            Ok(buf)
        })?;
        if got.len() != expected {
            return Err(PyValueError::new_err(format!(
                "bcast: rank {root} sent {} bytes into an array of {expected}",
                got.len()
            )));
        }
        bytes.copy_from_slice(&got);
        Ok(data)
    }

    fn __repr__(&self) -> String {
        live::with_context(self.token, |c| {
            Ok(format!(
                "<frame.Comm rank {} of {}>",
                c.comm().rank(),
                c.comm().size()
            ))
        })
        .unwrap_or_else(|_| "<frame.Comm, ended>".into())
    }
}

/// Whether an array of numpy kind `kind` stored as `elem` has no reduction.
fn kind_unsupported(kind: u8, elem: ElemType) -> bool {
    !matches!(
        (kind, elem),
        (b'f', ElemType::F64 | ElemType::F32)
            | (
                b'i',
                ElemType::I64 | ElemType::I32 | ElemType::I16 | ElemType::I8
            )
            | (
                b'u',
                ElemType::U64 | ElemType::U32 | ElemType::U16 | ElemType::U8
            )
    )
}

fn array_dtype(array: &Bound<'_, numpy::PyUntypedArray>) -> String {
    use numpy::PyUntypedArrayMethods;
    array.dtype().to_string()
}
