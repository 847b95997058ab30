"""scripts/sailor_opt350.py: Sailor's measured OPT-350M layers against hetplan's priors, and
Sailor's plan against hetplan's search (examples/external/sailor/README.md).

Run: HETPLAN_BINARY=build/cli/hetplan python3 -m unittest tests/python/test_sailor_opt350.py
"""

import json
import os
import struct
import subprocess
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import sailor_opt350 as sailor  # noqa: E402

HETPLAN = os.environ.get("HETPLAN_BINARY", os.path.join(ROOT, "build", "cli", "hetplan"))
SCRIPT = os.path.join(ROOT, "scripts", "sailor_opt350.py")


def npy_values(path):
    """A float64 vector from a version-1 .npy file (the format Sailor's profiles are in)."""
    with open(path, "rb") as f:
        b = f.read()
    header = struct.unpack("<H", b[8:10])[0]
    data = b[10 + header:]
    return struct.unpack(f"<{len(data) // 8}d", data)


def timing(what, measured, predicted, comm, unused=""):
    t = {"source": "imported", "what": what, "measured_s": [measured, 0, 0],
         "predicted_s": [predicted, 0, 0], "tp_comm_s": [comm, comm, 0]}
    if unused:
        t["unused"] = unused
    return t


class Rows(unittest.TestCase):
    def test_rows_are_medians_per_gpu_layer_and_width_without_the_unused(self):
        v100 = [timing(f"OPT-350 layer {i} (transformer; entries {i}), tp 2", m, 6.0e-3, 1.0e-3)
                for i, m in ((1, 4.0e-3), (2, 4.2e-3), (3, 4.4e-3))]
        v100.append(timing("OPT-350 layer 0 (embedding; entries 0), tp 2", 0.9e-3, 0.6e-3, 0.5e-3))
        v100.append(timing("OPT-350 layer 1 (transformer; entries 1), tp 8", 2.0e-3, 0, 0,
                           unused="tp 8 is wider than a n1-v100x4 node (4 GPUs)"))
        quality = {"gpus": {g: {"layers": []} for g in sailor.GPUS.values()}}
        quality["gpus"]["v100"]["layers"] = v100
        rows = sailor.layer_rows(quality)
        self.assertEqual([(r["layer"], r["tp"], r["entries"]) for r in rows],
                         [("embedding", 2, 1), ("block", 2, 3)])
        self.assertAlmostEqual(rows[1]["measured_s"], 4.2e-3)
        self.assertAlmostEqual(rows[1]["tp_comm_s"], 1.0e-3)


@unittest.skipUnless(os.path.exists(HETPLAN), "needs the hetplan binary (HETPLAN_BINARY)")
class EndToEnd(unittest.TestCase):
    def test_the_v100_block_is_sailors_median_and_every_plan_is_predicted(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "out.json")
            r = subprocess.run([sys.executable, SCRIPT, "--out-dir", d, "--json", out],
                               capture_output=True, text=True,
                               env=dict(os.environ, HETPLAN_BINARY=HETPLAN))
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            with open(out) as f:
                j = json.load(f)
        row = next(x for x in j["layers"] if (x["gpu"], x["layer"], x["tp"]) == ("v100", "block", 1))
        blocks = sorted(npy_values(os.path.join(sailor.DATA, "V100-16", "profile_1.npy"))[1:25])
        self.assertAlmostEqual(row["measured_s"], (blocks[11] + blocks[12]) / 2)
        self.assertEqual(row["entries"], 24)
        self.assertEqual(row["tp_comm_s"], 0)
        self.assertGreater(row["predicted_s"], 0)
        # Every GPU type's tp-1 block is compared; those without a node only at tp 1.
        self.assertEqual({x["gpu"] for x in j["layers"] if x["layer"] == "block"},
                         set(sailor.GPUS.values()))
        self.assertEqual({x["tp"] for x in j["layers"] if x["gpu"] == "titan-rtx"}, {1})
        # The Metis-format profiles: each layer's forward and backward, per micro-batch.
        with open(os.path.join(sailor.METIS, "OPT-350", "V100-16", "mbs2_tmp4.json")) as f:
            layers = sorted(json.load(f)["execution_time"]["layer_compute_total_ms"][1:25])
        step = next(x for x in j["layer_steps"]
                    if (x["model"], x["gpu"], x["tp"], x["micro_batch"]) ==
                    ("OPT-350", "v100", 4, 2))
        self.assertAlmostEqual(step["measured_s"], (layers[11] + layers[12]) / 2e3)
        self.assertGreater(step["tp_comm_s"], 0)  # tp 4 on the V100 VM's NVLink
        self.assertEqual({x["tp"] for x in j["layer_steps"] if x["gpu"] == "rtx-3090"}, {1})
        # GPT-Neo 2.7B's profiles on the three GPUs with a node, its 32 layers' median.
        self.assertEqual({x["gpu"] for x in j["layer_steps"] if x["model"] == "GPT-Neo-2.7"},
                         {"v100", "a100-40gb", "gh200-96gb"})
        self.assertEqual([p["calibration"] for p in j["plans"]], ["priors", "sailor-layers"])
        for p in j["plans"]:
            self.assertAlmostEqual(p["sailor_plan_samples_per_s"], 1024 / p["sailor_plan_s"])
            self.assertGreater(p["uniform_samples_per_s"], 0)


if __name__ == "__main__":
    unittest.main()
