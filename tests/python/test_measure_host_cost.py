"""scripts/measure_host_cost.py without a GPU: the host record's arithmetic and refusals, and the
offline form end to end (an earlier measurement and `hetplan predict --json` of the same step ->
a calibration file that `hetplan fit` takes in and prints).

Run: HETPLAN_BINARY=build/cli/hetplan python3 -m unittest tests/python/test_measure_host_cost.py
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
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import measure_host_cost as mhc  # noqa: E402

STEP = {"count": 5, "median_s": 0.060, "min_s": 0.058, "max_s": 0.070, "p10_s": 0.058,
        "p90_s": 0.066, "mean_s": 0.061, "stddev_s": 0.002}


def prediction(kernels, iteration_s, host_wait=0.0):
    return {"predicted": {"iteration_s": iteration_s, "kernels_per_iteration": kernels,
                          "breakdown": {"compute": iteration_s - host_wait,
                                        "host_wait": host_wait}}}


class HostRecord(unittest.TestCase):
    def test_the_step_over_the_kernels_is_the_cost_per_kernel(self):
        r = mhc.host_record({"iteration_s": STEP}, prediction(2000, 0.020), "cfg")
        self.assertEqual(r["kernels"], 2000)
        self.assertAlmostEqual(r["s_per_kernel"], 30e-6)
        self.assertAlmostEqual(r["device_s"], 0.020)
        self.assertEqual(r["step"], STEP)
        self.assertNotIn("upper bound", mhc.host_bound_note(r))  # 33% of the step

    def test_a_modelled_host_wait_is_not_device_time(self):
        r = mhc.host_record({"iteration_s": STEP}, prediction(2000, 0.060, host_wait=0.045), "cfg")
        self.assertAlmostEqual(r["device_s"], 0.015)

    def test_a_step_near_the_device_time_is_flagged_as_an_upper_bound(self):
        r = mhc.host_record({"iteration_s": STEP}, prediction(2000, 0.050), "cfg")
        self.assertIn("upper bound", mhc.host_bound_note(r))  # 83% of the step

    def test_refuses_what_gives_no_record(self):
        with self.assertRaisesRegex(ValueError, "out of memory"):
            mhc.host_record({"oom": True}, prediction(2000, 0.02), "cfg")
        with self.assertRaisesRegex(ValueError, "kernels_per_iteration"):
            mhc.host_record({"iteration_s": STEP}, {"predicted": {"iteration_s": 0.02}}, "cfg")
        with self.assertRaisesRegex(ValueError, "median_s"):
            mhc.host_record({"iteration_s": {"count": 1}}, prediction(2000, 0.02), "cfg")


@unittest.skipUnless(os.access(HETPLAN, os.X_OK), f"no hetplan binary at {HETPLAN}")
class FromAnEarlierMeasurement(unittest.TestCase):
    def test_writes_a_calibration_file_that_fit_takes_in(self):
        with tempfile.TemporaryDirectory() as tmp:
            strategy = os.path.join(tmp, "s.json")
            with open(strategy, "w") as f:
                json.dump(mhc.strategy(1, 2), f)
            pred = os.path.join(tmp, "p.json")
            subprocess.run([HETPLAN, "predict", "--model", "gpt2-medium", "--seq-len", "1024",
                            "--cluster", mhc.DEFAULT_CLUSTER, "--strategy", strategy, "--json", pred],
                           check=True, stdout=subprocess.DEVNULL)
            with open(pred) as f:
                kernels = json.load(f)["predicted"]["kernels_per_iteration"]
            meas = os.path.join(tmp, "m.json")
            with open(meas, "w") as f:
                json.dump({"measurements": [{"model": "gpt2-medium",
                                             "strategy": mhc.strategy(1, 2),
                                             "iteration_s": STEP}]}, f)
            cal = os.path.join(tmp, "host.json")
            out = subprocess.run([sys.executable, os.path.join(ROOT, "scripts",
                                                               "measure_host_cost.py"),
                                  "--out", cal, "--from-measurements", meas, "--index", "0",
                                  "--prediction", pred], check=True, capture_output=True,
                                 text=True).stdout
            self.assertIn(f"/ {int(kernels)} kernels", out)
            with open(cal) as f:
                doc = json.load(f)
            self.assertEqual(doc["context"]["gpu_type"], "h100-sxm")
            self.assertAlmostEqual(doc["host"][0]["s_per_kernel"], 0.060 / kernels)
            fit = subprocess.run([HETPLAN, "fit", cal, "--out", os.path.join(tmp, "prof.json")],
                                 check=True, capture_output=True, text=True).stdout
            self.assertIn(f"host per kernel (eager step): {0.060 / kernels * 1e6:.2f} us", fit)
            with open(os.path.join(tmp, "prof.json")) as f:
                prof = json.load(f)
            self.assertAlmostEqual(prof["gpus"]["h100-sxm"]["host_s_per_kernel"],
                                   0.060 / kernels)

    def test_an_index_past_the_file_is_exit_2(self):
        with tempfile.TemporaryDirectory() as tmp:
            meas = os.path.join(tmp, "m.json")
            with open(meas, "w") as f:
                json.dump({"measurements": []}, f)
            pred = os.path.join(tmp, "p.json")
            with open(pred, "w") as f:
                json.dump(prediction(2000, 0.02), f)
            r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts",
                                                             "measure_host_cost.py"),
                                "--out", os.path.join(tmp, "c.json"), "--from-measurements",
                                meas, "--index", "3", "--prediction", pred],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 2)
            self.assertIn("no measurements[3]", r.stderr)


if __name__ == "__main__":
    unittest.main()
