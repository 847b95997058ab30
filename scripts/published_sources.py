"""The published training runs of examples/external/published as hetplan inputs: one run dict per
table row, with the model, cluster and strategy hetplan predicts it with, or the reason it
cannot (scripts/published_runs.py runs them; examples/external/published/README.md gives the
provenance).

Every run dict has: id (table:line; NeMo's fine-tuning table is nemo-24.07-ft), source, file,
line, target (whether issue 37's targets count it) and, when not, why (`skip`); the row as
published (model_published, gpu, num_gpus, precision_published, seq_len, gbs, mbs, tp, pp, cp, vp,
ep, fsdp, measured_tokens_per_s_per_gpu); and either `strategy` (with model, cluster) or
`reason` (why hetplan cannot express the run). `assumptions` lists what the mapping had to choose
that the row does not say.
"""

import csv
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "examples", "external", "published")
MODELS_DIR = os.path.join("examples", "models", "published")
MBRIDGE = os.path.join("megatron_bridge", "mbridge_perf_summary_latest_h100_b200.csv")
NEMO_PRETRAIN = os.path.join("nemo_24.07", "nemo_24.07_pretrain_h100_fp8.csv")
NEMO_FINETUNE = os.path.join("nemo_24.07", "nemo_24.07_finetune_h100_fp8.csv")
TORCHTITAN = os.path.join("torchtitan", "torchtitan_benchmarks_h100_a100.csv")
NEMO_FINAL = "8e3d65dcfe3504689bfc5b6e67d502780aacad41"  # the last version, kept until deletion
GPUS_PER_NODE = 8
NODES = {"H100": "dgx-h100", "B200": "dgx-b200"}

# Published model name -> (hetplan model: a preset or a file under examples/models/published,
# mixture of experts, reason when hetplan cannot model it).
MODELS = {
    "LLAMA3_8B": ("llama3-8b", False, None),
    "LLAMA3_70B": ("llama3-70b", False, None),
    "LLAMA3.1_405B": ("llama3.1-405b", False, None),
    "DeepSeekV3": ("deepseek-v3", True, None),
    "Qwen3_30B_a3B": ("qwen3-30b-a3b", True, None),
    "Qwen3_235B_a22B": ("qwen3-235b-a22b", True, None),
    "GPT OSS 120B": ("gpt-oss-120b", True, None),
    "Nemotron_3_Nano": ("nemotron3-nano-30b-a3b", True, None),
    # Super as its recipes train it: the MTP module twice over shared weights (the file's source).
    "Nemotron_3_Super": (os.path.join(MODELS_DIR, "nemotron3-super-120b-a12b-mtp2.yaml"), True,
                         None),
    "GPT3-5B": (os.path.join(MODELS_DIR, "gpt3-5b.yaml"), False, None),
    "GPT3-20B": (os.path.join(MODELS_DIR, "gpt3-20b.yaml"), False, None),
    "GPT3-175B": ("gpt3-175b", False, None),
    "LLAMA2-7B": ("llama2-7b", False, None),
    "LLAMA2-13B": ("llama2-13b", False, None),
    "LLAMA2-70B": ("llama2-70b", False, None),
    "LLAMA3-8B": ("llama3-8b", False, None),
    "LLAMA3-70B": ("llama3-70b", False, None),
    "Nemotron-8B": (os.path.join(MODELS_DIR, "nemotron3-8b.yaml"), False, None),
    "Nemotron-22B": (os.path.join(MODELS_DIR, "nemotron3-22b.yaml"), False, None),
    "Nemotron-340B": (os.path.join(MODELS_DIR, "nemotron4-340b.yaml"), False, None),
    # torchtitan's Llama 3.1 shapes (model_architectures.csv: ffn from ffn_dim_multiplier) are
    # Llama 3's: 8B 14336, 70B 28672, 405B 53248; 3.1 changes the rope scaling only.
    "Llama 3.1 8B": ("llama3-8b", False, None),
    "Llama 3.1 70B": ("llama3-70b", False, None),
    "Llama 3.1 405B": ("llama3.1-405b", False, None),
}

# Megatron-Bridge's performance recipes' selective recomputation (Megatron-Core's
# --recompute-modules) per published model, GPU and hetplan precision (None: every precision),
# with the recipe that sets it (src/megatron/bridge/perf_recipes/ at MBRIDGE_RECIPES). Qwen3's
# recipes recompute nothing (recompute_granularity None). An entry whose modules are
# ("block", N) is full recomputation of the first N layers of each stage (recompute_method
# block, hetplan's recompute_num_layers).
MBRIDGE_RECIPES = "067f987df03b8355b03192d88d70f1709fedf51a"
MBRIDGE_RECOMPUTE = {
    ("DeepSeekV3", "H100", None): (
        ["mla_up_proj", "mlp"],
        "deepseek/h100/deepseek_v3.py deepseek_v3_pretrain_1024gpu_h100_bf16_config and _fp8cs_ "
        "(_fp8sc_ inherits it)"),
    ("DeepSeekV3", "B200", "bf16"): (
        ["mla_up_proj"], "deepseek/b200/deepseek_v3.py deepseek_v3_pretrain_256gpu_b200_bf16_config"),
    ("DeepSeekV3", "B200", "fp8-current"): (
        ["mla_up_proj"],
        "deepseek/b200/deepseek_v3.py deepseek_v3_pretrain_256gpu_b200_fp8cs_config"),
    ("DeepSeekV3", "B200", "mxfp8"): (
        ["mla_up_proj", "mlp"],
        "deepseek/b200/deepseek_v3.py deepseek_v3_pretrain_256gpu_b200_fp8mx_config"),
    ("DeepSeekV3", "B200", "nvfp4"): (
        ["mla_up_proj", "layernorm", "moe_act"],
        "deepseek/b200/deepseek_v3.py deepseek_v3_pretrain_256gpu_b200_nvfp4_config"),
    ("LLAMA3_8B", "H100", "fp8-current"): (
        ("block", 5), "llama/h100/llama3.py llama3_8b_pretrain_8gpu_h100_fp8cs_config"),
    ("GPT OSS 120B", "H100", None): (
        ["layernorm", "moe_act"],
        "gpt_oss/h100/gpt_oss.py gpt_oss_120b_pretrain_64gpu_h100_bf16_config and _fp8cs_"),
    ("Nemotron_3_Nano", "H100", "fp8-current"): (
        ["layernorm"], "nemotronh/h100/nemotronh.py nemotron_3_nano_pretrain_16gpu_h100_fp8cs_config"),
    ("Nemotron_3_Super", "B200", "mxfp8"): (
        ["moe_act", "layernorm"],
        "nemotronh/b200/nemotronh.py nemotron_3_super_pretrain_64gpu_b200_fp8mx_config"),
    ("GPT OSS 120B", "B200", None): (
        ["layernorm", "moe_act"],
        "gpt_oss/b200/gpt_oss.py gpt_oss_120b_pretrain_64gpu_b200_bf16_config and _fp8mx_"),
}


def mbridge_recompute(run):
    """The recipe's recompute modules for a Megatron-Bridge row, and the assumption it makes."""
    model, gpu = run["model_published"], run["gpu"]
    found = (MBRIDGE_RECOMPUTE.get((model, gpu, run["precision"]))
             or MBRIDGE_RECOMPUTE.get((model, gpu, None)))
    if found is None:
        return None, ""
    modules, recipe = found
    what = (f"recompute full of the first {modules[1]} layers of each stage (block method)"
            if modules[0] == "block" else f"recompute selective {', '.join(modules)}")
    return modules, (f"{what} as Megatron-Bridge's recipe sets it today ({recipe} under "
                     f"src/megatron/bridge/perf_recipes/ at {MBRIDGE_RECIPES[:10]}); the "
                     "release's own recipe may differ")


MBRIDGE_COLUMNS = ("container", "task", "system", "gpu", "model", "model_note", "variant",
                   "num_gpus", "precision", "gbs", "mbs", "seq_len", "fsdp", "tp", "pp", "cp", "vp",
                   "ep", "tokens_per_s_per_gpu")
NEMO_COLUMNS = ("version_commit", "gpu", "precision", "model", "num_gpus", "gbs", "mbs", "tp", "pp",
                "tokens_per_s_per_gpu")
TORCHTITAN_COLUMNS = ("source_file", "source_commit", "benchmark_period", "table", "model", "gpu",
                      "num_gpus", "parallelism_as_published", "fsdp", "tp", "pp", "cp",
                      "pp_schedule", "local_batch_size", "global_batch_size", "seq_len",
                      "activation_checkpointing", "torch_compile", "float8", "async_tp",
                      "tokens_per_s_per_gpu")


def read_table(path, columns):
    """(line, row) of a CSV file; ValueError names the file and the first missing column."""
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in columns if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{path}: no column {missing[0]} (expected {', '.join(columns)})")
        return [(line, row) for line, row in enumerate(reader, start=2)]


def number(row, column, path, line, default=None):
    """A whole-number cell; `n/a` and an empty cell are `default` (None: required)."""
    text = (row.get(column) or "").strip()
    if text in ("", "n/a") and default is not None:
        return default
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{path}:{line}: {column}: expected a whole number, found "
                         f"{text!r}") from None


def base_run(source, path, line, table=None):
    return {"id": f"{table or source}:{line}", "source": source,
            "file": os.path.relpath(path, ROOT), "line": line, "target": True, "skip": "",
            "reason": "", "assumptions": [], "strategy": None, "model": None, "cluster": None}


def check_layout(run):
    """The reason a row's layout does not divide into hetplan's dp (empty when it does)."""
    per_replica = run["tp"] * run["pp"] * run["cp"]
    if run["num_gpus"] % per_replica:
        return (f"{run['num_gpus']} GPUs do not divide into tp x pp x cp = {per_replica}")
    dp = run["num_gpus"] // per_replica
    if run["gbs"] % (dp * run["mbs"]):
        return f"global batch {run['gbs']} does not divide into dp {dp} x micro-batch {run['mbs']}"
    if run["num_gpus"] % GPUS_PER_NODE:
        return f"{run['num_gpus']} GPUs are not whole nodes of {GPUS_PER_NODE}"
    return ""


def megatron_strategy(run, moe):
    """Megatron-Core's strategy for a Megatron-Bridge or NeMo row: the published layout, the
    distributed optimizer (ZeRO-1; Megatron-FSDP rows ZeRO-3), sequence parallelism with tp > 1
    (Megatron-Bridge's default), the interleaved schedule with vp chunks, and for MoE models
    Megatron-Core's all-to-all dispatcher with expert tensor width 1 (the recipes'
    expert_tensor_parallel_size = 1)."""
    dp = run["num_gpus"] // (run["tp"] * run["pp"] * run["cp"])
    s = {"dp": dp, "tp": run["tp"], "pp": run["pp"], "cp": run["cp"],
         "micro_batch": run["mbs"], "global_batch": run["gbs"],
         "schedule": "interleaved" if run["vp"] > 1 else "1f1b", "chunks": max(run["vp"], 1),
         "recompute": "none", "zero": 3 if run["fsdp"] > 0 else 1,
         "sequence_parallel": run["tp"] > 1, "precision": run["precision"],
         "framework": "megatron-core"}
    if moe:
        s.update({"ep": run["ep"], "etp": 1, "moe_dispatcher": "alltoall"})
    return s


def mbridge_precision(run, variant):
    """hetplan's recipe for a Megatron-Bridge precision cell, with the assumption it makes."""
    p, gpu = run["precision_published"], run["gpu"]
    if p == "BF16":
        return "bf16", ""
    if p in ("FP8-CS",):
        return "fp8-current", ""
    if p in ("FP8-MX", "MXFP8"):
        return "mxfp8", ""
    if p == "NVFP4":
        return "nvfp4", ""
    if p == "FP8":
        return "fp8-current", ("FP8 taken as current scaling (fp8_cs, the performance scripts' "
                               "FP8 recipe; 25.11 labels the same configurations FP8-CS)")
    if p == "":  # 25.09: no precision column
        if variant == "parenthesized_alternate":
            if gpu == "H100":
                return "fp8-blockwise", ("25.09 parenthesized: 128x128 weight and 1x128 "
                                         "activation blocks (the page's note): fp8-blockwise")
            return "mxfp8", ("25.09 parenthesized on B200: block scaling (the page's note), "
                             "labelled FP8-MX in 25.11: mxfp8")
        return "fp8-current", ("25.09 gives no precision: FP8 current scaling, as 25.11 labels "
                               "the same configurations FP8-CS")
    return None, ""


def mbridge_runs(path=None):
    """The DGX-H100 and DGX-B200 rows of Megatron-Bridge's performance summary."""
    path = path or os.path.join(DATA, MBRIDGE)
    runs = []
    for line, row in read_table(path, MBRIDGE_COLUMNS):
        run = base_run("megatron-bridge", path, line)
        run.update({"release": row["container"], "task": row["task"],
                    "model_published": row["model"], "model_note": row["model_note"],
                    "variant": row["variant"], "gpu": row["gpu"],
                    "precision_published": row["precision"].strip()})
        for c in ("num_gpus", "gbs", "mbs", "seq_len", "tp", "pp"):
            run[c] = number(row, c, path, line)
        run["cp"] = number(row, "cp", path, line, 1)
        run["vp"] = number(row, "vp", path, line, 1)
        run["ep"] = number(row, "ep", path, line, 1)
        run["fsdp"] = number(row, "fsdp", path, line, 0)
        run["measured_tokens_per_s_per_gpu"] = float(number(row, "tokens_per_s_per_gpu", path,
                                                            line))
        finish_megatron(run, task=row["task"])
        if run["reason"]:
            runs.append(run)
            continue
        run["precision"], note = mbridge_precision(run, row["variant"])
        if note:
            run["assumptions"].append(note)
        if run["precision"] is None:
            run["reason"] = f"precision {run['precision_published']!r} is not mapped"
        else:
            add_megatron_strategy(run)
            modules, note = mbridge_recompute(run)
            if modules and modules[0] == "block":
                run["strategy"].update({"recompute": "full", "recompute_num_layers": modules[1]})
                run["assumptions"].append(note)
            elif modules:
                run["strategy"].update({"recompute": "selective", "recompute_modules": modules})
                run["assumptions"].append(note)
        if row["model_note"] in ("tokendrop", "dropless"):
            run["assumptions"].append(f"{row['model_note']}: hetplan routes every token to its "
                                      "experts, balanced (the benchmarks force-balance them)")
        runs.append(run)
    return runs


# The LoRA of the fine-tuning rows: rank (dim) and target modules, with where they come from.
LORA = {
    "megatron-bridge": ({"rank": 32, "target_modules": ["linear_qkv"]},
                        "LoRA dim 32 on linear_qkv, as Megatron-Bridge's recipe sets it today "
                        "(perf_recipes/llama/h100/llama3.py llama3_70b_peft_8gpu_h100_fp8cs_config "
                        "at 067f987df03b: peft.target_modules, recipes/common.py's dim 32); the "
                        "release's own recipe may differ"),
    "nemo-24.07": ({"rank": 32, "target_modules": ["linear_qkv"]},
                   "LoRA adapter_dim 32 on attention_qkv: NeMo's fine-tuning config at the "
                   "table's commit (examples/nlp/language_modeling/tuning/conf/"
                   "megatron_gpt_finetuning_config.yaml at 8e3d65dcfe35: peft.lora_tuning); the "
                   "launcher's performance configs were not checked"),
}


def finish_megatron(run, task):
    """The model, cluster and the reasons a Megatron row cannot be expressed."""
    model, _, why = MODELS.get(run["model_published"], (None, False, None))
    if task.startswith("LoRA"):
        run["lora"], note = LORA[run["source"]]
        run["assumptions"].append(note)
        run["assumptions"].append("LoRA fine-tuning on packed sequences, predicted over the "
                                  "whole pack with a causal mask")
    if why:
        run["reason"] = why
        return
    if model is None:
        run["reason"] = f"no hetplan model for {run['model_published']!r}"
        return
    if run["gpu"] not in NODES:
        run["reason"] = f"no node preset for {run['gpu']}"
        return
    run["reason"] = check_layout(run)
    run["model"] = model
    run["cluster"] = f"{NODES[run['gpu']]}:{run['num_gpus'] // GPUS_PER_NODE}"
    if task.startswith("SFT"):
        run["assumptions"].append("SFT: full-parameter training on packed sequences, predicted "
                                  "as pre-training with a causal mask over the whole pack")


# Megatron-Bridge's performance recipes hold and reduce gradients in bf16: _perf_precision sets
# grad_reduce_in_fp32 = False for every precision (src/megatron/bridge/perf_recipes/_common.py at
# MBRIDGE_RECIPES; scripts/performance/utils/precision.py get_precision_config alike).
MBRIDGE_GRAD_REDUCE = ("gradients held and reduced in bf16, as Megatron-Bridge's performance "
                       "recipes set them (perf_recipes/_common.py _perf_precision at "
                       f"{MBRIDGE_RECIPES[:10]}: grad_reduce_in_fp32 = False)")


def add_megatron_strategy(run):
    moe = MODELS[run["model_published"]][1]
    run["strategy"] = megatron_strategy(run, moe)
    if run["source"] == "megatron-bridge":
        run["strategy"]["fp32_grad_reduce"] = False
        run["assumptions"].append(MBRIDGE_GRAD_REDUCE)
    if "lora" in run:
        run["strategy"]["lora"] = run["lora"]


def nemo_runs(pretrain=None, finetune=None):
    """NeMo 24.07's DGX-H100 FP8 rows, pre-training and fine-tuning; the targets are the final
    version's (8e3d65d), the earlier two are kept as not targeted."""
    runs = []
    for path, task, table in ((pretrain or os.path.join(DATA, NEMO_PRETRAIN), "Pre-Training",
                               "nemo-24.07"),
                              (finetune or os.path.join(DATA, NEMO_FINETUNE), None,
                               "nemo-24.07-ft")):
        for line, row in read_table(path, NEMO_COLUMNS):
            run = base_run("nemo-24.07", path, line, table)
            run.update({"release": f"24.07 ({row['version_commit'][:7]})",
                        "task": task or row["task"], "model_published": row["model"],
                        "model_note": "", "variant": "single", "gpu": row["gpu"],
                        "precision_published": row["precision"]})
            for c in ("num_gpus", "gbs", "mbs", "tp", "pp"):
                run[c] = number(row, c, path, line)
            run["seq_len"] = number(row, "seq_len" if task else "packed_seq_len", path, line)
            run["cp"] = number(row, "cp", path, line, 1) if task else 1
            run["vp"] = number(row, "vp", path, line, 1) if task else 1
            run["ep"], run["fsdp"] = 1, 0
            run["measured_tokens_per_s_per_gpu"] = float(number(row, "tokens_per_s_per_gpu",
                                                                path, line))
            if row["version_commit"] != NEMO_FINAL:
                run["target"] = False
                run["skip"] = (f"superseded version {row['version_commit'][:7]} (the targets use "
                               f"the final {NEMO_FINAL[:7]})")
            finish_megatron(run, task=run["task"])
            if not run["reason"]:
                if row["precision"] != "FP8":
                    run["reason"] = f"precision {row['precision']!r} is not mapped"
                else:
                    run["precision"] = "fp8-delayed"
                    run["assumptions"].append("NeMo 24.07 FP8: Transformer Engine's delayed "
                                              "scaling (its default recipe then)")
                    add_megatron_strategy(run)
            runs.append(run)
    return runs


def torchtitan_strategy(run, row, path, line):
    """torchtitan's strategy for a row: FSDP2 (ZeRO-3) over the fsdp ranks, TP with sequence
    parallelism, pipelines of torch.distributed.pipelining with pp micro-batches (9dec370's
    default pipeline_parallel_microbatches) and 2 stages a rank for the interleaved schedule,
    CP's all-gather rotation (its context_parallel_rotate_method default)."""
    local = run["local_batch"]
    dp = run["num_gpus"] // (run["tp"] * run["pp"] * run["cp"])
    schedule = {"": "1f1b", "1F1B": "1f1b", "Interleaved 1F1B": "interleaved"}.get(
        row["pp_schedule"])
    if schedule is None:
        raise ValueError(f"{path}:{line}: pp_schedule: expected 1F1B or Interleaved 1F1B, found "
                         f"{row['pp_schedule']!r}")
    ac = row["activation_checkpointing"]
    # torchtitan's "selective" of these tables is its per-op policy: the train configs of
    # 9dec370 set selective_ac_option = 'op' (train_configs/llama3_8b.toml).
    recompute = {"full": "full", "no": "none", "selective": "op"}.get(ac)
    if recompute is None:
        raise ValueError(f"{path}:{line}: activation_checkpointing: expected full, selective or "
                         f"no, found {ac!r}")
    # The December 2024 tables ran 9dec370, whose per-op policy differs from today's
    # (presets/frameworks/torchtitan-2024.yaml); the older rows recompute whole blocks or nothing,
    # which every release runs alike.
    framework = "torchtitan-2024" if "9dec370" in row["benchmark_period"] else "torchtitan"
    compiled = row["torch_compile"]
    if compiled == "":
        compiled = "yes"
        run["assumptions"].append("torch.compile not stated: on, as the 405B train config of "
                                  "the time sets (compile = true)")
    s = {"dp": dp, "tp": run["tp"], "pp": run["pp"], "cp": run["cp"], "micro_batch": run["mbs"],
         "global_batch": local * dp, "schedule": schedule,
         "chunks": 2 if schedule == "interleaved" else 1, "recompute": recompute, "zero": 3,
         "sequence_parallel": run["tp"] > 1,
         "precision": "fp8-current" if row["float8"] == "yes" else "bf16",
         "host_mode": "compiled" if compiled == "yes" else "eager",
         "tp_comm_overlap": row["async_tp"] == "yes", "framework": framework}
    if run["cp"] > 1:
        s["cp_comm"] = "all_gather"
    return s


def torchtitan_runs(path=None):
    """torchtitan's published Llama 3.1 runs on H100 (the targets) and its older A100 rows."""
    path = path or os.path.join(DATA, TORCHTITAN)
    runs = []
    for line, row in read_table(path, TORCHTITAN_COLUMNS):
        run = base_run("torchtitan", path, line)
        gpu = "H100" if row["gpu"].startswith("H100") else row["gpu"]
        run.update({"release": f"{row['source_commit'][:7]} {row['table']}", "task": "Pre-Training",
                    "model_published": row["model"], "model_note": "", "variant": "single",
                    "gpu": gpu, "precision_published": "float8" if row["float8"] == "yes"
                    else "bf16"})
        run["num_gpus"] = number(row, "num_gpus", path, line)
        run["pp"] = number(row, "pp", path, line, 1)
        run["cp"] = number(row, "cp", path, line, 1)
        run["fsdp"] = number(row, "fsdp", path, line, 0)
        run["tp"] = number(row, "tp", path, line, 1)
        if not row["tp"].strip() and run["fsdp"] and "TP" in row["parallelism_as_published"]:
            # "2D FSDP2 + TP (FSDP ranks 16)": TP over the ranks FSDP leaves.
            run["tp"] = run["num_gpus"] // (run["fsdp"] * run["pp"] * run["cp"])
            run["assumptions"].append(f"tp {run['tp']}: the {run['num_gpus']} GPUs over "
                                      f"{run['fsdp']} FSDP ranks")
        run["vp"] = 2 if row["pp_schedule"] == "Interleaved 1F1B" else 1
        run["ep"] = 1
        run["seq_len"] = number(row, "seq_len", path, line, 8192)
        run["local_batch"] = number(row, "local_batch_size", path, line)
        # torchtitan 9dec370 splits a pipeline's local batch into pp micro-batches (its
        # pipeline_parallel_microbatches default); without a pipeline the local batch is one.
        run["mbs"] = run["local_batch"] // run["pp"]
        dp = run["num_gpus"] // (run["tp"] * run["pp"] * run["cp"])
        run["gbs"] = number(row, "global_batch_size", path, line, run["local_batch"] * dp)
        measured = row["tokens_per_s_per_gpu"]
        run["measured_tokens_per_s_per_gpu"] = float(measured) if measured != "OOM" else None
        if gpu != "H100":
            run["target"], run["skip"] = False, f"{gpu} (the targets are torchtitan's H100 rows)"
        elif "SUPERSEDED" in row["benchmark_period"]:
            run["target"], run["skip"] = False, "superseded the next day (3faaa1a)"
        if run["measured_tokens_per_s_per_gpu"] is None:
            run["reason"] = "the run went out of memory: no throughput to compare"
        model = MODELS.get(row["model"], (None,))[0]
        if not run["reason"] and run["target"]:
            if model is None:
                run["reason"] = f"no hetplan model for {row['model']!r}"
            else:
                run["reason"] = check_layout(run)
                if run["fsdp"] and run["fsdp"] != dp:
                    run["reason"] = f"fsdp {run['fsdp']} is not dp {dp}"
        if not run["reason"] and run["target"]:
            run["model"] = model
            run["cluster"] = f"{NODES['H100']}:{run['num_gpus'] // GPUS_PER_NODE}"
            run["strategy"] = torchtitan_strategy(run, row, path, line)
            run["precision"] = run["strategy"]["precision"]
            run["assumptions"].append("Grand Teton H100 (96 GB HBM2e, 2.4 TB/s, 500 W) predicted "
                                      "as the DGX H100's (80 GB HBM3, 3.35 TB/s, 700 W): hetplan "
                                      "has no preset of that GPU")
            if run["pp"] > 1:
                run["assumptions"].append(f"{run['pp']} micro-batches of {run['mbs']}"
                                          " (torchtitan 9dec370: pipeline_parallel_microbatches "
                                          "defaults to the pipeline degree)")
        runs.append(run)
    return runs


def all_runs():
    return mbridge_runs() + nemo_runs() + torchtitan_runs()
