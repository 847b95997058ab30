"""scripts/amp_het_cluster.py: AMP's measured heterogeneous-cluster trials as hetplan strategies,
predicted and compared (examples/external/amp/README.md).

Run: HETPLAN_BINARY=build/cli/hetplan python3 -m unittest tests/python/test_amp_het_cluster.py
"""

import json
import math
import os
import subprocess
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import amp_het_cluster as amp  # noqa: E402

HETPLAN = os.environ.get("HETPLAN_BINARY", os.path.join(ROOT, "build", "cli", "hetplan"))
SCRIPT = os.path.join(ROOT, "scripts", "amp_het_cluster.py")


def trial(n):
    return next(t for t in amp.read_trials(os.path.join(amp.DATA, "trials.csv"))
                if int(t["trial"]) == n)


class Strategies(unittest.TestCase):
    def test_the_first_trial_maps_amps_entries_onto_hetplan_layers(self):
        # Stage boundaries 0 7 14 20 30: entries 0-6 are the embedding (0), a no-op and blocks
        # 1-5; 7-13 blocks 6-12; 14-19 blocks 13-18; 20-29 blocks 19-24 and the head (25).
        s, why = amp.strategy_of(trial(0))
        self.assertEqual(why, "")
        self.assertEqual((s["dp"], s["tp"], s["pp"], s["micro_batch"]), (4, 1, 4, 1))
        self.assertEqual([st["layers"] for st in s["stages"]], [[0, 5], [6, 12], [13, 18], [19, 25]])
        self.assertEqual(s["stages"][3]["devices"], [12, 13, 14, 15])  # the g4dn node's T4s
        # DeepSpeed's framework file gives unfused attention, no gradient-accumulation fusion and
        # the reduction after the pipeline flush; AMP's launch sets --fp32-allreduce.
        self.assertEqual(s["framework"], "deepspeed")
        self.assertTrue(s["fp32_grad_reduce"])
        self.assertNotIn("overlap_grad_reduce", s)

    def test_tensor_parallel_ranks_come_first_as_deepspeed_orders_them(self):
        s, _ = amp.strategy_of(trial(8))  # tp 2, dp 2, pp 4
        self.assertEqual(s["stages"][1]["devices"], [4, 5, 6, 7])
        self.assertEqual(s["stages"][0]["layers"], [0, 6])  # boundaries 0 8: entries 0-7

    def test_a_stage_of_no_ops_alone_cannot_be_expressed(self):
        s, why = amp.strategy_of(trial(10))  # boundaries 0 1 2 ...: stage 1 = entry 1, a no-op
        self.assertIsNone(s)
        self.assertIn("stage 1 holds only AMP's no-op entries [1]", why)
        s, _ = amp.strategy_of(trial(26))  # 0 1 3 ...: stage 0 = the embedding, stage 1 = block 1
        self.assertEqual([st["layers"] for st in s["stages"][:2]], [[0, 0], [1, 1]])

    def test_every_trial_reads_and_failed_runs_are_infinite(self):
        trials = amp.read_trials(os.path.join(amp.DATA, "trials.csv"))
        self.assertEqual(len(trials), 53)
        self.assertEqual([int(t["trial"]) for t in trials if math.isinf(t["measured"])],
                         [10, 22, 26, 27, 29, 34, 44, 45, 50, 52])
        self.assertEqual(trial(1)["measured"], 1.28)  # the fastest measured
        self.assertEqual(trial(0)["amp_predicted"], 1.0859)

    def test_rank_correlation(self):
        self.assertEqual(amp.ranks([3, 1, 2, 1]), [4, 1.5, 3, 1.5])
        self.assertAlmostEqual(amp.spearman([1, 2, 3], [10, 20, 30]), 1.0)
        self.assertAlmostEqual(amp.spearman([1, 2, 3], [3, 2, 1]), -1.0)


@unittest.skipUnless(os.path.exists(HETPLAN), f"no hetplan binary at {HETPLAN}")
class EndToEnd(unittest.TestCase):
    def test_predicts_reports_and_scores_every_expressible_trial(self):
        with tempfile.TemporaryDirectory() as out:
            summary_path = os.path.join(out, "summary.json")
            r = subprocess.run([sys.executable, "-B", SCRIPT, "--out-dir", out, "--json",
                                summary_path], capture_output=True, text=True,
                               env={**os.environ, "HETPLAN_BINARY": HETPLAN})
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            with open(summary_path) as f:
                summary = json.load(f)
            self.assertEqual([s["trial"] for s in summary["skipped"]], [10, 34, 45])
            self.assertEqual(len(summary["rows"]), 50)
            timed = [row for row in summary["rows"]
                     if math.isfinite(row["measured_s"]) and row["hetplan_feasible"]]
            self.assertEqual(summary["compared"], len(timed))
            self.assertEqual(summary["compared"], 43)
            # hetplan report computed the same errors from the files the script wrote.
            with open(os.path.join(out, "report.json")) as f:
                report = json.load(f)
            self.assertEqual(report["metrics"]["iteration"]["count"], 43)
            self.assertAlmostEqual(report["metrics"]["iteration"]["median_ape"],
                                   summary["hetplan"]["median_ape"], places=12)
            self.assertAlmostEqual(report["metrics"]["throughput_spearman"],
                                   summary["hetplan"]["spearman_throughput"], places=12)
            # AMP's own predictions on the same trials, from the file alone.
            amp_ape = sorted(abs(row["amp_predicted_s"] / row["measured_s"] - 1) for row in timed)
            self.assertAlmostEqual(summary["amp"]["median_ape"], amp_ape[len(amp_ape) // 2])
            self.assertTrue(os.path.getsize(os.path.join(out, "report.html")) > 100000)


if __name__ == "__main__":
    unittest.main()
