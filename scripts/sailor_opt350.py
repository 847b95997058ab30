#!/usr/bin/env python3
"""hetplan against Sailor's measured OPT-350M layers, and Sailor's plan against hetplan's search.

Sailor (SOSP'25) published per-layer forward times of OPT-350M (fp32, TF32 GEMMs where the GPU has
them; micro-batch 1, sequence 2048) on six GPU types at tensor widths 1-8
(examples/external/sailor/README.md). This script imports them (`hetplan import --format
sailor`), fits them with the shipped priors (`hetplan fit`) and prints each GPU's decoder layer and
embedding, measured against hetplan's prior with the tensor-parallel all-reduces it predicts. Then
it predicts Sailor's own plan for 32 A100-40GB + 96 V100-16GB (examples/strategies/
opt-350m-sailor-replicas.json) and searches the same problem (global batch 1024, uniform and
`--mixed-replicas`), once on the shipped priors and once with Sailor's V100 and A100 layers (its
forward-and-backward profiles at micro-batches 1-8, imported), on Sailor's Google Cloud network
(examples/clusters/sailor-gcp.yaml).

  python3 scripts/sailor_opt350.py --out-dir DIR [--framework F] [--json FILE]

Predictions run under --framework (default deepspeed: Sailor's runtime is a Megatron-DeepSpeed
fork, and its fp32 attention runs Megatron's unfused scale, mask and softmax).

Needs the hetplan binary (HETPLAN_BINARY, default build/cli/hetplan).
"""

import argparse
import json
import os
import re
import statistics

from compare_util import binary, run

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "examples", "external", "sailor", "OPT-350")
MODEL = os.path.join(ROOT, "examples", "models", "opt-350m.yaml")
CLUSTER = os.path.join(ROOT, "examples", "clusters", "sailor-gcp.yaml")
PLAN = os.path.join(ROOT, "examples", "strategies", "opt-350m-sailor-replicas.json")
GLOBAL_BATCH = 1024
# Sailor's GPU folders and the hetplan GPU each is (report/import/sailor_import.cpp); RTX-2080 is
# left out (the repository does not say which card it is), A100-80 is not on the cluster.
GPUS = {"V100-16": "v100", "A100-40": "a100-40gb", "GH-96": "gh200-96gb", "RTX-3090": "rtx-3090",
        "Titan-RTX": "titan-rtx"}
ON_THE_CLUSTER = ["V100-16", "A100-40"]


def import_all(out_dir):
    """One calibration file per GPU folder; returns {folder: path}."""
    files = {}
    for folder in GPUS:
        path = os.path.join(out_dir, f"sailor-{folder}.json")
        run([binary(), "import", "--format", "sailor", os.path.join(DATA, folder), "--out", path])
        files[folder] = path
    return files


def layer_rows(fit_quality):
    """The fit report's imported timings as rows: GPU, layer kind, tp, and the medians over the
    layer's entries of measured and predicted forward seconds and predicted tp all-reduces. Entries
    the cost model could not use (a node not known, the head) are left out."""
    rows = []
    for gpu in GPUS.values():
        groups = {}
        for t in fit_quality["gpus"][gpu]["layers"]:
            if t.get("source") != "imported" or t.get("unused"):
                continue
            kind = t["what"].split("(")[1].split(";")[0]
            tp = int(t["what"].rsplit("tp ", 1)[1])
            groups.setdefault((kind, tp), []).append(t)
        for (kind, tp), ts in sorted(groups.items()):
            med = lambda key: statistics.median(x[key][0] for x in ts)  # noqa: E731
            rows.append({"gpu": gpu, "layer": "block" if kind == "transformer" else kind,
                         "entries": len(ts), "tp": tp, "measured_s": med("measured_s"),
                         "predicted_s": med("predicted_s"), "tp_comm_s": med("tp_comm_s")})
    return rows


def print_rows(rows):
    print("| GPU | layer | tp | Sailor measured (median) | hetplan prior | of which tp all-reduces "
          "| error | ratio of the ops |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        ops = r["predicted_s"] - r["tp_comm_s"]
        ratio = (r["measured_s"] - r["tp_comm_s"]) / ops if ops > 0 else float("nan")
        print(f"| {r['gpu']} | {r['layer']} ({r['entries']}) | {r['tp']} | "
              f"{r['measured_s'] * 1e3:.3f} ms | {r['predicted_s'] * 1e3:.3f} ms | "
              f"{r['tp_comm_s'] * 1e3:.3f} ms | {(r['predicted_s'] / r['measured_s'] - 1):+.0%} | "
              f"{ratio:.2f} |")


# Sailor's Metis-format profiles of the same model (examples/external/sailor/metis/OPT-350/<GPU>/
# mbs<M>_tmp<T>.json): each layer's forward and backward together, per micro-batch and width. The
# node each GPU's tensor-parallel timings crossed, where the repository says (as the importer's);
# the others are compared at tp 1 on a one-GPU node of their own.
METIS = os.path.join(ROOT, "examples", "external", "sailor", "metis")
# The models of those profiles and the hetplan model files that describe them as Sailor ran them.
METIS_MODELS = {"OPT-350": MODEL,
                "GPT-Neo-2.7": os.path.join(ROOT, "examples", "models", "gpt-neo-2.7b-sailor.yaml")}
METIS_NODES = {"V100-16": "n1-v100x4", "A100-40": "a2-highgpu-4g", "GH-96": "gh200-superchip-4"}
METIS_TP1_ONLY = {"A100-80": "a100-80gb", "RTX-3090": "rtx-3090", "Titan-RTX": "titan-rtx"}


def metis_profiles(model, folder):
    """{(tp, micro_batch): (median decoder layer fwd+bwd seconds, median layer memory MiB)} of one
    model's profiles on one GPU folder ({} where there are none)."""
    out = {}
    path = os.path.join(METIS, model, folder)
    for name in sorted(os.listdir(path)) if os.path.isdir(path) else []:
        m = re.match(r"mbs(\d+)_tmp(\d+)\.json$", name)
        if not m:
            continue
        with open(os.path.join(path, name)) as f:
            d = json.load(f)
        layers = d["execution_time"]["layer_compute_total_ms"][1:-1]
        memory = d["execution_memory"]["layer_memory_total_mb"][1:-1]
        out[(int(m[2]), int(m[1]))] = (statistics.median(layers) / 1e3, statistics.median(memory))
    return out


def one_gpu_cluster(out_dir, gpu):
    """A cluster file of one node of one `gpu` (its links do not matter at tp 1)."""
    path = os.path.join(out_dir, f"one-{gpu}.yaml")
    with open(path, "w") as f:
        f.write(f"name: one-{gpu}\nnode_types:\n  box: {{gpu: {gpu}, gpus: 1, fabric: pcie, "
                "intra_GBps: 16, intra_latency_us: 5, network_gbit: 10, network_latency_us: 30, "
                "host_link_GBps: 16}\nnodes:\n  - {type: box, count: 1}\n")
    return path


def predicted_block(out_dir, model, cluster, tp, micro_batch, framework):
    """hetplan's prior for one decoder layer's forward and backward at (tp, micro-batch): its ops
    (tensor-parallel all-reduces included, before any correction) and the host's time for them."""
    strategy = os.path.join(out_dir, "layer-strategy.json")
    with open(strategy, "w") as f:
        json.dump({"dp": 1, "tp": tp, "pp": 1, "micro_batch": micro_batch,
                   "global_batch": micro_batch, "recompute": "none"}, f)
    out = os.path.join(out_dir, "layer-prediction.json")
    run([binary(), "predict", "--model", model, "--cluster", cluster, "--strategy", strategy,
         "--framework", framework, "--layer-ops", "--json", out])
    with open(out) as f:
        layers = json.load(f)["layer_ops"][0]["layers"]
    block = next(x for x in layers if x["name"] == "block0")
    comm = sum(op["seconds"] for op in block["ops"] if op["kind"] == "comm")
    return (block["forward_s"] + block["backward_input_s"] + block["backward_weight_s"], comm,
            block["host_s"])


def metis_rows(out_dir, framework):
    rows = []
    for model, model_file in METIS_MODELS.items():
        for folder in list(METIS_NODES) + list(METIS_TP1_ONLY):
            gpu = GPUS.get(folder) or METIS_TP1_ONLY[folder]
            node = METIS_NODES.get(folder)
            cluster = f"{node}:1" if node else one_gpu_cluster(out_dir, gpu)
            for (tp, mb), (measured, memory) in sorted(metis_profiles(model, folder).items()):
                if (not node and tp > 1) or mb > 8 or tp > 4:
                    continue
                predicted, comm, host = predicted_block(out_dir, model_file, cluster, tp, mb,
                                                        framework)
                rows.append({"model": model, "gpu": gpu, "tp": tp, "micro_batch": mb,
                             "measured_s": measured, "predicted_s": predicted, "tp_comm_s": comm,
                             "host_s": host, "measured_memory_mib": memory})
    return rows


def print_metis_rows(rows):
    print("| model | GPU | tp | micro-batch | Sailor measured F+B (median) | hetplan prior F+B+W | "
          "of which tp all-reduces | host's issue time | error |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['model']} | {r['gpu']} | {r['tp']} | {r['micro_batch']} | "
              f"{r['measured_s'] * 1e3:.2f} ms | "
              f"{r['predicted_s'] * 1e3:.2f} ms | {r['tp_comm_s'] * 1e3:.2f} ms | "
              f"{r['host_s'] * 1e3:.2f} ms | {(r['predicted_s'] / r['measured_s'] - 1):+.0%} |")


def plans(out_dir, name, calibration, framework):
    """Sailor's plan predicted, and the best uniform and mixed plans searched, under one set of
    calibration files."""
    cal = [a for c in calibration for a in ("--calibration", c)]
    fw = ["--framework", framework]
    pred = os.path.join(out_dir, f"sailor-plan-{name}.json")
    run([binary(), "predict", "--model", MODEL, "--cluster", CLUSTER, "--strategy", PLAN,
         "--json", pred] + cal + fw)
    with open(pred) as f:
        sailor_s = json.load(f)["predicted"]["iteration_s"]
    found = os.path.join(out_dir, f"search-{name}.json")
    run([binary(), "search", "--model", MODEL, "--cluster", CLUSTER, "--global-batch",
         str(GLOBAL_BATCH), "--threads", "2", "--mixed-replicas", "--json", found] + cal + fw)
    with open(found) as f:
        s = json.load(f)
    uniform = s["strategies"][0]
    mixed = s.get("mixed_replicas", {})
    return {"calibration": name, "sailor_plan_s": sailor_s,
            "sailor_plan_samples_per_s": GLOBAL_BATCH / sailor_s,
            "uniform_s": uniform["predicted"]["iteration_s"],
            "uniform_samples_per_s": uniform["predicted"]["samples_per_s"],
            "uniform": {k: uniform.get(k) for k in
                        ("dp", "tp", "pp", "micro_batch", "schedule", "recompute")},
            "mixed_gain_over_uniform": mixed.get("gain_over_uniform")}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out-dir", required=True, help="calibration files, fit and search outputs")
    ap.add_argument("--framework", default="deepspeed",
                    help="framework to predict and search under (default deepspeed: Sailor's "
                    "runtime is a Megatron-DeepSpeed fork)")
    ap.add_argument("--json", help="also write the comparison as JSON to FILE")
    args = ap.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    files = import_all(args.out_dir)
    quality = os.path.join(args.out_dir, "fit-quality.json")
    run([binary(), "fit"] + list(files.values()) +
        ["--out", os.path.join(args.out_dir, "profile.json"), "--json", quality])
    with open(quality) as f:
        rows = layer_rows(json.load(f))
    print_rows(rows)
    print()
    steps = metis_rows(args.out_dir, args.framework)
    print_metis_rows(steps)
    # Sailor's forward-and-backward profiles of the cluster's GPUs, at every micro-batch.
    steps_files = []
    for folder in ON_THE_CLUSTER:
        path = os.path.join(args.out_dir, f"sailor-metis-{folder}.json")
        run([binary(), "import", "--format", "sailor", os.path.join(METIS, "OPT-350", folder),
             "--out", path])
        steps_files.append(path)
    results = [plans(args.out_dir, "priors", [], args.framework),
               plans(args.out_dir, "sailor-layers", steps_files, args.framework)]
    print()
    for r in results:
        gain = r["mixed_gain_over_uniform"]
        print(f"{r['calibration']}: Sailor's plan {r['sailor_plan_s']:.3f} s "
              f"({r['sailor_plan_samples_per_s']:.1f} samples/s), best uniform "
              f"{r['uniform_s']:.3f} s ({r['uniform_samples_per_s']:.1f} samples/s: "
              f"{r['uniform']}), best mixed "
              f"{'n/a' if gain is None else f'{gain:+.1%}'} against it")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"layers": rows, "layer_steps": steps, "plans": results}, f, indent=1)


if __name__ == "__main__":
    main()
