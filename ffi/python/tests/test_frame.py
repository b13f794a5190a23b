"""The Python interface on its own (no runtime): what protect accepts and
refuses, bit-exact round trips of every dtype and of files through a
process restart, and the errors of calls out of order.

Run by tests/interfaces/python.rs with the virtual environment ffi/python/install
builds: ``python -m unittest discover -s ffi/python/tests``.
"""

import ast
import os
import pathlib
import subprocess
import sys
import tempfile
import textwrap
import unittest

import numpy as np

import frame

DTYPES = [
    np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
    np.uint32, np.uint64, np.float16, np.float32, np.float64, np.complex64,
    np.complex128, "S7", "V3",
]


class Storage(unittest.TestCase):
    """Each test gets its own node-local directory and job."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.env = dict(os.environ)
        for k in list(self.env):
            if k.startswith("FRAME_"):
                del self.env[k]
        self.env["FRAME_STORAGE_LOCAL_DIR"] = os.path.join(self.tmp.name, "local")
        self.env["FRAME_JOB_ID"] = "pytest"
        self.saved = {k: os.environ.get(k) for k in self.env if k.startswith("FRAME_")}
        for k in list(os.environ):
            if k.startswith("FRAME_") and k not in self.env:
                self.saved[k] = os.environ.pop(k)
        os.environ.update({k: v for k, v in self.env.items() if k.startswith("FRAME_")})
        self.addCleanup(self.restore_env)

    def restore_env(self):
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    def program(self, body: str, *args: str) -> str:
        """Runs ``body`` as a Python program of its own (a new process,
        as a restart is); returns its standard output."""
        path = os.path.join(self.tmp.name, "prog.py")
        pathlib.Path(path).write_text(textwrap.dedent(body))
        out = subprocess.run(
            [sys.executable, path, *args], env=self.env, capture_output=True,
            text=True, timeout=120,
        )
        self.assertEqual(out.returncode, 0, f"{out.stdout}\n{out.stderr}")
        return out.stdout


class ProtectRefuses(Storage):
    def test_what_cannot_be_used_in_place_is_refused_naming_the_region(self):
        ckpt = frame.Checkpointer()
        self.addCleanup(ckpt.finalize)
        cases = [
            ([1, 2, 3], TypeError, "expected a numpy array"),
            (np.zeros(10)[::2], ValueError, "not contiguous"),
            (np.zeros((4, 4)).T[1:3], ValueError, "not contiguous"),
            (np.zeros(3, dtype=object), TypeError, "objects"),
            (np.zeros(3, dtype="U4"), TypeError, "cannot store"),
            (np.zeros(3, dtype="M8[s]"), TypeError, "cannot store"),
            (np.zeros(3, dtype=[("a", "i4"), ("b", "f8")]), TypeError, "structured"),
            (np.zeros(3, dtype=">f8"), ValueError, "byte order"),
        ]
        ro = np.zeros(3)
        ro.flags.writeable = False
        cases.append((ro, ValueError, "read-only"))
        for value, kind, text in cases:
            with self.subTest(value=repr(value)[:40]):
                with self.assertRaises(kind) as e:
                    ckpt.protect(7, value)
                self.assertIn("region 7", str(e.exception))
                self.assertIn(text, str(e.exception))

    def test_a_protected_array_cannot_be_resized_by_numpy(self):
        ckpt = frame.Checkpointer()
        self.addCleanup(ckpt.finalize)
        a = ckpt.protect(0, np.zeros(8))
        with self.assertRaises(ValueError):
            a.resize(16)
        self.assertTrue(ckpt.unprotect(0))
        self.assertFalse(ckpt.unprotect(0))

    def test_levels_outside_one_to_four_are_refused(self):
        ckpt = frame.Checkpointer()
        self.addCleanup(ckpt.finalize)
        for level in (0, 5):
            with self.assertRaisesRegex(ValueError, f"level {level} is not"):
                ckpt.checkpoint(level)
            with self.assertRaisesRegex(ValueError, f"level {level} is not"):
                ckpt.begin_checkpoint(level)

    def test_a_communicator_that_is_not_mpi4pys_is_refused(self):
        with self.assertRaisesRegex(TypeError, "^comm: "):
            frame.Checkpointer(comm=object())

        def main(ctx):
            with self.assertRaisesRegex(frame.StateError, "not both"):
                frame.Checkpointer(ctx, comm=object())

        self.assertEqual(frame.run(main), 0)

    def test_a_missing_configuration_file_is_an_error_naming_it(self):
        missing = os.path.join(self.tmp.name, "nope.toml")
        with self.assertRaises(frame.Error) as e:
            frame.Checkpointer(config=missing)
        self.assertIn("nope.toml", str(e.exception))


PROGRAM = """
    import sys
    import numpy as np
    import frame

    DTYPES = @DTYPES@

    def content(i, dtype):
        rng = np.random.default_rng(1000 + i)
        n = 1000 + 37 * i
        raw = rng.integers(0, 256, size=n * np.dtype(dtype).itemsize, dtype=np.uint8)
        a = raw.view(dtype).copy()
        if np.dtype(dtype) == np.bool_:
            a = (raw % 2).astype(np.bool_)
        return a

    ckpt = frame.Checkpointer()
    arrays = [ckpt.protect(i + 1, np.zeros_like(content(i, d))) for i, d in enumerate(DTYPES)]
    shaped = ckpt.protect(100, np.zeros((3, 5, 7), order="F"))
    if sys.argv[1] == "write":
        assert not ckpt.recovering
        for i, (a, d) in enumerate(zip(arrays, DTYPES)):
            a[...] = content(i, d)
        shaped[...] = np.arange(105).reshape(3, 5, 7)
        print(ckpt.checkpoint(1))
        # no finalize: the process ends as a failed one would
    else:
        assert ckpt.recovering
        print(ckpt.recover())
        for i, (a, d) in enumerate(zip(arrays, DTYPES)):
            want = content(i, d)
            assert a.tobytes() == want.tobytes(), (d, a[:4], want[:4])
        assert (shaped == np.arange(105).reshape(3, 5, 7)).all()
        print("same")
        ckpt.finalize()
""".replace("@DTYPES@", repr([np.dtype(d).str for d in DTYPES]))


class RoundTrip(Storage):
    def test_every_dtype_comes_back_bit_for_bit_in_a_new_process(self):
        self.assertEqual(self.program(PROGRAM, "write").split(), ["1"])
        self.assertEqual(self.program(PROGRAM, "read").split(), ["1", "same"])

    def test_a_region_of_another_size_is_a_mismatch_and_its_stored_size_is_told(self):
        self.program("""
            import numpy as np, frame
            c = frame.Checkpointer()
            c.protect(0, np.arange(10, dtype=np.int32))
            c.protect(1, np.ones(4, np.complex128))
            c.checkpoint()
        """)
        out = self.program("""
            import numpy as np, frame
            c = frame.Checkpointer()
            print(c.stored_region(0), c.stored_region(1), c.stored_region(9))
            print(sorted(c.stored_regions().items()))
            c.protect(0, np.zeros(11, np.int32))
            c.protect(1, np.zeros(4, np.complex128))
            try:
                c.recover()
            except frame.RegionMismatch as e:
                print("mismatch", "region 0" in str(e))
            dtype, n = c.stored_region(0)
            a = c.protect(0, np.zeros(n, dtype))
            print(c.recover(), a.tolist())
            c.finalize()
        """)
        lines = out.splitlines()
        self.assertEqual(lines[0], "('int32', 10) ('float64', 8) None")
        self.assertEqual(lines[1], "[(0, ('int32', 10)), (1, ('float64', 8))]")
        self.assertEqual(lines[2], "mismatch True")
        self.assertEqual(lines[3], "1 [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]")

    def test_files_of_a_file_checkpoint_come_back_by_name(self):
        self.program("""
            import numpy as np, frame
            c = frame.Checkpointer()
            step = c.protect(0, np.array([41], np.int64))
            c.begin_checkpoint(1)
            p = c.checkpoint_file("state.npy")
            assert p.exists() and p.stat().st_size == 0 and (p.stat().st_mode & 0o777) == 0o600
            np.save(p, np.linspace(0, 1, 12345))
            with open(c.checkpoint_file("notes.txt"), "w") as f:
                f.write("hello")
            try:
                c.snapshot()
            except frame.Error as e:
                print("snapshot refused")
            print(c.end_checkpoint())
        """)
        out = self.program("""
            import numpy as np, frame
            c = frame.Checkpointer()
            step = c.protect(0, np.zeros(1, np.int64))
            c.recover()
            print(int(step[0]), sorted(c.recovered_files()))
            a = np.load(c.recovered_file("state.npy"))
            print((a == np.linspace(0, 1, 12345)).all())
            print(open(c.recovered_file("notes.txt")).read())
            try:
                c.recovered_file("other")
            except frame.Error as e:
                print("no such file")
            try:
                c.begin_checkpoint(1); c.checkpoint_file("../x")
            except frame.Error as e:
                print("bad name")
            c.finalize()
        """)
        self.assertEqual(out.split("\n")[:5], [
            "41 ['notes.txt', 'state.npy']", "True", "hello", "no such file", "bad name"])


class OutOfOrder(Storage):
    def test_finalize_twice_and_calls_after_it_are_state_errors(self):
        c = frame.Checkpointer()
        c.finalize()
        for call in (c.finalize, c.snapshot, lambda: c.protect(0, np.zeros(1))):
            with self.assertRaises(frame.StateError):
                call()
        self.assertIn("ended", repr(c))

    def test_a_context_and_its_checkpointer_are_stale_after_the_entry(self):
        kept = {}

        def main(ctx):
            kept["ctx"], kept["comm"] = ctx, ctx.comm
            kept["ckpt"] = frame.Checkpointer(ctx)
            with self.assertRaises(frame.StateError):
                frame.Checkpointer()  # inside run, the context is needed
            self.assertEqual((ctx.rank, ctx.size, ctx.state, ctx.epoch), (0, 1, "new", 1))

        self.assertEqual(frame.run(main), 0)
        for call in (lambda: kept["ctx"].rank, lambda: kept["comm"].barrier(),
                     kept["ckpt"].snapshot, lambda: frame.Checkpointer(kept["ctx"])):
            with self.assertRaises(frame.StateError):
                call()

    def test_an_exception_of_the_function_fails_the_run(self):
        def main(ctx):
            raise KeyError("boom")
        self.assertNotEqual(frame.run(main), 0)
        with self.assertRaises(TypeError):
            frame.run(3)

    def test_the_exceptions_are_frame_errors(self):
        for e in (frame.Interrupted, frame.RegionMismatch, frame.NothingToRecover,
                  frame.NotRecoverable, frame.StateError):
            self.assertTrue(issubclass(e, frame.Error))
        self.assertTrue(issubclass(frame.Error, RuntimeError))


class Communicator(Storage):
    def test_one_rank_reduces_sends_and_broadcasts_in_place(self):
        def main(ctx):
            comm = ctx.comm
            for dtype in (np.float64, np.float32, np.int64, np.int32, np.uint8, np.uint64):
                v = np.arange(5, dtype=dtype)
                self.assertIs(comm.allreduce(v, "max"), v)
                self.assertEqual(list(v), list(range(5)))
            with self.assertRaisesRegex(TypeError, "cannot be reduced"):
                comm.allreduce(np.zeros(2, np.complex128))
            with self.assertRaisesRegex(ValueError, "unknown reduction"):
                comm.allreduce(np.zeros(2), "prod")
            out = np.zeros(3)
            comm.sendrecv(np.array([1.0, 2.0, 3.0]), 0, out, 0, 5)
            self.assertEqual(list(out), [1.0, 2.0, 3.0])
            buf = np.zeros(8)
            with self.assertRaisesRegex(ValueError, "overlap"):
                comm.sendrecv(buf[:5], 0, buf[3:], 0, 5)
            comm.send(np.arange(4, dtype=np.int16), 0, 9)
            with self.assertRaises(frame.Error):
                comm.recv(np.zeros(3, np.int16), 0, 9)  # 8 bytes into 6
            with self.assertRaisesRegex(ValueError, "no rank 3"):
                comm.send(np.zeros(1), 3)
            comm.barrier()
            self.assertEqual(list(comm.bcast(np.array([7, 8]))), [7, 8])

        self.assertEqual(frame.run(main), 0)


class TypeHints(unittest.TestCase):
    def test_the_stub_names_exactly_what_the_module_has(self):
        stub = pathlib.Path(frame.__file__).with_name("_native.pyi")
        tree = ast.parse(stub.read_text())
        named = set()
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                named.add(node.name)
                real = getattr(frame, node.name)
                members = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
                public = {m for m in dir(real) if not m.startswith("_")}
                if not issubclass(real, BaseException):
                    self.assertEqual(members - {"__init__"}, public, node.name)
            elif isinstance(node, ast.FunctionDef):
                named.add(node.name)
            elif isinstance(node, ast.AnnAssign):
                named.add(node.target.id)
        self.assertEqual(named, set(frame.__all__))


if __name__ == "__main__":
    unittest.main()
