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

The last line rank 0 prints is ``final checksum: 0x<16 hex digits>``, a
hash of the whole plate: a run with failures prints the same one as a run
without.
"""

import argparse
import hashlib
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
    comm = ctx.comm
    rank, size = ctx.rank, ctx.size
    if a.nx < size:
        raise SystemExit(f"--nx {a.nx} gives a rank no rows (the job has {size} ranks)")
    _, rows = rows_of(rank, size, a.nx)
    ckpt = frame.Checkpointer(ctx)
    step = ckpt.protect(0, np.zeros(1, np.int64))
    grid = initial(rank, size, rows, a.ny)
    if not a.files:
        ckpt.protect(1, grid)
    if ckpt.recovering:
        ckpt.recover()
        if a.files:
            grid[...] = np.load(ckpt.recovered_file("rows.npy"))
        if rank == 0:
            print(f"rank 0 entered {ctx.state} (failed ranks {ctx.failed_ranks}); "
                  f"recovered step {int(step[0])}", flush=True)
    elif rank == 0:
        print(f"rank 0 entered {ctx.state}; starting at step 0", flush=True)
    scratch = grid.copy()
    while step[0] < a.steps:
        ctx.fault_point(int(step[0]))
        step_once(comm, grid, scratch)
        step[0] += 1
        if not a.files:
            ckpt.snapshot()
        elif step[0] % a.every == 0:
            ckpt.begin_checkpoint(a.level)
            with open(ckpt.checkpoint_file("rows.npy"), "wb") as f:
                np.save(f, grid)
            ckpt.end_checkpoint()
    h = checksum(comm, grid)
    if rank == 0:
        print(f"hottest interior cell of rank 0: {grid[1:-1, 1:-1].max():.3f}")
        print(f"final checksum: 0x{h:016x}", flush=True)
    ckpt.finalize()


if __name__ == "__main__":
    args = arguments()
    sys.exit(frame.run(lambda ctx: main(ctx, args)))
