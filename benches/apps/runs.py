"""One MPI job of the applications' runner (measure.py): started with a
deadline in the runner's process group, its processes found by a marker
in their environment, its output and metrics file read back. Any error
stops the runner with a message (`die`), killing the jobs still
running."""

import json
import os
import signal
import subprocess
import sys
import time

DEADLINE_S = 900  # one run, build or measurement
POLL_S = 0.02


def die(message):
    for run in list(LIVE):
        run.kill()
    print(f"benches/apps: {message}", file=sys.stderr)
    sys.exit(1)


def now_ns():
    return time.time_ns()


class Run:
    """One mpirun of a program, with a deadline. It stays in the runner's
    process group, so that whoever stops the runner stops it too."""

    def __init__(self, cmd, env, cwd, tag, marker):
        self.out_path = os.path.join(cwd, f"{tag}.out")
        self.marker = marker
        self.started_ns = now_ns()
        self.out = open(self.out_path, "w+b")
        self.proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                                     stdout=self.out, stderr=subprocess.STDOUT)
        LIVE.add(self)
        self.deadline = time.monotonic() + DEADLINE_S
        self.ended_ns = None

    def wait(self):
        try:
            self.proc.wait(timeout=max(1, self.deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.kill()
            die(f"a run passed its {DEADLINE_S} s deadline:\n{self.text()[-4000:]}")
        self.ended_ns = now_ns()
        LIVE.discard(self)
        return self.proc.returncode

    def kill(self):
        """SIGKILLs mpirun and every process of the run."""
        for pid in [self.proc.pid] + list(ranks_of(self.marker).values()):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait()
        LIVE.discard(self)

    def text(self):
        self.out.flush()
        with open(self.out_path, "rb") as f:
            return f.read().decode(errors="replace")

    def alive(self):
        return self.proc.poll() is None


# The runs not yet waited for: killed when the runner stops early.
LIVE = set()


def ranks_of(marker):
    """World rank -> pid of the processes whose environment holds marker."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if marker.encode() not in env:
            continue
        for var in env:
            if var.startswith(b"OMPI_COMM_WORLD_RANK="):
                found[int(var.split(b"=", 1)[1])] = int(entry)
    return found


def records(path, event):
    try:
        with open(path) as f:
            lines = f.readlines()
    except FileNotFoundError:
        return []
    out = []
    for line in lines:
        try:
            r = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line being written
        if r.get("event") == event:
            out.append(r)
    return out


def line_after(text, prefix):
    for line in text.splitlines():
        if line.startswith(prefix):
            return line[len(prefix):].strip()
    return None
