"""scripts/fit_host_cost.py without a GPU: which runs are host-bound, the fit (median of step /
kernels over them), the residuals of max(device, host), and its refusals.

Run: python3 -m unittest tests/python/test_fit_host_cost.py
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "fit_host_cost.py")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import fit_host_cost as fhc  # noqa: E402


def write_sweep(folder, runs):
    """runs: (kernels, device_s, host_wait_s, measured step_s or "oom")."""
    os.makedirs(os.path.join(folder, "predictions"), exist_ok=True)
    measurements = []
    for i, (kernels, device_s, wait_s, step) in enumerate(runs):
        with open(os.path.join(folder, "predictions", f"{i:02d}.json"), "w") as f:
            json.dump({"predicted": {"iteration_s": device_s + wait_s,
                                     "kernels_per_iteration": kernels,
                                     "breakdown": {"host_wait": wait_s}}}, f)
        s = {"micro_batch": 1, "global_batch": 2, "recompute": "none"}
        measurements.append({"model": "m", "strategy": s, "oom": True} if step == "oom" else
                            {"model": "m", "strategy": s, "oom": False,
                             "iteration_s": {"median_s": step}})
    path = os.path.join(folder, "measurements.json")
    with open(path, "w") as f:
        json.dump({"measurements": measurements}, f)
    return os.path.join(folder, "predictions"), path


class Fit(unittest.TestCase):
    def test_the_median_of_the_host_bound_runs(self):
        with tempfile.TemporaryDirectory() as tmp:
            # Host-bound: 2000 kernels, device 10 ms, step 60 ms -> 30 us; 1000 kernels, device
            # 20 ms (a modelled host wait of 5 ms is not device time), step 40 ms -> 40 us;
            # 3000 kernels, step 75 ms -> 25 us. Device-bound: 100 of 120 ms (83%), left out.
            # Out of memory: no step.
            d, m = write_sweep(tmp, [(2000, 0.010, 0.0, 0.060), (1000, 0.020, 0.005, 0.040),
                                     (3000, 0.010, 0.0, 0.075), (2000, 0.100, 0.0, 0.120),
                                     (2000, 0.1, 0.0, "oom")])
            runs = fhc.runs_of(d, m)
            self.assertEqual(len(runs), 4)
            self.assertAlmostEqual(runs[1]["device_s"], 0.020)
            self.assertEqual([fhc.host_bound(r) for r in runs], [True, True, True, False])
            s, samples = fhc.fit(runs)
            self.assertEqual(sorted(round(x * 1e6, 6) for x in samples), [25, 30, 40])
            # The three host-bound runs' log errors log(h / s_i) are least at the geometric mean
            # of their s_i, (25 x 30 x 40)^(1/3) = 31.07 us; the device-bound run's error stays
            # log(100 / 120) until h x 2000 passes 100 ms (50 us), and the oom run has none.
            self.assertAlmostEqual(s * 1e6, 30000 ** (1 / 3), delta=0.05)
            rows = fhc.residuals(runs, 30e-6)
            # max(10 ms, 2000 x 30 us = 60 ms) = 60 ms: exact; 1000 x 30 us = 30 of 40 ms: -25%;
            # 90 of 75 ms: +20%; the device-bound run keeps its device time: 100 of 120: -16.7%.
            self.assertAlmostEqual(rows[0]["error"], 0.0)
            self.assertAlmostEqual(rows[1]["error"], -0.25)
            self.assertAlmostEqual(rows[2]["error"], 0.2)
            self.assertAlmostEqual(rows[3]["error"], 100 / 120 - 1)

    def test_the_command_pools_sweeps_and_refuses_what_gives_no_fit(self):
        with tempfile.TemporaryDirectory() as tmp:
            a = write_sweep(os.path.join(tmp, "a"), [(2000, 0.010, 0.0, 0.060)])
            b = write_sweep(os.path.join(tmp, "b"), [(2000, 0.010, 0.0, 0.080),
                                                     (2000, 0.010, 0.0, 0.100)])
            out = os.path.join(tmp, "fit.json")
            r = subprocess.run([sys.executable, SCRIPT, "--sweep", *a, "--sweep", *b, "--json",
                                out], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            # 30, 40 and 50 us: their geometric mean is 60000^(1/3) = 39.15 us; sweep a alone 30.
            self.assertIn("least squares of log errors over 3 runs", r.stdout)
            self.assertIn("30.00, 40.00, 50.00 us", r.stdout)
            with open(out) as f:
                doc = json.load(f)
            self.assertAlmostEqual(doc["s_per_kernel"] * 1e6, 60000 ** (1 / 3), delta=0.05)
            self.assertAlmostEqual(doc["per_sweep"][a[1]] * 1e6, 30.0, delta=0.05)
            busy = write_sweep(os.path.join(tmp, "c"), [(2000, 0.100, 0.0, 0.110)])
            r = subprocess.run([sys.executable, SCRIPT, "--sweep", *busy], capture_output=True,
                               text=True)
            self.assertEqual(r.returncode, 2)
            self.assertIn("no run is host-bound", r.stderr)
            os.remove(os.path.join(tmp, "c", "predictions", "00.json"))
            r = subprocess.run([sys.executable, SCRIPT, "--sweep", *busy], capture_output=True,
                               text=True)
            self.assertEqual(r.returncode, 2)
            self.assertIn("00.json: missing", r.stderr)


if __name__ == "__main__":
    unittest.main()
