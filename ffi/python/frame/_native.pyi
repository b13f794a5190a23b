"""Type hints of frame's extension module (re-exported by ``frame``)."""

import os
import pathlib
from typing import Callable, Dict, List, Literal, Optional, Tuple, TypeVar, Union

import numpy as np

_A = TypeVar("_A", bound=np.ndarray)

LEVELS: Tuple[int, int, int, int]
"""The checkpoint levels: 1 node-local, 2 partner copy, 3 Reed-Solomon
groups, 4 global directory."""

class Error(RuntimeError):
    """A failure of frame: storage, configuration, a peer or a checkpoint.
    The message names the file, key, rank or region at fault."""

class Interrupted(Error):
    """A failure elsewhere in the job started a recovery. Let it propagate
    out of the resilient function: :func:`run` enters it again once the job
    recovered."""

class RegionMismatch(Error):
    """The protected arrays do not match the checkpoint being restored
    (dtype or size); see :meth:`Checkpointer.stored_region`."""

class NothingToRecover(Error):
    """There is no checkpoint to recover: the run started fresh."""

class NotRecoverable(Error):
    """Checkpoints exist but not every rank can restore one. Nothing was
    deleted; the message says what each rank lacks."""

class StateError(Error):
    """A call out of order: after :meth:`Checkpointer.finalize`, with a
    context whose entry has ended, or a snapshot between
    :meth:`Checkpointer.begin_checkpoint` and
    :meth:`Checkpointer.end_checkpoint`."""

def run(main: Callable[["Context"], None]) -> int:
    """Runs ``main(ctx)`` under frame's runtime and returns the process's
    exit status (0 when every rank finished; pass it to ``sys.exit``).

    Under ``frame run`` the process is one rank, and ``main`` is entered
    again after every failure: ``ctx.state`` is then ``"reinited"`` (a
    survivor) or ``"restarted"`` (a replacement). Started on its own, the
    program is the only rank and ``main`` runs once. An exception other
    than :class:`Interrupted` stops the whole job, with its traceback.
    """

class Context:
    """What the runtime tells the resilient function. Valid only inside the
    call of ``main`` that received it (a stale one raises
    :class:`StateError`)."""

    @property
    def rank(self) -> int:
        """This rank (0 to size - 1)."""
    @property
    def size(self) -> int:
        """The number of ranks in the job."""
    @property
    def node(self) -> int:
        """The node this rank runs on."""
    @property
    def state(self) -> Literal["new", "reinited", "restarted"]:
        """How this rank entered: first start, a survivor rolled back, or a
        replacement for a failed rank."""
    @property
    def epoch(self) -> int:
        """1 at the start, one more after each recovery."""
    @property
    def failed_ranks(self) -> List[int]:
        """The ranks that failed in the recovery that led to this entry."""
    @property
    def failed_nodes(self) -> List[int]:
        """The nodes that failed in that recovery."""
    @property
    def node_dir(self) -> pathlib.Path:
        """This rank's node-local storage directory."""
    @property
    def comm(self) -> "Comm":
        """The communicator of this entry (every rank of the job)."""
    def fault_point(self, iteration: int) -> None:
        """Call once per iteration: shows progress, fires the injections of
        ``frame run --inject`` set for this iteration, and raises
        :class:`Interrupted` when a recovery started."""

class Comm:
    """frame's communicator for numpy arrays: messages leave from and land
    in the arrays' memory. Arrays must be contiguous; receiving ones
    writeable. Every call raises :class:`Interrupted` when a recovery
    started."""

    @property
    def rank(self) -> int:
        """This rank."""
    @property
    def size(self) -> int:
        """The number of ranks."""
    def send(self, data: np.ndarray, dest: int, tag: int = 0) -> None:
        """Sends ``data`` to rank ``dest``; does not wait for the receiver."""
    def recv(self, out: _A, src: int, tag: int = 0) -> _A:
        """Receives the next message from ``src`` with ``tag`` into ``out``,
        which must have exactly its size; returns ``out``."""
    def sendrecv(
        self, data: np.ndarray, dest: int, out: _A, src: int, tag: int = 0
    ) -> _A:
        """Sends ``data`` to ``dest`` and receives into ``out`` from ``src``
        (safe in any order); returns ``out``."""
    def barrier(self) -> None:
        """Waits until every rank entered the barrier."""
    def allreduce(
        self, values: _A, op: Literal["sum", "min", "max"] = "sum"
    ) -> _A:
        """Reduces ``values`` element-wise over all ranks, in place on every
        rank (integers, float32, float64); returns it. Every rank gets the
        same bits."""
    def bcast(self, data: _A, root: int = 0) -> _A:
        """Copies ``root``'s ``data`` into every rank's ``data`` (same
        size); returns it."""

class Checkpointer:
    """Checkpoints of numpy arrays and of files the program writes.

    ``Checkpointer(ctx)`` inside the resilient function (it goes when the
    entry ends); ``Checkpointer(comm=MPI.COMM_WORLD)`` under ``mpiexec``
    with an mpi4py communicator (a package built with ``install --mpi``);
    ``Checkpointer()`` in a program that uses neither (a job of one rank).
    ``config`` is a TOML file; without it, ``FRAME_CONFIG`` (which
    ``frame run`` sets) or the defaults, with ``FRAME_*`` overrides.
    Collective: finds out with the other ranks whether there is a
    checkpoint to recover.
    """

    def __init__(
        self,
        ctx: Optional[Context] = None,
        config: Optional[Union[os.PathLike[str], str]] = None,
        comm: Optional[object] = None,
    ) -> None: ...
    def protect(self, id: int, array: _A) -> _A:
        """Protects ``array`` as region ``id`` (a number of your choice) and
        returns it. Its memory is saved in place by every checkpoint and
        restored into by :meth:`recover`: keep using this array object
        (``a[...] = x``, ``a += 1``; not ``a = a + 1``, which makes a new
        one). It must be contiguous, writeable and of a numeric or bytes
        dtype; numpy cannot resize it while protected. Protecting an id
        again replaces the region."""
    def unprotect(self, id: int) -> bool:
        """Stops protecting region ``id``; returns whether it was."""
    def snapshot(self) -> Optional[int]:
        """Call once per iteration: writes a checkpoint when
        ``snapshot.interval`` says so and returns its id, else None.
        Collective."""
    def checkpoint(self, level: int = 1) -> int:
        """Writes a checkpoint now, kept at ``level`` (1 to 4) besides the
        levels whose interval is due; returns its id. Collective."""
    @property
    def recovering(self) -> bool:
        """Whether a checkpoint to recover was found and not yet
        recovered."""
    @property
    def recovery_id(self) -> Optional[int]:
        """The id of that checkpoint, while :attr:`recovering`."""
    def recover(self) -> int:
        """Restores every protected array (and the files of a file
        checkpoint) from the checkpoint found; returns its id. Collective.
        Raises :class:`RegionMismatch` when a stored region's dtype or
        size differs from its array's."""
    def recover_region(self, id: int) -> None:
        """Restores region ``id`` alone. Not collective."""
    def stored_region(self, id: int) -> Optional[Tuple[str, int]]:
        """The dtype name and element count of region ``id`` in the
        checkpoint to recover, to allocate its array before protecting it
        (complex arrays are stored as twice as many floats)."""
    def stored_regions(self) -> Dict[int, Tuple[str, int]]:
        """Every region of the checkpoint to recover."""
    def status(self) -> Dict[str, object]:
        """``recovering``, ``recovery_id``, ``checkpoints``, ``last_id``,
        ``checkpoint_seconds``, ``last_checkpoint_seconds``,
        ``raw_bytes``, ``stored_bytes``, ``recovered_from`` (a level or
        None), ``recovery_seconds`` and ``recovery_rounds``."""
    @property
    def local_dir(self) -> pathlib.Path:
        """This rank's node-local checkpoint directory."""
    def wait_for_promotions(self) -> None:
        """Waits until every node's manager finished the promotions to
        levels 2 to 4 asked so far. Collective."""
    def begin_checkpoint(self, level: int = 1) -> None:
        """Begins a checkpoint of files, kept at ``level`` besides the
        levels whose interval is due; it holds the protected arrays too.
        Not collective."""
    def checkpoint_file(self, name: str) -> pathlib.Path:
        """The path to write file ``name`` of the checkpoint begun: a new,
        empty, private file on node-local storage. One file name, no
        ``/``, not starting with ``.``. Not collective."""
    def end_checkpoint(self) -> int:
        """Saves every file named with the protected arrays (kept as
        written when the checkpoint stays on the node, saved into it
        otherwise; close the files first and do not write to them after),
        commits the checkpoint on every rank and returns its id.
        Collective."""
    def recovered_file(self, name: str) -> pathlib.Path:
        """After :meth:`recover`, the path of file ``name`` as the restored
        checkpoint held it."""
    def recovered_files(self) -> List[str]:
        """The names of the files :meth:`recover` restored."""
    def finalize(self) -> None:
        """Ends checkpointing: waits for the promotions and removes the
        job's checkpoints unless configured to keep them. Collective."""
