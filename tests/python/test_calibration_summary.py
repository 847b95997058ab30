"""scripts/calibration_summary.py: the text summary scripts/gpu_session.sh prints of a calibration,
on the shipped H100 calibration with clock records added (docs/calibrate.md "SM clocks").

Run: python3 -m unittest tests/python/test_calibration_summary.py
"""

import contextlib
import io
import json
import lzma
import os
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import calibration_summary  # noqa: E402

SOURCE = os.path.join(ROOT, "calibration_data", "sources", "h100-sxm",
                      "calibration-2026-11-23.json.xz")


def clocks(mhz, limited):
    return {"samples": 4, "sm_mhz_median": mhz, "sm_mhz_min": mhz - 50, "sm_mhz_max": mhz + 20,
            "reasons": ["sw_power_cap"] if limited else [], "power_thermal_samples": limited,
            "read_us_median": 30.0}


class CalibrationSummaryTest(unittest.TestCase):
    def summary(self, cal):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "calibration.json")
            with open(path, "w") as f:
                json.dump(cal, f)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                self.assertEqual(calibration_summary.main(path), 0)
            return out.getvalue().splitlines()

    def test_clocks_of_gemms_kernels_and_layer_passes(self):
        with lzma.open(SOURCE, "rt") as f:
            cal = json.load(f)
        lines = self.summary(cal)
        self.assertIn("counts: gemm 4218, kernels 295, layers 32, collectives 252, p2p 7, "
                      "host_device 28, failures 0", lines)
        self.assertFalse([l for l in lines if l.startswith("clocks of")])  # none recorded then

        for g, mhz in zip(cal["gemm"][:3], (1980, 1755, 1620)):
            g["method"]["clocks"] = clocks(mhz, 0 if mhz == 1980 else 2)
        layer = cal["layers"][0]
        layer["method"]["forward"]["clocks"] = clocks(1650, 3)
        layer["method"]["backward_weight"]["clocks"] = clocks(1980, 0)
        lines = self.summary(cal)
        self.assertIn("clocks of 3 GEMMs: SM median 1755 MHz (lowest median 1620), "
                      "2 under a power or thermal limit", lines)
        row = [l for l in lines if l.startswith("layer gpt   b1 s1024 h1024 tp1:")]
        self.assertEqual(len(row), 1)
        self.assertTrue(row[0].endswith("MHz 1650*/-/1980"), row[0])


if __name__ == "__main__":
    unittest.main()
