"""2D heat diffusion (Jacobi iteration) in Python with numpy, on frame.

The plate's rows are split over the ranks; halo rows travel through
frame's communicator straight between the numpy arrays; the grid and the
step are protected in place and checkpointed by ``snapshot()`` every
iteration (``snapshot.interval`` decides which ones write). After a
failure ``frame.run`` enters ``main`` again: it recovers the newest
checkpoint every rank can restore and goes on.

    ffi/python/install
    frame run --nodes 2 --ranks-per-node 2 -- target/python/bin/python \\
        examples/python/heat.py --nx 256 --ny 256 --steps 600

With ``--files`` the state goes through a file checkpoint instead: every
``--every`` steps each rank writes its rows with ``numpy.save`` into the
file frame names, and reads them back with ``numpy.load`` after a
failure.

With ``--mpi`` it runs under MPI instead (the package built with
``ffi/python/install --mpi``): halos and the checksum go through mpi4py,
and frame checkpoints over ``MPI.COMM_WORLD``. A failure ends the MPI job;
the same command run again resumes from the newest checkpoint.
``--crash-at N`` kills every rank once step N's checkpoint is written and
promoted, to try that:

    mpiexec -n 4 target/python/bin/python examples/python/heat.py --mpi --crash-at 120
    mpiexec -n 4 target/python/bin/python examples/python/heat.py --mpi

The last line rank 0 prints is ``final checksum: 0x<16 hex digits>``, a
hash of the whole plate: a run with failures prints the same one as a run
without.
"""

import argparse
import hashlib
import os
import signal
import sys

import numpy as np

import frame

TOP, BOTTOM, LEFT, RIGHT = 100.0, 0.0, 75.0, 50.0
HALO = 1


def arguments() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nx", type=int, default=256, help="rows of the plate")
    p.add_argument("--ny", type=int, default=256, help="columns of the plate")
    p.add_argument("--steps", type=int, default=600, help="iterations")
    p.add_argument("--files", action="store_true", help="checkpoint through files")
    p.add_argument("--every", type=int, default=10, help="steps between file checkpoints")
    p.add_argument("--level", type=int, default=1, help="level of file checkpoints")
    p.add_argument("--settle-at", type=int, default=0,
                   help="after step N's checkpoint, wait until every level has it")
    p.add_argument("--mpi", action="store_true", help="run under mpiexec with mpi4py")
    p.add_argument("--crash-at", type=int, default=0,
                   help="with --mpi: kill every rank after step N's checkpoint")
    a = p.parse_args()
    for name in ("nx", "ny", "steps", "every"):
        if getattr(a, name) < 1:
            p.error(f"--{name} must be at least 1")
    return a


def rows_of(rank: int, size: int, nx: int) -> tuple:
    """The first row and the number of rows of ``rank``'s block."""
    base, extra = divmod(nx, size)
    rows = base + (1 if rank < extra else 0)
    first = rank * base + min(rank, extra)
    return first, rows


def initial(rank: int, size: int, rows: int, ny: int) -> np.ndarray:
    """The block with its halo rows: the plate's edges hold fixed
    temperatures, the inside starts at zero."""
    g = np.zeros((rows + 2, ny + 2))
    g[:, 0], g[:, -1] = LEFT, RIGHT
    if rank == 0:
        g[0, :] = TOP
    if rank == size - 1:
        g[-1, :] = BOTTOM
    return g


class MpiComm:
    """mpi4py's communicator, with the calls this program makes of
    frame.Comm."""

    def __init__(self, comm):
        from mpi4py import MPI

        self.mpi, self.comm = MPI, comm
        self.rank, self.size = comm.Get_rank(), comm.Get_size()

    def sendrecv(self, data, dest, out, src, tag):
        self.comm.Sendrecv(data, dest, tag, out, src, tag)
        return out

    def allreduce(self, values, op):
        ops = {"sum": self.mpi.SUM, "min": self.mpi.MIN, "max": self.mpi.MAX}
        self.comm.Allreduce(self.mpi.IN_PLACE, values, op=ops[op])
        return values


def step_once(comm: frame.Comm, g: np.ndarray, scratch: np.ndarray) -> None:
    rank, size = comm.rank, comm.size
    # Halos: each rank's first and last rows go to its neighbours.
    if rank > 0:
        comm.sendrecv(g[1], rank - 1, g[0], rank - 1, HALO)
    if rank < size - 1:
        comm.sendrecv(g[-2], rank + 1, g[-1], rank + 1, HALO)
    inner = scratch[1:-1, 1:-1]
    np.add(g[:-2, 1:-1], g[2:, 1:-1], out=inner)
    inner += g[1:-1, :-2]
    inner += g[1:-1, 2:]
    inner *= 0.25
    g[1:-1, 1:-1] = inner


def checksum(comm: frame.Comm, g: np.ndarray) -> int:
    """A hash of the whole plate: every rank's rows, by rank."""
    mine = hashlib.blake2b(g[1:-1, 1:-1].tobytes(), digest_size=8,
                           person=comm.rank.to_bytes(8, "little")).digest()
    total = np.array([int.from_bytes(mine, "little")], dtype=np.uint64)
    comm.allreduce(total, "sum")
    return int(total[0])


def main(ctx: frame.Context, a: argparse.Namespace) -> None:
    """The resilient function: entered again after every failure."""
    heat(ctx.comm, frame.Checkpointer(ctx), a, ctx.state, ctx.fault_point)


def mpi_main(a: argparse.Namespace) -> None:
    """Under mpiexec: one run, from the newest checkpoint if there is one."""
    from mpi4py import MPI

    comm = MpiComm(MPI.COMM_WORLD)
    heat(comm, frame.Checkpointer(comm=MPI.COMM_WORLD), a, "mpi", lambda step: None)


def heat(comm, ckpt: frame.Checkpointer, a: argparse.Namespace, state: str, fault_point) -> None:
    rank, size = comm.rank, comm.size
    if a.nx < size:
        raise SystemExit(f"--nx {a.nx} gives a rank no rows (the job has {size} ranks)")
    _, rows = rows_of(rank, size, a.nx)
    step = ckpt.protect(0, np.zeros(1, np.int64))
    grid = initial(rank, size, rows, a.ny)
    if not a.files:
        ckpt.protect(1, grid)
    if ckpt.recovering:
        ckpt.recover()
        if a.files:
            grid[...] = np.load(ckpt.recovered_file("rows.npy"))
        if rank == 0:
            level = ckpt.status()["recovered_from"]
            print(f"rank 0 entered {state}; recovered step {int(step[0])} from L{level}",
                  flush=True)
    elif rank == 0:
        print(f"rank 0 entered {state}; starting at step 0", flush=True)
    if int(step[0]) == a.settle_at > 0:
        # Restored to the settling step: wait as the first run did there,
        # so that every rank makes the same calls after the checkpoint
        # (a logged recovery replays them).
        ckpt.wait_for_promotions()
    scratch = grid.copy()
    while step[0] < a.steps:
        fault_point(int(step[0]))
        step_once(comm, grid, scratch)
        step[0] += 1
        written = None
        if not a.files:
            written = ckpt.snapshot()
        elif step[0] % a.every == 0:
            ckpt.begin_checkpoint(a.level)
            with open(ckpt.checkpoint_file("rows.npy"), "wb") as f:
                np.save(f, grid)
            written = ckpt.end_checkpoint()
        if written is not None and step[0] == a.settle_at:
            ckpt.wait_for_promotions()
        if a.mpi and written is not None and step[0] >= a.crash_at > 0:
            ckpt.wait_for_promotions()
            if rank == 0:
                print(f"crashing at step {int(step[0])}", flush=True)
            comm.comm.Barrier()
            os.kill(os.getpid(), signal.SIGKILL)
    h = checksum(comm, grid)
    if rank == 0:
        print(f"hottest interior cell of rank 0: {grid[1:-1, 1:-1].max():.3f}")
        print(f"final checksum: 0x{h:016x}", flush=True)
    ckpt.finalize()


if __name__ == "__main__":
    args = arguments()
    if args.mpi:
        mpi_main(args)
    else:
        sys.exit(frame.run(lambda ctx: main(ctx, args)))
