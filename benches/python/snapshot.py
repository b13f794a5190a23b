"""The Python side of `cargo bench --bench python`: protect + snapshot of a
numpy array of each size, on one rank, storage and configuration from the
environment (FRAME_*). Prints one line per size: MiB and the seconds each
of REPS repetitions took.

    python benches/python/snapshot.py REPS MIB [MIB ...]
"""

import sys
import time

import numpy as np

import frame


def main() -> None:
    reps = int(sys.argv[1])
    for mib in (int(m) for m in sys.argv[2:]):
        ckpt = frame.Checkpointer()
        data = (np.arange(mib << 17, dtype=np.uint64) * 31 % 251).astype(np.float64)
        times = []
        for rep in range(reps):
            data[rep] += 1.0  # the state changes between checkpoints
            t = time.perf_counter()
            ckpt.protect(0, data)
            ckpt.snapshot()
            times.append(time.perf_counter() - t)
        ckpt.finalize()
        print(mib, *times, flush=True)


if __name__ == "__main__":
    main()
