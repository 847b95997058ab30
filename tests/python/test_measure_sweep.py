"""The sweep driver (scripts/measure_sweep.py) end to end without a GPU: the harness is replaced
by a stand-in that "measures" each configuration as 5% slower and 5% smaller than predicted, so
the comparison must report exactly those errors, and out of memory where hetplan predicts it.
--measurements compares that measurements file again with new predictions, running no harness.

Run: HETPLAN_BINARY=build/cli/hetplan python3 -m unittest tests/python/test_measure_sweep.py
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HETPLAN = os.environ.get("HETPLAN_BINARY", os.path.join(ROOT, "build", "cli", "hetplan"))

STAND_IN = r'''
import json, os, sys
args = sys.argv[2:]  # after the harness path
plan, out = args[args.index("--plan") + 1], args[args.index("--out") + 1]
base = os.path.dirname(plan)
ms = []
for i, c in enumerate(json.load(open(plan))["configs"]):
    p = json.load(open(os.path.join(base, "predictions", "%02d.json" % i)))["predicted"]
    s = json.load(open(os.path.join(base, c["strategy"])))
    m = {"model": c["model"], "strategy": s, "source": "measured:pytorch", "notes": ""}
    if not p["feasible"]:
        m["oom"] = True
    else:
        mem = p["stages"][0]["memory"]
        m.update({"oom": False, "iteration_s": {"count": 3, "median_s": p["iteration_s"] * 1.05},
                  "peak_memory_bytes": [(mem["total_bytes"] - mem["reserve_bytes"]) / 1.05]})
    ms.append(m)
json.dump({"format": "hetplan-measurements", "schema_version": 1, "context": {},
           "measurements": ms}, open(out, "w"))
'''


def sweep(*args):
    return subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "measure_sweep.py"),
                           "--hetplan", HETPLAN, *args], capture_output=True, text=True)


class Sweep(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="hetplan_sweep_")
        d = cls.dir
        fake = os.path.join(d, "fake_python")
        with open(os.path.join(d, "stand_in.py"), "w") as f:
            f.write(STAND_IN)
        with open(fake, "w") as f:
            f.write(f"#!/bin/sh\nexec {sys.executable} {d}/stand_in.py \"$@\"\n")
        os.chmod(fake, 0o755)
        # A harness that must not run: --measurements compares without measuring.
        cls.no_harness = os.path.join(d, "no_harness")
        with open(cls.no_harness, "w") as f:
            f.write("#!/bin/sh\necho the harness ran >&2\nexit 3\n")
        os.chmod(cls.no_harness, 0o755)
        cls.out = os.path.join(d, "out")
        cls.first = sweep("--out", cls.out, "--python", fake, "--quick")

    def check_known_errors(self, out):
        with open(os.path.join(out, "comparison.json")) as f:
            result = json.load(f)["predictions"]
        stats = result["summary"]
        # predicted / measured - 1 = 1 / 1.05 - 1 for time, 1.05 - 1 for memory.
        self.assertAlmostEqual(stats["iteration_time"]["median_abs_error"], 1 - 1 / 1.05, 6)
        self.assertAlmostEqual(stats["peak_memory_allocated"]["median_abs_error"], 0.05, 6)
        # gpt3-2.7b at micro-batch 16 does not fit an 80 GB H100: predicted, and "observed".
        ooms = [row for row in result["rows"] if row["measured_oom"]]
        self.assertEqual(len(ooms), 1)
        self.assertFalse(ooms[0]["predicted"]["feasible"])
        self.assertEqual(stats["oom_agreement"], "9/9")

    def test_quick_sweep_reports_the_known_errors(self):
        r = self.first
        self.assertEqual(r.returncode, 0, r.stderr + r.stdout)
        self.check_known_errors(self.out)
        self.assertIn("iteration time: median |error| 4.8%", r.stdout)

    def test_measurements_of_an_earlier_sweep_are_compared_with_new_predictions(self):
        self.assertEqual(self.first.returncode, 0, self.first.stderr + self.first.stdout)
        measured = os.path.join(self.out, "measurements.json")
        again = os.path.join(self.dir, "again")
        r = sweep("--out", again, "--python", self.no_harness, "--quick", "--measurements",
                  measured)
        self.assertEqual(r.returncode, 0, r.stderr + r.stdout)
        self.assertNotIn("the harness ran", r.stderr)
        self.check_known_errors(again)
        self.assertIn("iteration time: median |error| 4.8%", r.stdout)
        with open(measured) as f, open(os.path.join(again, "measurements.json")) as g:
            self.assertEqual(json.load(f), json.load(g))

    def test_one_microbatch_runs_each_configuration_as_one_micro_batch_a_step(self):
        out = os.path.join(self.dir, "one")
        fake = os.path.join(self.dir, "fake_python")
        r = sweep("--out", out, "--python", fake, "--quick", "--one-microbatch",
                  "--framework", "pytorch", "--style", "pytorch")
        self.assertEqual(r.returncode, 0, r.stderr + r.stdout)
        strategies = sorted(os.listdir(os.path.join(out, "strategies")))
        self.assertEqual(len(strategies), 9)
        for name in strategies:
            with open(os.path.join(out, "strategies", name)) as f:
                s = json.load(f)
            self.assertEqual(s["global_batch"], s["micro_batch"], name)
        # Plain PyTorch frees its gradients after the step: one micro-batch peaks without them.
        with open(os.path.join(out, "predictions", "00.json")) as f:
            mem = json.load(f)["predicted"]["stages"][0]["memory"]
        self.assertEqual(mem["gradients_bytes"], 0)

    def test_measurements_of_other_configurations_are_bad_input(self):
        self.assertEqual(self.first.returncode, 0, self.first.stderr + self.first.stdout)
        measured = os.path.join(self.out, "measurements.json")
        # The quick sweep's 9 measurements against the full sweep's 20 configurations.
        r = sweep("--out", os.path.join(self.dir, "full"), "--python", self.no_harness,
                  "--measurements", measured)
        self.assertEqual(r.returncode, 2, r.stderr + r.stdout)
        self.assertIn(f"{measured}: 9 measurements where the sweep has 20 configurations",
                      r.stderr)
        # The same count, one configuration changed: its index and both sides are named.
        with open(measured) as f:
            doc = json.load(f)
        doc["measurements"][2]["strategy"]["micro_batch"] = 3
        swapped = os.path.join(self.dir, "swapped.json")
        with open(swapped, "w") as f:
            json.dump(doc, f)
        r = sweep("--out", os.path.join(self.dir, "swapped"), "--python", self.no_harness,
                  "--quick", "--measurements", swapped)
        self.assertEqual(r.returncode, 2, r.stderr + r.stdout)
        self.assertIn(f"{swapped}: measurements[2] is model, micro_batch, global_batch, "
                      "recompute ('gpt2-medium', 3, 16, 'full'), where the sweep's "
                      "configuration 2 is ('gpt2-medium', 8, 16, 'full')", r.stderr)


if __name__ == "__main__":
    unittest.main()
