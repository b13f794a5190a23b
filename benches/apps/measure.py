#!/usr/bin/env python3
"""Builds an application of benches/apps twice (as published, and with
frame's patch) and measures it: the fault-free time against the
unmodified application, and recoveries from a rank's and a node's failure
online through frame's ULFM mode and by a relaunch, each split into its
parts; and frame's retrieval against the iterative one after failures that
leave each level the lowest recoverable. Called by run.sh, which builds
libframe first; see docs/APPS.md.

Every run has a hard deadline and its processes are killed with it. A
failure is injected once the run's metrics file records the checkpoint
named by the application's `fail_after_checkpoint`: SIGKILL to the rank's
process, or to every process of a virtual node with its node-local
directory removed. Every recovered run must print the fault-free run's
answer line. Medians."""

import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib

from runs import DEADLINE_S, POLL_S, Run, die, line_after, now_ns, ranks_of, records


class App:
    """An application's description (benches/apps/<app>/app.toml)."""

    KEYS = {"name", "repository", "commit", "build_plain", "build_frame", "binary",
            "args", "verify", "answer", "sizes", "ranks_per_node",
            "fail_after_checkpoint", "args_by_size", "levels_size", "timer",
            "timer_field", "timer_scale"}
    OPTIONAL = {"args_by_size", "repository", "commit", "levels_size", "timer_field",
                "timer_scale"}

    def __init__(self, path):
        try:
            with open(path, "rb") as f:
                d = tomllib.load(f)
        except (OSError, tomllib.TOMLDecodeError) as e:
            die(f"{path}: {e}")
        unknown = set(d) - self.KEYS
        if unknown:
            die(f"{path}: unknown key(s) {sorted(unknown)}")
        for key in self.KEYS - self.OPTIONAL:
            if key not in d:
                die(f"{path}: key `{key}` is missing")
        self.path = path
        self.dir = os.path.dirname(path)
        self.__dict__.update(d)
        self.args_by_size = d.get("args_by_size", {})
        # No repository: a program of frame's own (the stand-in).
        self.repository = d.get("repository")
        self.commit = d.get("commit")
        self.levels_size = d.get("levels_size")
        self.timer_field = d.get("timer_field", 0)
        # Milliseconds per unit of the timer (seconds by default).
        self.timer_scale = d.get("timer_scale", 1000.0)

    def args_for(self, size):
        return self.args_by_size.get(str(size), self.args)

    def rpn_for(self, size):
        rpn = self.ranks_per_node
        if isinstance(rpn, dict):
            if str(size) not in rpn:
                die(f"{self.path}: ranks_per_node names no {size}")
            rpn = rpn[str(size)]
        if size % rpn:
            die(f"{self.path}: {size} ranks do not fill nodes of {rpn}")
        return rpn


class Bench:
    def __init__(self, app, opts, binaries):
        self.app, self.opts = app, opts
        self.plain, self.frame = binaries
        # Short names: the managers' sockets live below them.
        self.scratch = tempfile.mkdtemp(prefix="fa-", dir=opts.scratch)
        self.count = 0
        self.mpi_bin = os.path.join(opts.mpi, "bin")

    def env(self, extra):
        env = dict(os.environ)
        env["PATH"] = self.mpi_bin + os.pathsep + env.get("PATH", "")
        env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
        env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
        env.pop("FRAME_CONFIG", None)
        env.update(extra)
        return env

    def new_dir(self):
        self.count += 1
        d = os.path.join(self.scratch, f"r{self.count}")
        os.makedirs(d)
        return d

    def start(self, binary, size, procs, ft, frame_env, d, tag):
        mark = f"{os.getpid()}-{self.count}-{tag}"
        cmd = [os.path.join(self.mpi_bin, "mpirun")]
        if ft:
            cmd += ["--with-ft", "ulfm"]
        cmd += ["--oversubscribe", "-n", str(procs), binary] + self.app.args_for(size)
        # Open MPI's session and shared-memory files go with the run's
        # directory (a killed process leaves its segments behind).
        extra = {"FRAME_APPS_RUN": mark, "TMPDIR": d, "OMPI_MCA_btl_sm_backing_directory": d}
        extra.update(frame_env)
        return Run(cmd, self.env(extra), d, tag, f"FRAME_APPS_RUN={mark}")

    def frame_env(self, d, size, spares, strategy="frame", levels=None, interval="1"):
        env = {
            "FRAME_JOB_ID": "apps",
            "FRAME_STORAGE_LOCAL_DIR": os.path.join(d, "l1"),
            "FRAME_STORAGE_GLOBAL_DIR": os.path.join(d, "global"),
            "FRAME_METRICS_FILE": os.path.join(d, "metrics.jsonl"),
            "FRAME_SNAPSHOT_INTERVAL": interval,
            "FRAME_TOPOLOGY_RANKS_PER_NODE": str(self.app.rpn_for(size)),
            "FRAME_ULFM_SPARES": str(spares),
            "FRAME_RECOVERY_STRATEGY": strategy,
            "FRAME_L2_INTERVAL": "1",
        }
        env.update(levels or {})
        return env

    def answer(self, run, what):
        text = run.text()
        got = line_after(text, self.app.answer)
        if got is None:
            die(f"{what}: no `{self.app.answer}` line:\n{text[-4000:]}")
        return got

    # -- fault-free ---------------------------------------------------------

    def loop_ms(self, run, what):
        """The application's own time of its main loop (its `timer`
        line), in ms."""
        rest = line_after(run.text(), self.app.timer)
        try:
            return float(rest.split()[self.app.timer_field]) * self.app.timer_scale
        except (AttributeError, IndexError, ValueError):
            die(f"{what}: no time after `{self.app.timer}`:\n{run.text()[-4000:]}")

    def plain_run(self, size, ft=False):
        """The unmodified application (under MPI's failure handling with
        `ft`): its loop time and verification line."""
        d = self.new_dir()
        run = self.start(self.plain, size, size, ft, {}, d, "plain")
        if run.wait() != 0:
            die(f"the unmodified {self.app.name} failed:\n{run.text()[-4000:]}")
        verify = line_after(run.text(), self.app.verify)
        if verify is None:
            die(f"the unmodified {self.app.name}: no `{self.app.verify}` line")
        loop = self.loop_ms(run, "the unmodified application")
        shutil.rmtree(d, ignore_errors=True)
        return loop, verify

    def frame_run(self, size, interval, ft=True):
        """The application on frame with a checkpoint every `interval`
        iterations, online (`ft`: under ULFM, with a node of spares) or for
        a relaunch: its loop time, answer, verification line and the
        number of checkpoints."""
        d = self.new_dir()
        rpn = self.app.rpn_for(size)
        spares = rpn if ft else 0
        env = self.frame_env(d, size, spares, interval=interval)
        run = self.start(self.frame, size, size + spares, ft, env, d, "frame")
        if run.wait() != 0:
            die(f"{self.app.name} on frame failed:\n{run.text()[-4000:]}")
        answer = self.answer(run, "fault-free")
        loop = self.loop_ms(run, "frame")
        checkpoints = len(records(env["FRAME_METRICS_FILE"], "checkpoint"))
        verify = line_after(run.text(), self.app.verify)
        shutil.rmtree(d, ignore_errors=True)
        return loop, answer, verify, checkpoints

    # -- failures ------------------------------------------------------------

    def wait_for_checkpoint(self, run, metrics, after):
        while run.alive():
            if any(r["checkpoint"] >= after for r in records(metrics, "checkpoint")):
                return True
            time.sleep(POLL_S)
        return False

    def wait_for_promotions(self, run, metrics, checkpoint, levels, nodes):
        """Waits until every node's manager promoted `checkpoint` to each of
        `levels` (the metrics file's promotion records); False if the run
        ended first."""
        want = {(level, node) for level in levels for node in range(nodes)}
        while run.alive():
            done = {(r["level"], r["node"]) for r in records(metrics, "promotion")
                    if r["checkpoint"] == checkpoint and r["ok"]}
            if want <= done:
                return True
            time.sleep(POLL_S)
        return False

    def inject(self, run, victims, node_dirs):
        """SIGKILLs the world ranks `victims` of `run` (and removes the
        nodes' directories); the time of the kill."""
        pids = ranks_of(run.marker)
        missing = [v for v in victims if v not in pids]
        if missing:
            run.kill()
            die(f"no process for world rank(s) {missing} (found {sorted(pids)})")
        at = now_ns()
        for v in victims:
            os.kill(pids[v], signal.SIGKILL)
        for n in node_dirs:
            shutil.rmtree(n, ignore_errors=True)
        return at

    def failure_run(self, size, way, kind, reference, strategy="frame", levels=None,
                    victims=None, interval=1):
        """One run with a failure, with a checkpoint every `interval`
        iterations; its times (ms) and the level restored."""
        d = self.new_dir()
        rpn = self.app.rpn_for(size)
        ft = way == "ulfm"
        if victims is None:
            victims = [[size - 1]] if kind == "rank" else [list(range(size - rpn, size))]
        spares = rpn * len(victims) if ft else 0
        env = self.frame_env(d, size, spares, strategy=strategy, levels=levels,
                             interval=str(interval))
        metrics = env["FRAME_METRICS_FILE"]
        run = self.start(self.frame, size, size + spares, ft, env, d, way)
        after = max(1, self.app.fail_after_checkpoint // interval)
        if not self.wait_for_checkpoint(run, metrics, after):
            die(f"the run ended before checkpoint {after}:\n{run.text()[-4000:]}")
        if levels and not self.wait_for_promotions(run, metrics, after, (2, 3, 4), size // rpn):
            die(f"the run ended before checkpoint {after} reached every level:\n"
                f"{run.text()[-4000:]}")
        ranks = sorted(r for v in victims for r in v)
        node_dirs = [] if kind == "rank" else sorted(
            {os.path.join(env["FRAME_STORAGE_LOCAL_DIR"], f"node-{r // rpn}") for r in ranks})
        killed = self.inject(run, ranks, node_dirs)
        code = run.wait()
        if ft:
            if code != 0:
                die(f"{self.app.name} under ULFM did not recover:\n{run.text()[-4000:]}")
            restored = run
        else:
            restored = self.start(self.frame, size, size, False, env, d, "relaunch")
            if restored.wait() != 0:
                die(f"the relaunched {self.app.name} failed:\n{restored.text()[-4000:]}")
        got = self.answer(restored, f"{way}, {kind} failure")
        if got != reference:
            die(f"{way}, {kind} failure: the answer {got} is not the fault-free {reference}")
        rec = records(metrics, "recovery")
        if not rec:
            die(f"{way}, {kind} failure: no recovery record in {metrics}")
        rec = rec[-1]
        retrieval = rec["application_recovery_ms"]
        resumed = rec.get("resumed_ns", 0)
        if not resumed:
            die(f"{way}: the recovery record has no resumed_ns (libframe too old?)")
        total = (resumed - killed) / 1e6
        if ft:
            split = re.search(r"left the program at unix ns (\d+), then agreement ([\d.]+) ms, "
                              r"shrink ([\d.]+) ms, start ([\d.]+) ms, split ([\d.]+) ms",
                              run.text())
            if not split:
                die(f"no repair line in:\n{run.text()[-4000:]}")
            left = int(split.group(1))
            repair = sum(float(split.group(k)) for k in (2, 3, 4, 5))
            detection = (left - killed) / 1e6
            reinit = total - detection - repair - retrieval
        else:
            # Up to the dead job's end; then the new job's start and the
            # application's initialisation, up to the last load, less the
            # retrieval (no MPI repair).
            detection = (run.ended_ns - killed) / 1e6
            repair = float("nan")
            reinit = total - detection - retrieval
        shutil.rmtree(d, ignore_errors=True)
        return {"total": total, "detection": detection, "repair": repair,
                "retrieval": retrieval, "reinit": reinit, "level": rec["level"],
                "rounds": rec["rounds"]}


def median(values):
    return statistics.median(values) if values else float("nan")


# The code placement both builds share (see `build`).
PLACEMENT_CFLAGS = "-falign-functions=64"


def build(app, src, work, mpi, libdir, include):
    """Copies the sources twice, patches one copy and builds both."""
    env = dict(os.environ)
    env["PATH"] = os.path.join(mpi, "bin") + os.pathsep + env.get("PATH", "")
    env["MPICC"] = os.path.join(mpi, "bin", "mpicc")
    env["MPICXX"] = os.path.join(mpi, "bin", "mpicxx")
    env["FRAME_CFLAGS"] = f"-DFRAME_MPI_WORLD -include frame_mpi.h -I{include}"
    # Both builds place their code alike: every function starts on a
    # 64-byte line, so a kernel the patch does not touch keeps its loops at
    # the same offsets in the processor's fetch windows in both. Otherwise
    # the patch's lines move every function linked after them, and the
    # kernels' speed with them (docs/APPS.md, "Code placement").
    env["FRAME_APPS_CFLAGS"] = PLACEMENT_CFLAGS
    env["FRAME_LIBS"] = f"-L{libdir} -Wl,-rpath,{libdir} -lframe"
    binaries = []
    for variant in ("plain", "frame"):
        dest = os.path.join(work, variant)
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(src, dest, ignore=shutil.ignore_patterns(".git"), symlinks=True)
        if variant == "frame":
            patch = os.path.join(app.dir, "frame.patch")
            # Outside any repository (the work directory may be in one,
            # where git apply would skip the paths).
            r = subprocess.run(["git", "apply", "--whitespace=nowarn", patch], cwd=dest,
                               capture_output=True, text=True,
                               env=dict(os.environ, GIT_CEILING_DIRECTORIES=work))
            if r.returncode != 0:
                die(f"{patch} does not apply to {src}: {r.stderr.strip()}")
        command = getattr(app, f"build_{variant}")
        r = subprocess.run(["bash", "-c", command], cwd=dest, env=env, capture_output=True,
                           text=True, timeout=DEADLINE_S)
        if r.returncode != 0:
            die(f"building the {variant} {app.name} failed ({command}):\n{r.stdout[-3000:]}"
                f"{r.stderr[-3000:]}")
        binary = os.path.join(dest, app.binary)
        if not os.access(binary, os.X_OK):
            die(f"building the {variant} {app.name} made no {app.binary}")
        binaries.append(binary)
    return binaries


def check_commit(app, src, any_commit):
    if app.commit is None:
        return
    r = subprocess.run(["git", "-C", src, "rev-parse", "HEAD"], capture_output=True, text=True)
    if r.returncode != 0:
        print(f"note: {src} is not a git checkout; assuming {app.commit}")
        return
    head = r.stdout.strip()
    if head != app.commit and not any_commit:
        die(f"{src} is at {head}, not the pinned {app.commit} "
            f"(git -C {src} checkout {app.commit}, or --any-commit)")


def table(title, header, rows):
    print(f"\n{title}\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---:" for _ in header) + "|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    sys.stdout.flush()


def spread(values):
    """How far apart runs of one binary fell: (slowest - fastest) over
    their median, the machine's resolution for a difference of medians."""
    return f"{(max(values) - min(values)) / median(values) * 100:.1f}%"


def ms(v):
    return f"{v:.1f}"


def paper000(bench, app, sizes, runs, parts):
    rows_free, rows_rec = [], []
    for size in sizes:
        if "fault-free" in parts:
            t = {k: [] for k in ("plain", "plain_ft", "ulfm", "ulfm_ck", "relaunch")}
            verify_plain = verify_frame = None
            answers = set()
            checkpoints = 0
            never = "1000000000"
            for _ in range(runs):
                loop, verify_plain = bench.plain_run(size)
                t["plain"].append(loop)
                t["plain_ft"].append(bench.plain_run(size, ft=True)[0])
                for key, interval, ft in (("ulfm", never, True), ("ulfm_ck", "1", True),
                                          ("relaunch", never, False)):
                    loop, a, verify, n = bench.frame_run(size, interval, ft)
                    t[key].append(loop)
                    answers.add(a)
                    if interval == "1":
                        checkpoints, verify_frame = n, verify
            if len(answers) != 1:
                die(f"{size} ranks: fault-free runs disagree: {sorted(answers)}")
            if verify_plain != verify_frame:
                die(f"{size} ranks: the application's verification differs: "
                    f"{verify_plain!r} unmodified, {verify_frame!r} on frame")
            bench.reference[size] = answers.pop()
            m = {k: median(v) for k, v in t.items()}
            per_ckpt = max(0.0, (m["ulfm_ck"] - m["ulfm"]) / max(checkpoints, 1))
            # With one checkpoint every 3 minutes of the application's time.
            cost = lambda base: (base / m["plain"] - 1) * 100 + per_ckpt / 1800
            rows_free.append([str(size), ms(m["plain"]), ms(m["plain_ft"]), ms(m["ulfm"]),
                              ms(m["ulfm_ck"]), ms(m["relaunch"]), str(checkpoints),
                              ms(per_ckpt), f"{cost(m['ulfm']):+.1f}%",
                              f"{cost(m['relaunch']):+.1f}%", spread(t["plain"])])
        for way in ("ulfm", "relaunch"):
            for kind in ("rank", "node"):
                if f"{way}-{kind}" not in parts:
                    continue
                if size not in bench.reference:
                    _, a, _, _ = bench.frame_run(size, "1")
                    bench.reference[size] = a
                got = [bench.failure_run(size, way, kind, bench.reference[size])
                       for _ in range(runs)]
                m = {k: median([g[k] for g in got]) for k in got[0] if k != "level"}
                levels = sorted({g["level"] for g in got})
                rows_rec.append([str(size), way, kind, ms(m["total"]), ms(m["detection"]),
                                 ms(m["repair"]) if way == "ulfm" else "-",
                                 ms(m["retrieval"]), ms(m["reinit"]),
                                 "/".join(f"L{lv}" for lv in levels)])
    if rows_free:
        table(f"{app.name}: fault-free, the application's loop time (ms), median of {runs}",
              ["ranks", "unmodified", "unmodified, --with-ft ulfm", "frame ULFM, no checkpoint",
               "frame ULFM, checkpoint every iteration", "frame relaunch mode, no checkpoint",
               "checkpoints", "ms per checkpoint", "ULFM mode, a checkpoint every 3 min",
               "relaunch mode, same", "spread of the unmodified runs"], rows_free)
    if rows_rec:
        table(f"{app.name}: recovery (ms), kill to the last rank restored, median of {runs}",
              ["ranks", "way", "failure", "total", "detection", "MPI repair", "retrieval",
               "re-init (relaunch: new job and re-init)", "level"], rows_rec)


# Failures that leave each level the lowest recoverable one, on nodes of
# `rpn` ranks with every level at every checkpoint, partners the next node
# and level-3 groups of two nodes: a rank; a node; two neighbouring nodes
# of different groups; the two nodes of one group.
LEVELS = {
    "FRAME_L2_INTERVAL": "1", "FRAME_L3_INTERVAL": "1", "FRAME_L3_GROUP_SIZE": "2",
    "FRAME_L3_PARITY": "1", "FRAME_L4_INTERVAL": "1", "FRAME_L4_DIFFERENTIAL": "false",
}


# The level comparison's failure comes once the fourth checkpoint reached
# every level (each checkpoint goes to all of them).
LEVELS_CHECKPOINTS = 4


def paper004(bench, app, size, runs):
    rpn = app.rpn_for(size)
    nodes = size // rpn
    if nodes < 4:
        die(f"the level comparison needs 4 nodes or more ({size} ranks of {rpn} per node)")
    node = lambda n: list(range(n * rpn, (n + 1) * rpn))
    # The first level-3 group's size, by frame's rule (scheme/reed_solomon: groups
    # of consecutive nodes, as even as possible, the larger ones first);
    # the runner checks the level each case restores from.
    count = max(1, min(-(-nodes // 2), nodes // 2))
    first = nodes // count + (1 if nodes % count else 0)
    cases = [("L1", "rank", [[size - 1]]), ("L2", "node", [node(nodes - 1)]),
             ("L3", "node", [node(first - 1), node(first)]),
             ("L4", "node", [node(0), node(1)])]
    if size not in bench.reference:
        _, a, _, _ = bench.frame_run(size, "1")
        bench.reference[size] = a
    every = max(1, app.fail_after_checkpoint // LEVELS_CHECKPOINTS)
    rows = []
    for want, kind, victims in cases:
        row = [want]
        for strategy in ("frame", "iterative"):
            got = [bench.failure_run(size, "relaunch", kind, bench.reference[size],
                                     strategy=strategy, levels=LEVELS, victims=victims,
                                     interval=every)
                   for _ in range(runs)]
            levels = {g["level"] for g in got}
            if levels != {int(want[1])}:
                die(f"{want} case with {strategy}: restored from {sorted(levels)}")
            row += [ms(median([g["retrieval"] for g in got])),
                    str(int(median([g["rounds"] for g in got])))]
        row.append(f"{float(row[3]) / max(float(row[1]), 1e-9):.1f}x")
        rows.append(row)
    table(f"{app.name}: retrieval after failures (ms), {size} ranks, {rpn} per node, "
          f"relaunched, median of {runs}",
          ["lowest level", "frame", "rounds", "iterative", "rounds", "iterative / frame"], rows)


def stopped(signum, _frame):
    die(f"stopped by signal {signum}")


def main():
    signal.signal(signal.SIGTERM, stopped)
    signal.signal(signal.SIGINT, stopped)
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("app_toml")
    p.add_argument("source_dir")
    p.add_argument("--mpi", required=True, help="Open MPI 5 with ULFM (its prefix)")
    p.add_argument("--libframe", required=True, help="the directory of libframe (ulfm)")
    p.add_argument("--include", required=True, help="frame.h's directory")
    p.add_argument("--work", required=True, help="where the builds go")
    p.add_argument("--scratch", default="/dev/shm", help="where the runs' storage goes")
    p.add_argument("--sizes", help="comma-separated rank counts (default: the app's)")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--parts", default="fault-free,ulfm-rank,ulfm-node,relaunch-rank,"
                   "relaunch-node,levels",
                   help="which measurements (comma-separated)")
    p.add_argument("--levels-size", type=int, help="ranks of the level comparison")
    p.add_argument("--any-commit", action="store_true")
    o = p.parse_args()
    if not 1 <= o.runs <= 50:
        die(f"--runs {o.runs}: 1 to 50")
    app = App(o.app_toml)
    sizes = app.sizes
    if o.sizes:
        try:
            sizes = [int(s) for s in o.sizes.split(",")]
        except ValueError:
            die(f"--sizes {o.sizes}: comma-separated numbers")
        if any(not 1 <= s <= 1024 for s in sizes):
            die(f"--sizes {o.sizes}: each 1 to 1024")
    parts = set(o.parts.split(","))
    known = {"fault-free", "ulfm-rank", "ulfm-node", "relaunch-rank", "relaunch-node", "levels"}
    if parts - known:
        die(f"--parts: unknown {sorted(parts - known)} (known: {sorted(known)})")
    if not os.path.isdir(o.source_dir):
        die(f"SOURCE_DIR {o.source_dir} is not a directory")
    check_commit(app, o.source_dir, o.any_commit)
    os.makedirs(o.work, exist_ok=True)
    origin = f" ({app.repository} {app.commit[:12]})" if app.commit else ""
    print(f"building {app.name}{origin} as published and on frame (both {PLACEMENT_CFLAGS})")
    binaries = build(app, o.source_dir, o.work, o.mpi, o.libframe, o.include)
    bench = Bench(app, o, binaries)
    bench.reference = {}
    try:
        paper000(bench, app, sizes, o.runs, parts)
        if "levels" in parts:
            paper004(bench, app, o.levels_size or app.levels_size or sizes[0], o.runs)
    finally:
        shutil.rmtree(bench.scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
