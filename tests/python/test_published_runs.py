"""scripts/published_runs.py and scripts/published_sources.py: NVIDIA's (Megatron-Bridge, NeMo
24.07) and torchtitan's published training runs as hetplan models, clusters and strategies,
predicted and scored (examples/external/published/README.md, issue 37).

Run: HETPLAN_BINARY=build/cli/hetplan python3 -m unittest tests/python/test_published_runs.py
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

import published_runs as pr  # noqa: E402
import published_sources as ps  # noqa: E402

HETPLAN = os.environ.get("HETPLAN_BINARY", os.path.join(ROOT, "build", "cli", "hetplan"))
SCRIPT = os.path.join(ROOT, "scripts", "published_runs.py")


def by_id():
    return {r["id"]: r for r in ps.all_runs()}


class Mapping(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.runs = by_id()

    def test_megatron_bridge_dense_row(self):
        # 26.04.01 | DGX-H100 | 64 | FP8 | 256 | 1 | 8192 | 0 | 4 | 8 | 1 | 5 | n/a | 1664 | 731
        r = self.runs["megatron-bridge:7"]
        self.assertEqual((r["model"], r["cluster"], r["seq_len"]),
                         ("llama3-70b", "dgx-h100:8", 8192))
        self.assertEqual(r["measured_tokens_per_s_per_gpu"], 1664)
        self.assertEqual(r["strategy"], {
            "dp": 2, "tp": 4, "pp": 8, "cp": 1, "micro_batch": 1, "global_batch": 256,
            "schedule": "interleaved", "chunks": 5, "recompute": "none", "zero": 1,
            "sequence_parallel": True, "precision": "fp8-current", "framework": "megatron-core",
            "fp32_grad_reduce": False})
        self.assertIn("current scaling", r["assumptions"][0])

    def test_megatron_bridge_moe_row(self):
        # 26.04.01 | DGX-H100 | Qwen3_235B_a22B | 256 | FP8 | 8192 | 1 | 4096 | tp 2 | pp 8 | vp 4
        # | ep 32: dp 256 / 16 = 16; the experts at width 1 over 32 of the 32 ranks of a stage.
        s = self.runs["megatron-bridge:15"]["strategy"]
        self.assertEqual((s["dp"], s["tp"], s["pp"], s["chunks"], s["ep"], s["etp"]),
                         (16, 2, 8, 4, 32, 1))
        self.assertEqual((s["moe_dispatcher"], s["global_batch"]), ("alltoall", 8192))
        self.assertEqual(self.runs["megatron-bridge:15"]["cluster"], "dgx-h100:32")
        # 26.04.01 B200 DeepSeekV3 MXFP8, pp 8 vp 2 ep 32 on 256 GPUs.
        r = self.runs["megatron-bridge:9"]
        self.assertEqual((r["cluster"], r["model"], r["strategy"]["precision"]),
                         ("dgx-b200:32", "deepseek-v3", "mxfp8"))
        self.assertEqual((r["strategy"]["dp"], r["strategy"]["ep"]), (32, 32))

    def test_megatron_bridge_recipes_recompute_modules(self):
        # deepseek/b200/deepseek_v3.py deepseek_v3_pretrain_256gpu_b200_fp8mx_config and
        # gpt_oss/h100/gpt_oss.py (perf_recipes at 067f987df0); Qwen3 recomputes nothing, Llama 3 8B
        # on H100 in FP8-CS full 5 layers a stage (below), the other Llamas nothing.
        s = self.runs["megatron-bridge:9"]["strategy"]
        self.assertEqual((s["recompute"], s["recompute_modules"]),
                         ("selective", ["mla_up_proj", "mlp"]))
        r = self.runs["megatron-bridge:11"]
        self.assertEqual((r["model_published"], r["gpu"]), ("GPT OSS 120B", "H100"))
        self.assertEqual(r["strategy"]["recompute_modules"], ["layernorm", "moe_act"])
        self.assertIn("067f987df0", r["assumptions"][-1])
        self.assertEqual(self.runs["megatron-bridge:65"]["strategy"]["recompute_modules"],
                         ["mla_up_proj"])  # 25.09 B200 FP8-CS: the fp8cs recipe
        self.assertNotIn("recompute_modules", self.runs["megatron-bridge:7"]["strategy"])
        self.assertNotIn("recompute_modules", self.runs["megatron-bridge:15"]["strategy"])

    def test_megatron_bridge_precisions_fsdp_and_25_09(self):
        r = self.runs["megatron-bridge:55"]  # 25.11 H100 LLAMA3_8B FP8-CS, FSDP 8
        self.assertEqual((r["strategy"]["zero"], r["strategy"]["precision"]), (3, "fp8-current"))
        # Its two assumptions: the recipes' bf16 gradients, and this recipe's full recomputation
        # of 5 layers a stage (block method; llama/h100/llama3.py
        # llama3_8b_pretrain_8gpu_h100_fp8cs_config at 067f987df0).
        self.assertEqual((r["strategy"]["recompute"], r["strategy"]["recompute_num_layers"]),
                         ("full", 5))
        self.assertEqual(len(r["assumptions"]), 2)
        self.assertIn("reduced in bf16", r["assumptions"][0])
        self.assertIn("block method", r["assumptions"][1])
        # 25.09 has no precision column: the primary number FP8-CS, the parenthesized one the
        # note's block scaling (H100: fp8-blockwise; B200: labelled FP8-MX in 25.11).
        self.assertEqual(self.runs["megatron-bridge:73"]["strategy"]["precision"], "fp8-current")
        self.assertEqual(self.runs["megatron-bridge:74"]["strategy"]["precision"], "fp8-blockwise")
        self.assertEqual(self.runs["megatron-bridge:62"]["strategy"]["precision"], "mxfp8")
        self.assertEqual(self.runs["megatron-bridge:48"]["strategy"]["precision"], "mxfp8")
        self.assertEqual(self.runs["megatron-bridge:10"]["strategy"]["precision"], "bf16")

    def test_megatron_bridge_rows_reduce_gradients_in_bf16(self):
        # perf_recipes/_common.py _perf_precision: grad_reduce_in_fp32 = False, every precision.
        for r in self.runs.values():
            if r["strategy"] is None:
                continue
            expected = False if r["source"] == "megatron-bridge" else None
            self.assertEqual(r["strategy"].get("fp32_grad_reduce"), expected, r["id"])

    def test_nemotron_3_rows(self):
        # Nemotron 3 Super (LatentMoE and the hybrid MTP block): its recipes' ep 64, selective
        # recomputation under MXFP8 only, and their two MTP depths over shared weights.
        for i in (18, 19, 28, 29):
            r = self.runs[f"megatron-bridge:{i}"]
            self.assertEqual(r["model_published"], "Nemotron_3_Super")
            self.assertEqual(os.path.basename(r["model"]), "nemotron3-super-120b-a12b-mtp2.yaml")
            self.assertEqual(r["reason"], "")
            self.assertEqual(r["strategy"]["ep"], 64)
            mx = r["strategy"]["precision"] == "mxfp8"
            self.assertEqual(r["strategy"]["recompute"], "selective" if mx else "none")
        for i in (4, 16, 17, 27, 37):
            r = self.runs[f"megatron-bridge:{i}"]
            self.assertEqual(r["model_published"], "Nemotron_3_Nano")
            self.assertEqual(r["model"], "nemotron3-nano-30b-a3b")
            self.assertEqual(r["strategy"]["ep"], 8)
        # LoRA rows are predicted with their recipes' adapters: rank 32 on linear_qkv
        # (Megatron-Bridge's perf recipe; NeMo 24.07's fine-tuning config), the source said.
        for i in ("megatron-bridge:6", "nemo-24.07-ft:17", "nemo-24.07-ft:18", "nemo-24.07-ft:19"):
            r = self.runs[i]
            self.assertEqual(r["reason"], "", i)
            self.assertEqual(r["strategy"]["lora"], {"rank": 32, "target_modules": ["linear_qkv"]})
            self.assertTrue(any("LoRA" in a and "32" in a for a in r["assumptions"]), i)
        r = self.runs["megatron-bridge:6"]  # 26.06 LLAMA3_70B LoRA, 8 H100s tp 2 pp 4 vp 20
        self.assertEqual((r["strategy"]["tp"], r["strategy"]["pp"], r["strategy"]["chunks"]),
                         (2, 4, 20))
        # SFT is full-parameter training: predicted, with the assumption said.
        r = self.runs["megatron-bridge:5"]
        self.assertEqual((r["strategy"]["dp"], r["strategy"]["global_batch"], r["seq_len"]),
                         (2, 32, 4096))
        self.assertTrue(any(a.startswith("SFT") for a in r["assumptions"]))

    def test_nemo_rows(self):
        # Final version 8e3d65d: LLAMA3-70B | 64 | 128 | 1 | 8192 | tp 4 | pp 4 | cp 2 | vp 5.
        r = self.runs["nemo-24.07:37"]
        self.assertTrue(r["target"])
        self.assertEqual(r["strategy"], {
            "dp": 2, "tp": 4, "pp": 4, "cp": 2, "micro_batch": 1, "global_batch": 128,
            "schedule": "interleaved", "chunks": 5, "recompute": "none", "zero": 1,
            "sequence_parallel": True, "precision": "fp8-delayed", "framework": "megatron-core"})
        self.assertEqual(r["measured_tokens_per_s_per_gpu"], 1524)
        first = self.runs["nemo-24.07:13"]  # the same run in the first version, 4c73f77
        self.assertFalse(first["target"])
        self.assertIn("superseded", first["skip"])
        self.assertEqual(self.runs["nemo-24.07:26"]["model"],
                         os.path.join("examples", "models", "published", "gpt3-5b.yaml"))
        sft = self.runs["nemo-24.07-ft:16"]  # LLAMA2-70B SFT, 16 GPUs tp 4 pp 4, packed 4096
        self.assertEqual((sft["strategy"]["dp"], sft["seq_len"], sft["target"]), (1, 4096, True))

    def test_torchtitan_rows(self):
        # Table 5: 405B, 512 GPUs FSDP 8 TP 8 PP 8, local batch 32 in 8 micro-batches of 4,
        # interleaved 1F1B (2 stages a rank), compile, Float8, async TP, full AC.
        s = self.runs["torchtitan:15"]["strategy"]
        self.assertEqual(s, {
            "dp": 8, "tp": 8, "pp": 8, "cp": 1, "micro_batch": 4, "global_batch": 256,
            "schedule": "interleaved", "chunks": 2, "recompute": "full", "zero": 3,
            "sequence_parallel": True, "precision": "fp8-current", "host_mode": "compiled",
            "tp_comm_overlap": True, "framework": "torchtitan-2024"})
        # Table 2: CP 8 on 8 GPUs at 262144 tokens, one sequence per step.
        r = self.runs["torchtitan:8"]
        self.assertEqual((r["strategy"]["dp"], r["strategy"]["cp"], r["strategy"]["cp_comm"],
                          r["strategy"]["global_batch"], r["seq_len"]), (1, 8, "all_gather", 1,
                                                                         262144))
        # Table 1: eager FSDP with selective AC, the per-op policy of December 2024's release.
        r = self.runs["torchtitan:2"]
        self.assertEqual((r["strategy"]["host_mode"], r["strategy"]["recompute"],
                          r["strategy"]["framework"]), ("eager", "op", "torchtitan-2024"))
        # 3faaa1a: "2D FSDP2 + TP (FSDP ranks 16)" on 128 GPUs: tp 8, today's preset.
        self.assertEqual(self.runs["torchtitan:23"]["strategy"]["tp"], 8)
        self.assertEqual(self.runs["torchtitan:23"]["strategy"]["framework"], "torchtitan")
        self.assertFalse(self.runs["torchtitan:20"]["target"])  # superseded 9515a14
        self.assertFalse(self.runs["torchtitan:26"]["target"])  # A100

    def test_every_targeted_row_is_mapped_or_has_a_reason(self):
        targets = [r for r in self.runs.values() if r["target"]]
        self.assertEqual(len(self.runs), 75 + 54 + 34)
        self.assertEqual(len(targets), 75 + 18 + 21)
        for r in targets:
            self.assertTrue((r["strategy"] is None) != (r["reason"] == ""), r["id"])
            if r["strategy"]:
                s = r["strategy"]
                self.assertEqual(s["dp"] * s["tp"] * s["pp"] * s["cp"], r["num_gpus"], r["id"])
                self.assertEqual(s["global_batch"] % (s["dp"] * s["micro_batch"]), 0, r["id"])
                self.assertEqual(int(r["cluster"].split(":")[1]) * 8, r["num_gpus"], r["id"])
        self.assertEqual(sum(r["strategy"] is None for r in targets), 0)  # every row expressible


class Statistics(unittest.TestCase):
    @staticmethod
    def run_row(i, source, error, feasible=True, ratio=None):
        return {"id": f"{source}:{i}", "source": source, "target": True, "error": error,
                "feasible": feasible, "model_published": f"m{i % 2}", "gpu": "H100",
                "reason": "" if error is not None else "no model", "search_ratio": ratio}

    def test_median_p90_and_targets_by_hand(self):
        # |errors| 0.02 0.05 0.10 0.20 0.30: median 0.10; p90 at 0.9 x 4 = 3.6: 0.20 + 0.6 x 0.10
        # = 0.26; signed -0.10 -0.02 0.05 0.20 0.30: median 0.05.
        runs = [self.run_row(1, "a", 0.05, ratio=0.95), self.run_row(2, "a", -0.10, ratio=0.85),
                self.run_row(3, "b", 0.20), self.run_row(4, "b", -0.02, feasible=False),
                self.run_row(5, "b", 0.30), self.run_row(6, "b", None)]
        s = pr.summarize(runs)
        self.assertEqual((s["coverage"]["rows"], s["coverage"]["expressible"]), (6, 5))
        self.assertEqual(s["coverage"]["not_expressible"][0]["id"], "b:6")
        a = s["accuracy"]
        self.assertEqual(a["count"], 5)
        self.assertAlmostEqual(a["median_ape"], 0.10)
        self.assertAlmostEqual(a["p90_ape"], 0.26)
        self.assertAlmostEqual(a["median_signed"], 0.05)
        self.assertEqual(s["feasible_only"]["count"], 4)
        self.assertEqual(s["predicted_over_memory"], ["b:4"])
        # Source a: 0.05, 0.10 -> median 0.075; b: 0.02, 0.20, 0.30 -> 0.20.
        self.assertAlmostEqual(s["by_source"]["a"]["median_ape"], 0.075)
        self.assertAlmostEqual(s["by_source"]["b"]["median_ape"], 0.20)
        self.assertEqual(s["worst"][:2], ["b:5", "b:3"])
        self.assertEqual((s["search"]["rows"], s["search"]["within"]), (2, 1))
        self.assertEqual((s["search"]["fitting_rows"], s["search"]["fitting_within"]), (2, 1))
        self.assertEqual(s["targets_met"], {"coverage": False, "median": True, "p90": False,
                                            "search": False})

    def test_representative_search_subset(self):
        runs = [dict(self.run_row(i, "a", 0.1), model="m", cluster="c:1", seq_len=s)
                for i, s in ((1, 4096), (2, 4096), (3, 8192))]
        self.assertEqual([r["id"] for r in pr.search_subset(runs, "representative")],
                         ["a:1", "a:3"])
        self.assertEqual(len(pr.search_subset(runs, "all")), 3)
        self.assertEqual(pr.search_subset(runs, "none"), [])


class Overrides(unittest.TestCase):
    def test_set_changes_every_strategy_and_tp_overlap_only_with_sequence_parallelism(self):
        self.assertEqual(pr.parse_set(["flash_attention=false", "recompute=full", "x=7"]),
                         {"flash_attention": False, "recompute": "full", "x": 7})
        with self.assertRaises(ValueError):
            pr.parse_set(["flash_attention"])
        runs = by_id()
        rows = [runs["megatron-bridge:7"], runs["megatron-bridge:13"], runs["torchtitan:26"]]
        pr.apply_set(rows, {"tp_comm_overlap": True})
        self.assertTrue(rows[0]["strategy"]["tp_comm_overlap"])  # tp 4 with sequence parallelism
        self.assertNotIn("tp_comm_overlap", rows[1]["strategy"])  # tp 1
        self.assertIsNone(rows[2]["strategy"])  # not a target (A100): left alone
        self.assertIn('--set {"tp_comm_overlap": true}', rows[0]["assumptions"])


class BadTables(unittest.TestCase):
    def test_errors_name_the_file_line_and_column(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "t.csv")
            with open(path, "w") as f:
                f.write("container,task\n26.06,x\n")
            with self.assertRaises(ValueError) as e:
                ps.mbridge_runs(path)
            self.assertIn(f"{path}: no column system", str(e.exception))
            with open(os.path.join(ps.DATA, ps.MBRIDGE)) as f:
                text = f.read().replace(",1024,FP8,1536,1,8192,", ",1024,FP8,1536,x,8192,", 1)
            with open(path, "w") as f:
                f.write(text)
            with self.assertRaises(ValueError) as e:
                ps.mbridge_runs(path)
            self.assertIn(f"{path}:2: mbs: expected a whole number, found 'x'", str(e.exception))


def hetplan_has_the_strategy_keys():
    """Whether the binary reads cp, ep and precision (a build from before them refuses them)."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "s.json")
        with open(path, "w") as f:
            json.dump({"dp": 1, "tp": 1, "pp": 1, "cp": 1, "ep": 1, "precision": "bf16",
                       "micro_batch": 1, "global_batch": 1}, f)
        r = subprocess.run([HETPLAN, "predict", "--model", "gpt2-medium", "--cluster",
                            "dgx-h100:1", "--strategy", path], capture_output=True, text=True)
        return "unknown key" not in r.stderr


@unittest.skipUnless(os.path.exists(HETPLAN), f"no hetplan binary at {HETPLAN}")
class EndToEnd(unittest.TestCase):
    def test_the_model_files_have_their_published_sizes(self):
        expected = {"gpt3-5b": 5.0, "gpt3-20b": 20.3, "nemotron3-8b": 8.5, "nemotron3-22b": 21.3,
                    "nemotron4-340b": 341.0}  # 340B: the Nemotron-4 report's 341B
        for name, billions in expected.items():
            path = os.path.join(ROOT, ps.MODELS_DIR, name + ".yaml")
            out = subprocess.run([HETPLAN, "model-info", "--model", path, "--json"],
                                 capture_output=True, text=True, check=True).stdout
            self.assertEqual(round(json.loads(out)["parameters"] / 1e9, 1), billions, name)

    def test_predicts_and_scores_a_few_rows(self):
        if not hetplan_has_the_strategy_keys():
            self.skipTest(f"{HETPLAN} predates the strategy keys cp, ep and precision")
        ids = ["nemo-24.07:30", "megatron-bridge:13", "torchtitan:4", "torchtitan:26"]
        with tempfile.TemporaryDirectory() as out:
            r = subprocess.run([sys.executable, "-B", SCRIPT, "--out-dir", out, "--only"] + ids,
                               capture_output=True, text=True,
                               env={**os.environ, "HETPLAN_BINARY": HETPLAN})
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            with open(os.path.join(out, "runs.json")) as f:
                doc = json.load(f)
            self.assertEqual(doc["format"], "hetplan-published-runs")
            runs = {x["id"]: x for x in doc["runs"]}
            self.assertEqual(runs["torchtitan:26"]["status"], "not-target")  # A100
            for i in ids[:3]:
                x = runs[i]
                self.assertIn(x["status"], ("predicted", "predicted-infeasible"), x)
                self.assertTrue(math.isfinite(x["error"]))
                self.assertAlmostEqual(x["error"], x["predicted_tokens_per_s_per_gpu"] /
                                       x["measured_tokens_per_s_per_gpu"] - 1)
                with open(os.path.join(out, "strategies", i.replace(":", "-") + ".json")) as f:
                    self.assertEqual(json.load(f), x["strategy"])
            self.assertEqual(doc["summary"]["coverage"], {
                "rows": 3, "expressible": 3, "fraction": 1.0, "not_expressible": []})
            with open(os.path.join(out, "runs.csv")) as f:
                self.assertEqual(len(f.read().strip().splitlines()), 1 + 4)
            self.assertIn("coverage: 3 of 3 targeted rows expressible", r.stdout)
            # A guard on the dense H100 model, outside today's error (LLaMA-2 7B on 8 GPUs under
            # NeMo 24.07: +17.6% since Transformer Engine's cuDNN attention is costed on Hopper,
            # +4.4% before; docs/benchmarks.md).
            self.assertLess(abs(runs["nemo-24.07:30"]["error"]), 0.25)
            # The search ran for the three predicted rows, under their framework and precision.
            self.assertEqual(doc["summary"]["search"]["rows"], 3)
            for i in ids[:3]:
                x = runs[i]
                self.assertEqual(x["search_precision"], x["strategy"]["precision"])
                self.assertAlmostEqual(x["search_ratio"], x["predicted_tokens_per_s_per_gpu"] /
                                       x["search_best_tokens_per_s_per_gpu"])
                with open(os.path.join(out, "search", i.replace(":", "-") + ".json")) as f:
                    self.assertEqual(json.load(f)["framework"], x["strategy"]["framework"])


if __name__ == "__main__":
    unittest.main()
