"""The sweep driver (scripts/measure_sweep.py) end to end without a GPU: the harness is replaced
by a stand-in that "measures" each configuration as 5% slower and 5% smaller than predicted, so
the comparison must report exactly those errors, and out of memory where hetplan predicts it.

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


class Sweep(unittest.TestCase):
    def test_quick_sweep_reports_the_known_errors(self):
        d = tempfile.mkdtemp(prefix="hetplan_sweep_")
        fake = os.path.join(d, "fake_python")
        with open(os.path.join(d, "stand_in.py"), "w") as f:
            f.write(STAND_IN)
        with open(fake, "w") as f:
            f.write(f"#!/bin/sh\nexec {sys.executable} {d}/stand_in.py \"$@\"\n")
        os.chmod(fake, 0o755)
        out = os.path.join(d, "out")
        r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "measure_sweep.py"),
                            "--out", out, "--hetplan", HETPLAN, "--python", fake, "--quick"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr + r.stdout)
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
        self.assertIn("iteration time: median |error| 4.8%", r.stdout)


if __name__ == "__main__":
    unittest.main()
