#!/usr/bin/env python3
"""hetplan's predictions against Megatron-LM's published weak-scaling runs on Selene (A100).

Narayanan et al. (SC'21, "Efficient Large-Scale Language Model Training on GPU Clusters Using
Megatron-LM", Table 1) trained ten GPT models of 1.7B to 1T parameters on 32 to 3072 A100 80 GB
GPUs (DGX A100 nodes, 8 x 200 Gbit/s InfiniBand each) and published the achieved teraFLOP/s per
GPU, counting the FLOPs of their equation (3) (examples/external/megatron/README.md). This script
turns each run into a hetplan model, cluster and strategy, derives the measured seconds per
iteration from the published throughput, predicts the run with `hetplan predict`, builds `hetplan
report` (HTML and JSON) from a measurements file it writes, and prints the errors.

  python3 scripts/megatron_weak_scaling.py --out-dir DIR [--calibration FILE]... [--json FILE]

Table 1 gives the model, tp, pp, the GPU count and the global batch, not the micro-batch size nor
whether a run used the interleaved schedule: those are the authors' tuning, so every micro-batch
of MICRO_BATCHES that divides a replica's batch is predicted with 1F1B and, with a pipeline, the
interleaved schedule (2, 3 or 4 chunks per rank, where the layers divide evenly among them, as
Megatron-LM of the time required), and the fastest
prediction is compared (the spread is printed and kept). Everything else is what the Megatron-LM
of 2021 ran (the README): fp16, full recomputation, no ZeRO, no sequence parallelism, unfused
attention, no gradient-accumulation fusion, gradients reduced after the backward.

--calibration adds calibration files to the shipped ones (the A100's datasheet priors, unless an
A100 calibration is given). Needs the hetplan binary (HETPLAN_BINARY, default build/cli/hetplan).
Exit status 2 for bad input.
"""

import csv
import json
import os
import sys

from compare_util import arguments, errors, percentile, predict, write_report

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "examples", "external", "megatron")
SEQ_LEN = 2048
VOCAB = 51200
MICRO_BATCHES = (1, 2, 4, 8)
CHUNKS = (2, 3, 4)  # model chunks per pipeline rank of the interleaved schedule
# Megatron-LM as the paper's runs used it (presets/frameworks/megatron-lm-2021.yaml): fp16 with
# fp16 gradients reduced after the backward, fused kernels, unfused attention, no gradient-
# accumulation fusion. The strategies leave those switches to it.
FRAMEWORK = "megatron-lm-2021"
GPUS_PER_NODE = 8
COLUMNS = ("params_billion", "heads", "hidden", "layers", "tp", "pp", "gpus", "batch",
           "tflops_per_gpu", "percent_of_peak", "aggregate_pflops")


def read_runs(path):
    """The rows of weak_scaling.csv, numbers parsed, each with its line; ValueError names the
    file, line and column of what is wrong."""
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{path}: no column {missing[0]} (expected {', '.join(COLUMNS)})")
        runs = []
        for line, row in enumerate(reader, start=2):
            r = {"line": line}
            for c in COLUMNS:
                try:
                    r[c] = float(row[c]) if c in ("params_billion", "tflops_per_gpu",
                                                  "aggregate_pflops") else int(row[c])
                except (TypeError, ValueError):
                    raise ValueError(f"{path}:{line}: {c}: expected a number, found "
                                     f"{row[c]!r}") from None
            if r["gpus"] % (r["tp"] * r["pp"]) or r["gpus"] % GPUS_PER_NODE:
                raise ValueError(f"{path}:{line}: gpus: {r['gpus']} is not a multiple of tp x pp "
                                 f"= {r['tp'] * r['pp']} and of {GPUS_PER_NODE} per node")
            if r["batch"] % (r["gpus"] // (r["tp"] * r["pp"])):
                raise ValueError(f"{path}:{line}: batch: {r['batch']} does not divide over "
                                 f"{r['gpus'] // (r['tp'] * r['pp'])} data-parallel replicas")
            runs.append(r)
    return runs


CONFIG_COLUMNS = ("params_billion", "micro_batch", "layers_per_virtual_stage", "ddp_impl")


def read_configs(path, runs):
    """sc21_configs.csv: the micro-batch, virtual stages and data-parallel implementation each
    Table 1 run was launched with (examples/sc21/run_table_1.sh), by params_billion; ValueError
    names the file, line and column of what is wrong, and a run with no configuration."""
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in CONFIG_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{path}: no column {missing[0]} (expected "
                             f"{', '.join(CONFIG_COLUMNS)})")
        configs = {}
        for line, row in enumerate(reader, start=2):
            c = {"line": line}
            try:
                c["params_billion"] = float(row["params_billion"])
                c["micro_batch"] = int(row["micro_batch"])
                c["layers_per_virtual_stage"] = int(row["layers_per_virtual_stage"])
            except (TypeError, ValueError):
                bad = next(k for k in CONFIG_COLUMNS[:3] if not _is_number(row[k]))
                raise ValueError(f"{path}:{line}: {bad}: expected a number, found "
                                 f"{row[bad]!r}") from None
            if row["ddp_impl"] not in ("local", "torch"):
                raise ValueError(f"{path}:{line}: ddp_impl: expected local or torch, found "
                                 f"{row['ddp_impl']!r}")
            c["ddp_impl"] = row["ddp_impl"]
            configs[c["params_billion"]] = c
    for r in runs:
        c = configs.get(r["params_billion"])
        if c is None:
            raise ValueError(f"{path}: no configuration for the {r['params_billion']:g}B run")
        lpvs = c["layers_per_virtual_stage"]
        if lpvs and (r["layers"] % r["pp"] or (r["layers"] // r["pp"]) % lpvs):
            raise ValueError(f"{path}:{c['line']}: layers_per_virtual_stage: {lpvs} does not "
                             f"divide the {r['layers'] // r['pp']} layers of a pipeline rank")
        dp = r["gpus"] // (r["tp"] * r["pp"])
        if (r["batch"] // dp) % c["micro_batch"]:
            raise ValueError(f"{path}:{c['line']}: micro_batch: {c['micro_batch']} does not "
                             f"divide the {r['batch'] // dp} sequences of a replica")
    return configs


def _is_number(text):
    try:
        float(text)
        return True
    except (TypeError, ValueError):
        return False


def published_strategy(run_row, config):
    """The strategy a run was launched with: its micro-batch, the interleaved schedule with
    layers / (pp x layers per virtual stage) chunks where it set virtual stages, and PyTorch's DDP
    (which overlaps the gradient reduction with the backward) where --DDP-impl torch."""
    tp, pp = run_row["tp"], run_row["pp"]
    lpvs = config["layers_per_virtual_stage"]
    chunks = run_row["layers"] // (pp * lpvs) if lpvs else 1
    return {"dp": run_row["gpus"] // (tp * pp), "tp": tp, "pp": pp,
            "micro_batch": config["micro_batch"], "global_batch": run_row["batch"],
            "schedule": "interleaved" if chunks > 1 else "1f1b", "chunks": chunks,
            "recompute": "full", "zero": 0, "sequence_parallel": False,
            "overlap_grad_reduce": config["ddp_impl"] == "torch", "framework": FRAMEWORK}


def iteration_flops(run_row):
    """FLOPs of one iteration as the paper counts them, its equation (3): forward, backward and
    the recomputed forward of every block, and the LM head:
    96 B s l h^2 (1 + s / 6h + V / 16lh)."""
    b, l, h = run_row["batch"], run_row["layers"], run_row["hidden"]
    return 96 * b * SEQ_LEN * l * h * h * (1 + SEQ_LEN / (6 * h) + VOCAB / (16 * l * h))


def measured_seconds(run_row):
    """Seconds per iteration from the published teraFLOP/s per GPU."""
    return iteration_flops(run_row) / (run_row["gpus"] * run_row["tflops_per_gpu"] * 1e12)


def model_name(run_row):
    return f"megatron-gpt-{run_row['params_billion']:g}b"


def model_yaml(run_row):
    return (f"name: {model_name(run_row)}\n"
            f"description: GPT of Megatron-LM's weak-scaling runs, {run_row['params_billion']:g}B "
            f"parameters\n"
            f"source: Narayanan et al. 2021 (SC'21), Table 1 (examples/external/megatron)\n"
            f"seq_len: {SEQ_LEN}\nvocab: {VOCAB}\ndtype: fp16\ntie_embeddings: true\n"
            f"embedding: {{max_positions: {SEQ_LEN}, dropout: 0.1}}\n"
            f"block: {{hidden: {run_row['hidden']}, heads: {run_row['heads']}, activation: gelu, "
            f"norm: layernorm, bias: true, dropout: 0.1}}\n"
            f"layers: {run_row['layers']}\nhead: {{final_norm: layernorm}}\n")


def cluster_yaml(nodes):
    # Selene's DGX A100 nodes (the README): 8 A100 80 GB on NVSwitch (NVLink 600 GB/s both
    # directions per GPU: 300 each way), 8 x 200 Gbit/s HDR InfiniBand for the application, PCIe
    # Gen4 x16 host links. Latencies: the presets' assumed orders of magnitude.
    return (f"name: selene-{nodes}\n"
            "node_types:\n"
            "  dgx-a100-80gb: {gpu: a100-80gb, gpus: 8, fabric: nvswitch, intra_GBps: 300,\n"
            "                  intra_latency_us: 2, network_gbit: 1600, network_latency_us: 5,\n"
            "                  host_link_GBps: 32}\n"
            f"nodes:\n  - {{type: dgx-a100-80gb, count: {nodes}}}\n")


def candidates(run_row):
    """The strategies Table 1 leaves open: micro-batch and schedule."""
    tp, pp = run_row["tp"], run_row["pp"]
    dp = run_row["gpus"] // (tp * pp)
    out = []
    for mb in MICRO_BATCHES:
        if (run_row["batch"] // dp) % mb:
            continue
        schedules = [("1f1b", 1)]
        if pp > 1:
            schedules += [("interleaved", c) for c in CHUNKS if run_row["layers"] % (c * pp) == 0]
        for schedule, chunks in schedules:
            out.append({"dp": dp, "tp": tp, "pp": pp, "micro_batch": mb,
                        "global_batch": run_row["batch"], "schedule": schedule,
                        "chunks": chunks, "recompute": "full", "zero": 0,
                        "sequence_parallel": False, "framework": FRAMEWORK})
    return out


def label(strategy):
    chunks = f"x{strategy['chunks']}" if strategy["chunks"] > 1 else ""
    return f"mb{strategy['micro_batch']} {strategy['schedule']}{chunks}"


def main():
    args, runs = arguments(__doc__,
                           "models, clusters, strategies, predictions, measurements, report",
                           "--runs", os.path.join(DATA, "weak_scaling.csv"), read_runs)
    configs = read_configs(os.path.join(DATA, "sc21_configs.csv"), runs)
    for sub in ("models", "clusters", "strategies", "predictions"):
        os.makedirs(os.path.join(args.out_dir, sub), exist_ok=True)

    measurements, predictions, rows = [], [], []
    for r in runs:
        name = model_name(r)
        model_path = os.path.join(args.out_dir, "models", name + ".yaml")
        nodes = r["gpus"] // GPUS_PER_NODE
        cluster_path = os.path.join(args.out_dir, "clusters", f"selene-{nodes}.yaml")
        with open(model_path, "w") as f:
            f.write(model_yaml(r))
        with open(cluster_path, "w") as f:
            f.write(cluster_yaml(nodes))

        def run(strategy, tag):
            spath = os.path.join(args.out_dir, "strategies", f"{name}-{tag}.json")
            ppath = os.path.join(args.out_dir, "predictions", f"{name}-{tag}.json")
            predicted = predict(model_path, cluster_path, strategy, spath, ppath, args.calibration)
            return {"strategy": strategy, "prediction": ppath, "feasible": predicted["feasible"],
                    "iteration_s": predicted["iteration_s"], "reason": predicted.get("reason", "")}

        config = configs[r["params_billion"]]
        published = run(published_strategy(r, config), "published")
        tried = [run(s, i) for i, s in enumerate(candidates(r))]
        measured = measured_seconds(r)
        m = {"model": name, "cluster": f"selene-{nodes}", "strategy": published["strategy"],
             "iteration_s": measured, "source": "imported:megatron-lm-paper",
             "origin": f"{os.path.relpath(args.table, ROOT)}:{r['line']}",
             "notes": f"{r['tflops_per_gpu']:g} teraFLOP/s per GPU published (Narayanan et al. "
                      f"2021, Table 1), seconds by its equation (3); launched as "
                      f"examples/sc21/run_table_1.sh gives it (sc21_configs.csv:{config['line']})"}
        measurements.append(m)
        ok = published["feasible"]
        if ok:
            predictions.append(published["prediction"])
        rows.append({"model": name, "params_billion": r["params_billion"], "gpus": r["gpus"],
                     "tp": r["tp"], "pp": r["pp"], "dp": r["gpus"] // (r["tp"] * r["pp"]),
                     "batch": r["batch"], "measured_s": measured,
                     "published_tflops_per_gpu": r["tflops_per_gpu"],
                     "published": label(published["strategy"]),
                     "ddp_impl": config["ddp_impl"],
                     "predicted_s": published["iteration_s"] if ok else None,
                     "reason": published["reason"],
                     "predicted_tflops_per_gpu":
                         iteration_flops(r) / (r["gpus"] * published["iteration_s"] * 1e12)
                         if ok else None,
                     "tried": [{"strategy": label(t["strategy"]), "feasible": t["feasible"],
                                "iteration_s": t["iteration_s"], "reason": t["reason"]}
                               for t in tried]})

    write_report(args.out_dir,
                 {"gpu_type": "a100-80gb", "framework": "megatron-lm",
                  "inputs": [os.path.relpath(args.table, ROOT)],
                  "notes": "Megatron-LM's weak-scaling runs on Selene (Narayanan et al. 2021, "
                           "Table 1), examples/external/megatron/README.md"},
                 measurements, predictions, args.calibration,
                 "hetplan against Megatron-LM's published weak-scaling runs")

    compared = [row for row in rows if row["predicted_s"] is not None]
    summary = {"runs": len(runs), "compared": len(compared),
               "hetplan": errors([row["predicted_s"] for row in compared],
                                 [row["measured_s"] for row in compared]),
               "median_signed_error": percentile(sorted(row["predicted_s"] / row["measured_s"] - 1
                                                        for row in compared), 0.5)
               if compared else None,
               "rows": rows}
    print(f"{'model':>20} {'GPUs':>5} {'tp':>3} {'pp':>3} {'dp':>3} {'batch':>5} "
          f"{'published':>10} {'TF/GPU':>6} {'hetplan':>9} {'TF/GPU':>6} {'error':>7}  "
          f"as launched (other micro-batches and schedules)")
    for row in rows:
        feasible = [t["iteration_s"] for t in row["tried"] if t["feasible"]]
        run_columns = (f"{row['model']:>20} {row['gpus']:>5} {row['tp']:>3} {row['pp']:>3} "
                       f"{row['dp']:>3} {row['batch']:>5} {row['measured_s']:>9.2f}s")
        if row["predicted_s"] is None:
            print(f"{run_columns}  hetplan: {row['reason']}")
            continue
        others = f"{min(feasible):.2f}-{max(feasible):.2f} s over {len(feasible)}" \
            if feasible else "none feasible"
        print(f"{run_columns} {row['published_tflops_per_gpu']:>6.0f} "
              f"{row['predicted_s']:>8.2f}s {row['predicted_tflops_per_gpu']:>6.0f} "
              f"{100 * (row['predicted_s'] / row['measured_s'] - 1):+6.1f}%  {row['published']} "
              f"DDP {row['ddp_impl']} ({others})")
    e = summary["hetplan"]
    if compared:
        print(f"hetplan: {e['count']} runs, median |error| {100 * e['median_ape']:.1f}%, "
              f"p90 {100 * e['p90_ape']:.1f}%, median signed "
              f"{100 * summary['median_signed_error']:+.1f}%, Spearman (throughput) "
              f"{e['spearman_throughput']:.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
