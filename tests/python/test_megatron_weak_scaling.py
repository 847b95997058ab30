"""scripts/megatron_weak_scaling.py: Megatron-LM's published weak-scaling runs (Narayanan et al.
2021, Table 1) as hetplan models, clusters and strategies, predicted and compared
(examples/external/megatron/README.md).

Run: HETPLAN_BINARY=build/cli/hetplan python3 -m unittest tests/python/test_megatron_weak_scaling.py
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import megatron_weak_scaling as mws  # noqa: E402

HETPLAN = os.environ.get("HETPLAN_BINARY", os.path.join(ROOT, "build", "cli", "hetplan"))
SCRIPT = os.path.join(ROOT, "scripts", "megatron_weak_scaling.py")
RUNS = os.path.join(mws.DATA, "weak_scaling.csv")


def runs():
    return mws.read_runs(RUNS)


class Table(unittest.TestCase):
    def test_the_ten_runs_and_their_columns(self):
        rows = runs()
        self.assertEqual([r["params_billion"] for r in rows],
                         [1.7, 3.6, 7.5, 18.4, 39.1, 76.1, 145.6, 310.1, 529.6, 1008.0])
        last = rows[-1]
        self.assertEqual((last["layers"], last["hidden"], last["heads"]), (128, 25600, 160))
        self.assertEqual((last["tp"], last["pp"], last["gpus"], last["batch"]), (8, 64, 3072, 3072))
        self.assertEqual(last["line"], 11)

    def test_the_published_columns_agree_with_each_other(self):
        for r in runs():
            # teraFLOP/s per GPU x GPUs is the aggregate, to the table's rounding (0.36% at most).
            self.assertAlmostEqual(r["tflops_per_gpu"] * r["gpus"] / 1000 / r["aggregate_pflops"],
                                   1, delta=0.004, msg=r["params_billion"])
            self.assertEqual(round(100 * r["tflops_per_gpu"] / 312), r["percent_of_peak"])

    def test_seconds_per_iteration_by_equation_3(self):
        # 1.7B: 96 x 512 x 2048 x 24 x 2304^2 x (1 + 2048 / 13824 + 51200 / 884736) FLOPs
        # = 1.5468e16, at 32 x 137 teraFLOP/s: 3.528 s.
        r = runs()[0]
        self.assertAlmostEqual(mws.iteration_flops(r) / 1.5468e16, 1, delta=1e-4)
        self.assertAlmostEqual(mws.measured_seconds(r), 3.528, delta=0.001)
        # The 1T run: 502 petaFLOP/s aggregate (the abstract) within the table's rounding.
        r = runs()[-1]
        self.assertAlmostEqual(mws.iteration_flops(r) / mws.measured_seconds(r) / 1e15, 502,
                               delta=2)

    def test_candidates_are_the_choices_the_table_leaves_open(self):
        r = runs()[6]  # 145.6B: tp 8, pp 8, 1536 GPUs: dp 24, 96 sequences per replica
        got = [(s["micro_batch"], s["schedule"], s["chunks"]) for s in mws.candidates(r)]
        # 80 layers over 8 ranks: 10 a rank, split in 2 chunks (not 3 or 4).
        self.assertEqual(got, [(mb, sched, c) for mb in (1, 2, 4, 8)
                               for sched, c in (("1f1b", 1), ("interleaved", 2))])
        s = mws.candidates(r)[0]
        self.assertEqual((s["dp"], s["tp"], s["pp"], s["global_batch"]), (24, 8, 8, 2304))
        self.assertEqual((s["recompute"], s["zero"], s["sequence_parallel"]), ("full", 0, False))
        # The switches are the framework's (presets/frameworks/megatron-lm-2021.yaml).
        self.assertEqual(s["framework"], "megatron-lm-2021")
        self.assertNotIn("flash_attention", s)
        # 529.6B: 105 layers over 35 ranks, 3 a rank: interleaved in 3 chunks only; 9 replicas of
        # 280 sequences: micro-batches 1, 2, 4, 8 all divide.
        got = {(s["schedule"], s["chunks"]) for s in mws.candidates(runs()[8])}
        self.assertEqual(got, {("1f1b", 1), ("interleaved", 3)})

    def test_the_published_launch_configurations(self):
        # examples/sc21/run_table_1.sh (Megatron-LM 6985e58): 1.7B mb16 and PyTorch DDP; 76.1B
        # mb2 with 5 layers per virtual stage (60 layers over 4 ranks: 3 chunks) and local DDP;
        # the 1T run with no virtual stages.
        rows = runs()
        configs = mws.read_configs(os.path.join(mws.DATA, "sc21_configs.csv"), rows)
        s = mws.published_strategy(rows[0], configs[1.7])
        self.assertEqual((s["micro_batch"], s["schedule"], s["chunks"], s["overlap_grad_reduce"]),
                         (16, "1f1b", 1, True))
        s = mws.published_strategy(rows[5], configs[76.1])
        self.assertEqual((s["micro_batch"], s["schedule"], s["chunks"], s["overlap_grad_reduce"]),
                         (2, "interleaved", 3, False))
        self.assertEqual((s["recompute"], s["framework"]), ("full", "megatron-lm-2021"))
        s = mws.published_strategy(rows[9], configs[1008.0])
        self.assertEqual((s["micro_batch"], s["schedule"], s["chunks"]), (1, "1f1b", 1))

    def test_bad_configurations_name_the_file_line_and_column(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "c.csv")
            header = ",".join(mws.CONFIG_COLUMNS)
            cases = [
                ("params_billion,micro_batch\n1.7,16\n", "no column layers_per_virtual_stage"),
                (header + "\n1.7,x,0,torch\n", ":2: micro_batch: expected a number, found 'x'"),
                (header + "\n1.7,16,0,apex\n", ":2: ddp_impl: expected local or torch"),
                (header + "\n1.7,16,0,torch\n", "no configuration for the 3.6B run"),
                (header + "\n" + "\n".join(f"{r['params_billion']},{3 if i == 0 else 1},0,local"
                                             for i, r in enumerate(runs())),
                 ":2: micro_batch: 3 does not divide the 16 sequences of a replica"),
                (header + "\n" + "\n".join(f"{r['params_billion']},1,{7 if i == 5 else 0},local"
                                             for i, r in enumerate(runs())),
                 ":7: layers_per_virtual_stage: 7 does not divide the 15 layers"),
            ]
            for text, expected in cases:
                with open(path, "w") as f:
                    f.write(text)
                with self.assertRaises(ValueError) as e:
                    mws.read_configs(path, runs())
                self.assertIn(path, str(e.exception))
                self.assertIn(expected, str(e.exception))

    def test_bad_tables_name_the_file_line_and_column(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "t.csv")
            header = ",".join(mws.COLUMNS)
            cases = [
                ("params_billion,heads\n1.7,24\n", "no column hidden"),
                (header + "\n1.7,24,2304,24,1,1,32,512,x,44,4.4\n",
                 ":2: tflops_per_gpu: expected a number, found 'x'"),
                (header + "\n1.7,24,2304,24,1,1,36,512,137,44,4.4\n",
                 ":2: gpus: 36 is not a multiple of tp x pp = 1 and of 8 per node"),
                (header + "\n1.7,24,2304,24,1,1,32,500,137,44,4.4\n",
                 ":2: batch: 500 does not divide over 32 data-parallel replicas"),
            ]
            for text, expected in cases:
                with open(path, "w") as f:
                    f.write(text)
                with self.assertRaises(ValueError) as e:
                    mws.read_runs(path)
                self.assertIn(path, str(e.exception))
                self.assertIn(expected, str(e.exception))


@unittest.skipUnless(os.path.exists(HETPLAN), f"no hetplan binary at {HETPLAN}")
class EndToEnd(unittest.TestCase):
    def test_the_models_have_the_published_parameter_counts(self):
        with tempfile.TemporaryDirectory() as d:
            for r in runs():
                path = os.path.join(d, "m.yaml")
                with open(path, "w") as f:
                    f.write(mws.model_yaml(r))
                out = subprocess.run([HETPLAN, "model-info", "--model", path, "--json"],
                                     capture_output=True, text=True, check=True).stdout
                # Table 1 rounds to 0.1 billion (1.65B is "1.7").
                self.assertEqual(round(json.loads(out)["parameters"] / 1e9, 1),
                                 r["params_billion"])

    def test_predicts_reports_and_scores_every_run(self):
        with tempfile.TemporaryDirectory() as out:
            summary_path = os.path.join(out, "summary.json")
            r = subprocess.run([sys.executable, "-B", SCRIPT, "--out-dir", out, "--json",
                                summary_path], capture_output=True, text=True,
                               env={**os.environ, "HETPLAN_BINARY": HETPLAN})
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            with open(summary_path) as f:
                summary = json.load(f)
            self.assertEqual(summary["compared"], 10)
            with open(os.path.join(out, "measurements.json")) as f:
                measurements = json.load(f)["measurements"]
            self.assertEqual(measurements[0]["source"], "imported:megatron-lm-paper")
            self.assertNotIn("assumed", measurements[0])  # every choice is the published one
            for row, m in zip(summary["rows"], measurements):
                # The measurement carries the strategy the run was launched with, which hetplan
                # report then matched to its prediction.
                self.assertEqual(m["strategy"]["micro_batch"],
                                 int(row["published"].split()[0][2:]))
                self.assertAlmostEqual(m["iteration_s"], row["measured_s"])
            with open(os.path.join(out, "report.json")) as f:
                report = json.load(f)
            self.assertEqual(report["metrics"]["iteration"]["count"], 10)
            self.assertAlmostEqual(report["metrics"]["iteration"]["median_ape"],
                                   summary["hetplan"]["median_ape"], places=12)
            # A guard on the multi-node model, outside today's errors (median 8.2%, the largest
            # 12.4%; docs/benchmarks.md): a collective or pipeline term gone wrong at scale
            # shows here first.
            self.assertLess(summary["hetplan"]["median_ape"], 0.12)
            for row in summary["rows"]:
                self.assertLess(abs(row["predicted_s"] / row["measured_s"] - 1), 0.18,
                                row["model"])


if __name__ == "__main__":
    unittest.main()
