"""Tests of the harness's use of hetplan's fused RMSNorm, SwiGLU and rotary kernels
(scripts/reference/fused.py, kernels/c_api/hetplan_kernels_c.h).

Without a GPU: the C interface's version, its errors (a bad dtype, a launch without a driver)
and which implementation the harness picks. With a GPU and torch: the fused kernels against the
harness's eager operators, forward and backward, in bf16 and fp32 (rotary reading Q and K in
place from a QKV output).

Run: python3 -m unittest tests/python/test_fused_kernels.py
"""

import ctypes
import os
import sys

sys.dont_write_bytecode = True  # keep the source tree clean
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

try:
    import torch
except ImportError:
    torch = None


def library_path():
    """The built library ($HETPLAN_KERNELS_LIB, else the build folders fused.py searches)."""
    env = os.environ.get("HETPLAN_KERNELS_LIB")
    if env and env.lower() != "off":
        return env
    for d in (os.environ.get("HETPLAN_BUILD_DIR"), "build", "build-h100"):
        if d:
            p = os.path.join(ROOT, d, "kernels", "libhetplan_kernels_c.so")
            if os.path.isfile(p):
                return p
    return None


def gpu_visible():
    return os.path.exists("/dev/nvidia0") or os.path.exists("/dev/nvidiactl")


@unittest.skipIf(library_path() is None, "libhetplan_kernels_c.so not built (no CUDA toolkit)")
class CInterface(unittest.TestCase):
    def setUp(self):
        self.lib = ctypes.CDLL(library_path())
        self.lib.hk_last_error.restype = ctypes.c_char_p

    def test_version_is_the_one_the_harness_expects(self):
        from_harness = os.path.join(ROOT, "scripts", "reference", "fused.py")
        with open(from_harness) as f:
            expected = int(next(l for l in f if l.startswith("ABI_VERSION")).split("=")[1])
        self.assertEqual(self.lib.hk_abi_version(), expected)

    def test_an_unknown_dtype_is_refused_with_a_message(self):
        rc = self.lib.hk_swiglu_forward(7, None, None, ctypes.c_int64(4), 8, None)
        self.assertEqual(rc, 1)
        msg = self.lib.hk_last_error().decode()
        self.assertIn("hk_swiglu_forward", msg)
        self.assertIn("dtype 7", msg)

    def test_nothing_to_do_succeeds_and_clears_the_error(self):
        self.lib.hk_swiglu_forward(7, None, None, ctypes.c_int64(4), 8, None)
        rc = self.lib.hk_swiglu_forward(1, None, None, ctypes.c_int64(0), 8, None)
        self.assertEqual(rc, 0, self.lib.hk_last_error())
        self.assertEqual(self.lib.hk_last_error(), b"")

    @unittest.skipIf(gpu_visible(), "a GPU is visible: the launch would run")
    def test_a_launch_without_a_gpu_fails_cleanly(self):
        buf = (ctypes.c_float * 64)()
        rc = self.lib.hk_rmsnorm_forward(0, buf, buf, buf, buf, ctypes.c_int64(2), 8,
                                         ctypes.c_float(1e-5), None)
        self.assertEqual(rc, 1)
        msg = self.lib.hk_last_error().decode()
        self.assertIn("hk_rmsnorm_forward", msg)
        self.assertIn("cuda", msg.lower())


class KeepsTheLibraryChoice(unittest.TestCase):
    """Restores $HETPLAN_KERNELS_LIB and fused.py's loaded library after each test."""

    def setUp(self):
        from reference import fused, model
        self.fused, self.model = fused, model
        self.saved = os.environ.get("HETPLAN_KERNELS_LIB")
        fused.reset()
        torch.manual_seed(0)

    def tearDown(self):
        if self.saved is None:
            os.environ.pop("HETPLAN_KERNELS_LIB", None)
        else:
            os.environ["HETPLAN_KERNELS_LIB"] = self.saved
        self.fused.reset()


@unittest.skipIf(torch is None, "torch is not installed")
class Selection(KeepsTheLibraryChoice):

    def test_cpu_tensors_run_the_eager_operators(self):
        self.assertFalse(self.fused.active(torch.ones(2, 8)))
        self.assertIn("eager", self.fused.implementation("cpu"))

    def test_off_turns_the_kernels_off(self):
        os.environ["HETPLAN_KERNELS_LIB"] = "off"
        self.assertIsNone(self.fused.library())
        self.assertIn("off", self.fused.why())

    def test_a_named_library_that_is_missing_is_an_error(self):
        os.environ["HETPLAN_KERNELS_LIB"] = "/nonexistent/libhetplan_kernels_c.so"
        for _ in range(2):  # every call: never a silent fall-back to the eager operators
            with self.assertRaises(FileNotFoundError) as e:
                self.fused.library()
            self.assertIn("/nonexistent/libhetplan_kernels_c.so", str(e.exception))

    @unittest.skipIf(library_path() is None, "libhetplan_kernels_c.so not built")
    def test_the_built_library_loads(self):
        os.environ["HETPLAN_KERNELS_LIB"] = library_path()
        self.assertIsNotNone(self.fused.library())


def cuda_ready():
    return torch is not None and torch.cuda.is_available() and library_path() is not None


@unittest.skipUnless(cuda_ready(), "needs a GPU, torch with CUDA and libhetplan_kernels_c.so")
class FusedAgainstEager(KeepsTheLibraryChoice):
    """On a GPU: the harness's RMSNorm, SwiGLU and rotary with the fused kernels against its own
    eager operators (HETPLAN_KERNELS_LIB=off), forward and both gradients."""

    def run_both(self, fn, inputs, dy):
        out = {}
        for mode in ("off", library_path()):
            os.environ["HETPLAN_KERNELS_LIB"] = mode
            self.fused.reset()
            xs = [t.detach().clone().requires_grad_() for t in inputs]
            y = fn(*xs)
            grads = torch.autograd.grad(y, xs, dy)
            out[mode == "off"] = (y.float(), [g.float() for g in grads])
            self.assertEqual(self.fused.active(xs[0]), mode != "off")
        return out[True], out[False]

    def test_rmsnorm(self):
        for dtype, tol in ((torch.bfloat16, 2e-2), (torch.float32, 1e-5)):
            x = torch.randn(3, 100, 1024, device="cuda", dtype=dtype)
            w = (1 + 0.1 * torch.randn(1024, device="cuda")).to(dtype)
            dy = torch.randn_like(x)
            (ye, ge), (yf, gf) = self.run_both(
                lambda a, b: self.model.RMSNormFunction.apply(a, b, 1e-5), [x, w], dy)
            torch.testing.assert_close(yf, ye, rtol=tol, atol=tol)
            torch.testing.assert_close(gf[0], ge[0], rtol=tol, atol=tol)
            # The weight gradient sums 300 rows: relative to its scale.
            torch.testing.assert_close(gf[1], ge[1], rtol=tol, atol=tol * ge[1].abs().max().item())

    def test_swiglu(self):
        for dtype, tol in ((torch.bfloat16, 2e-2), (torch.float32, 1e-5)):
            x = torch.randn(2, 64, 2 * 704, device="cuda", dtype=dtype)
            dy = torch.randn(2, 64, 704, device="cuda", dtype=dtype)
            (ye, ge), (yf, gf) = self.run_both(self.model.SwiGLUFunction.apply, [x], dy)
            torch.testing.assert_close(yf, ye, rtol=tol, atol=tol)
            torch.testing.assert_close(gf[0], ge[0], rtol=tol, atol=tol)

    def test_rotary_reads_q_and_k_in_place(self):
        from reference.model import RopeTables, RotaryFunction
        for dtype, tol in ((torch.bfloat16, 2e-2), (torch.float32, 1e-5)):
            heads, kv, d, s = 4, 2, 64, 96
            qkv = torch.randn(2, s, heads + 2 * kv, d, device="cuda", dtype=dtype)
            tables = RopeTables(s, d, qkv.device, dtype)
            dq = torch.randn(2, s, heads, d, device="cuda", dtype=dtype)
            dk = torch.randn(2, s, kv, d, device="cuda", dtype=dtype)

            def fn(x):
                q, k, _ = x.split([heads, kv, kv], dim=2)  # strided views, as the harness has
                return torch.cat([t.flatten() for t in RotaryFunction.apply(q, k, tables)])

            (ye, ge), (yf, gf) = self.run_both(fn, [qkv], torch.cat([dq.flatten(), dk.flatten()]))
            torch.testing.assert_close(yf, ye, rtol=tol, atol=tol)
            torch.testing.assert_close(gf[0], ge[0], rtol=tol, atol=tol)


if __name__ == "__main__":
    unittest.main()
