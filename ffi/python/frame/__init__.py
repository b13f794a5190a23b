"""frame for Python: multi-level checkpoints of numpy arrays and of files a
program writes, and online recovery from process and node failures.

A rank protects the numpy arrays that make up its state, calls
``snapshot()`` once per iteration, and after a failure gets the same state
back, bit for bit, from the newest checkpoint every rank can restore.
Under ``frame run ... -- python prog.py`` the function given to
:func:`run` is entered again after every failure: survivors roll back in
place (their next frame call raises :class:`Interrupted`, which must
propagate out of the function) and failed ranks restart in new processes,
on a spare node if theirs died.

Example::

    import sys
    import numpy as np
    import frame

    def main(ctx: frame.Context) -> None:
        ckpt = frame.Checkpointer(ctx)          # collective
        step = ckpt.protect(0, np.zeros(1, np.int64))
        grid = ckpt.protect(1, np.zeros(1 << 20))
        if ckpt.recovering:
            ckpt.recover()                      # into the arrays, in place
        while step[0] < 1000:
            ctx.fault_point(int(step[0]))
            grid += 1.0
            step[0] += 1
            ckpt.snapshot()                     # per snapshot.interval
        ckpt.finalize()

    sys.exit(frame.run(main))

See docs/PYTHON.md in frame's repository for the whole interface.
"""

from ._native import (
    LEVELS,
    Checkpointer,
    Comm,
    Context,
    Error,
    Interrupted,
    NotRecoverable,
    NothingToRecover,
    RegionMismatch,
    StateError,
    run,
)

__all__ = [
    "LEVELS",
    "Checkpointer",
    "Comm",
    "Context",
    "Error",
    "Interrupted",
    "NotRecoverable",
    "NothingToRecover",
    "RegionMismatch",
    "StateError",
    "run",
]
