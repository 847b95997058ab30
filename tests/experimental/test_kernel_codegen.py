"""The machine code of the default Hopper attention kernels keeps what docs/kernels.md ("What the
machine code showed") found it needs: no spills and no ptxas warning (with nvcc); and, where an
nvdisasm is at hand (scripts/sass.sh's cache or $HETPLAN_NVDISASM), no exponential behind a
branch of its own in the backward and no exp2f range test in the forward, as the SASS of
2026-11-23 had (75 branches and 68 range tests per tile then). No GPU needed.

Run: python3 -m unittest tests/experimental/test_kernel_codegen.py
"""

import itertools
import os
import re
import subprocess
import sys
import unittest

sys.dont_write_bytecode = True
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import sass_loops  # noqa: E402

NVCC = os.environ.get("NVCC", "/usr/local/cuda/bin/nvcc")
SOURCE = "kernels/experimental/sm90a/attention_hopper.cu"
CACHED_NVDISASM = os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")),
                               "hetplan", "nvdisasm-11.8", "usr", "bin", "nvdisasm")
DEFAULT_KERNELS = ("attention_backward_hopper_kernel<", "attention_forward_hopper_kernel<")


def nvdisasm_at_hand():
    return bool(os.environ.get("HETPLAN_NVDISASM")) or os.access(CACHED_NVDISASM, os.X_OK) or \
        os.access("/usr/local/cuda/bin/nvdisasm", os.X_OK)


def main_loop(functions, names, kernel):
    """The largest loop of the kernel whose demangled name starts with `kernel`."""
    for (mangled, instrs, labels), name in zip(functions, names):
        if kernel in name:
            spans = sass_loops.loops(instrs, labels)
            first, last = max(spans, key=lambda s: s[1] - s[0])
            return instrs, labels, first, last
    raise AssertionError(f"no kernel {kernel} in the SASS of {SOURCE}")


@unittest.skipUnless(os.access(NVCC, os.X_OK), f"no nvcc at {NVCC}")
class HopperAttentionResources(unittest.TestCase):
    def test_default_kernels_do_not_spill_and_ptxas_warns_of_nothing(self):
        out = subprocess.run(["bash", "scripts/kernel_resources.sh", SOURCE, "90a"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout
        rows = [line for line in out.splitlines() if line.startswith("void ")]
        defaults = [r for r in rows if r.split()[1].startswith(DEFAULT_KERNELS)]
        # bf16 and fp16; backward d = 128 (two dQ forms) and d = 64, and both with one warpgroup
        # per block (opt-in, HETPLAN_ATTENTION_BWD=wg1); forward d = 128 and d = 64.
        self.assertEqual(len(defaults), 14, out)
        for r in defaults:
            self.assertIn(" 0 B spilled", r, r)
        self.assertNotIn("warnings:", out)


@unittest.skipUnless(os.access(NVCC, os.X_OK) and nvdisasm_at_hand(),
                     "needs nvcc and an nvdisasm (bash scripts/sass.sh fetches one)")
class HopperAttentionSass(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        text = subprocess.run(["bash", "scripts/sass.sh", SOURCE], cwd=ROOT, capture_output=True,
                              text=True, check=True).stdout
        cls.functions = sass_loops.parse(text)
        cls.names = sass_loops.demangle([f[0] for f in cls.functions])

    def test_no_exponential_sits_behind_a_branch_of_its_own(self):
        for t, d, wg in itertools.product(("bf16", "fp16"), (128, 64), (2, 1)):
            kernel = f"attention_backward_hopper_kernel<hetplan::kernels::{t}, {d}, false, {wg}>"
            instrs, labels, first, last = main_loop(self.functions, self.names, kernel)
            inside = {lab: i for lab, i in labels.items() if first <= i <= last}
            small = 0  # MUFUs under a forward branch that skips fewer than 24 instructions
            for i in range(first, last + 1):
                m = sass_loops._BRANCH.search(instrs[i][1])
                target = inside.get(m.group(1)) if m else None
                if target is not None and i < target < i + 24:
                    small += sum(sass_loops.opcode(x) == "MUFU" for _, x in instrs[i:target])
            self.assertEqual(small, 0, kernel)
            s = sass_loops.summarise(instrs, first, last, labels)
            self.assertLessEqual(s["branches"], 16, kernel)  # 75 with a branch per exponential
            self.assertEqual((s["spill_loads"], s["spill_stores"]), (0, 0), kernel)

    def test_the_forward_takes_one_mufu_per_exponential(self):
        for t in ("bf16", "fp16"):
            for d in (128, 64):
                kernel = f"attention_forward_hopper_kernel<hetplan::kernels::{t}, {d}>"
                instrs, labels, first, last = main_loop(self.functions, self.names, kernel)
                ops = [sass_loops.opcode(x) for _, x in instrs[first:last + 1]]
                self.assertGreaterEqual(ops.count("MUFU"), 64, kernel)  # 64 exponentials a tile
                # exp2f's range test: an FSETP.GEU per exponential (68 per tile before).
                geu = sum(1 for _, x in instrs[first:last + 1] if re.search(r"FSETP\.GEU", x))
                self.assertLess(geu, 8, kernel)


if __name__ == "__main__":
    unittest.main()
