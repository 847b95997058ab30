#!/usr/bin/env python3
"""hetplan's predictions against the iteration times AMP's authors measured on a mixed cluster.

AMP (NeurIPS 2022) ran 53 strategies for GPT-2 (GPT-2 medium's shape, vocabulary 52256, global
batch 32) on three p3.8xlarge (V100) and one g4dn.12xlarge (T4) under DeepSpeed and Megatron-LM
v1.1.5, and logged each one's measured seconds per iteration beside its own cost model's
prediction (examples/external/amp/README.md, het_cluster/trials.csv). This script turns those
trials into hetplan strategies (the same degrees, micro-batch, layer partition and devices) and a
measurements file, predicts each with `hetplan predict`, builds `hetplan report` (HTML and JSON),
and prints hetplan's errors beside AMP's own on the same trials.

  python3 scripts/amp_het_cluster.py --out-dir DIR [--calibration FILE]... [--json FILE]

--calibration adds calibration files to the shipped ones (e.g. AMP's imported per-layer times:
`hetplan import --format amp examples/external/amp/known_cost/gpt2_P3_*.npy --out v100.json`).
Needs the hetplan binary (HETPLAN_BINARY, default build/cli/hetplan). Exit status 2 for bad input.
"""

import csv
import json
import math
import os
import sys

from compare_util import (arguments, errors, predict, ranks,  # noqa: F401 (ranks: its tests)
                          spearman, write_report)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "examples", "external", "amp", "het_cluster")
CLUSTER = "p3.8xlarge:3,g4dn.12xlarge:1"  # AMP's nodes 0-2 and 3, in that order
MODEL_FILE = os.path.join(DATA, "amp-gpt2.yaml")
MODEL_NAME = "amp-gpt2"
GLOBAL_BATCH = 32
FRAMEWORK = "deepspeed"

# AMP's gpt2 layer list (30 entries): 0 embedding, 1 no-op, 2-25 the blocks, 26-27 no-ops,
# 28 the output embedding (hetplan's LM head), 29 no-op. Entries that do work, and the hetplan
# layer each belongs to.
WORK_ENTRIES = [0] + list(range(2, 26)) + [28]


def hetplan_layer(entry):
    if entry <= 1:
        return 0
    return entry - 1 if entry <= 25 else 25


def strategy_of(row):
    """The hetplan strategy of one trial, or (None, reason) when hetplan cannot express it."""
    mb, mp, dp, pp = (int(row[k]) for k in ("micro_batch", "mp", "dp", "pp"))
    bounds = [int(x) for x in row["partition"].split()]
    if len(bounds) != pp + 1 or bounds[0] != 0 or bounds[-1] != 30:
        raise ValueError(f"trial {row['trial']}: partition {bounds} does not tile 30 entries "
                         f"in {pp} stages")
    per_stage = dp * mp
    stages = []
    for j in range(pp):
        work = [e for e in range(bounds[j], bounds[j + 1]) if e in WORK_ENTRIES]
        if not work:
            return None, (f"stage {j} holds only AMP's no-op entries "
                          f"{list(range(bounds[j], bounds[j + 1]))}: hetplan stages hold layers")
        stages.append({"layers": [hetplan_layer(work[0]), hetplan_layer(work[-1])],
                       "devices": list(range(j * per_stage, (j + 1) * per_stage))})
    # DeepSpeed's pipeline engine with Megatron-LM v1.1.5's model (presets/frameworks/
    # deepspeed.yaml: unfused attention, no gradient-accumulation fusion, gradients reduced after
    # the pipeline flush); AMP's launch script sets --fp32-allreduce.
    return {"dp": dp, "tp": mp, "pp": pp, "micro_batch": mb, "global_batch": GLOBAL_BATCH,
            "schedule": "1f1b", "recompute": "none", "zero": 0, "sequence_parallel": False,
            "framework": FRAMEWORK, "fp32_grad_reduce": True, "stages": stages}, ""


def read_trials(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    for line, r in enumerate(rows, start=2):
        for key in ("trial", "micro_batch", "mp", "dp", "pp", "partition", "amp_predicted_s",
                    "measured_s"):
            if not r.get(key):
                raise ValueError(f"{path}:{line}: missing {key}")
        r["line"] = line
        r["measured"] = float(r["measured_s"])  # "inf": the run produced no time
        r["amp_predicted"] = float(r["amp_predicted_s"])
    return rows


def fastest(rows, key):
    """The trial of the row with the least `key`, or None."""
    return min(rows, key=lambda r: r[key])["trial"] if rows else None


def main():
    args, trials = arguments(__doc__, "strategies, predictions, measurements, report", "--trials",
                             os.path.join(DATA, "trials.csv"), read_trials)
    os.makedirs(os.path.join(args.out_dir, "strategies"), exist_ok=True)
    os.makedirs(os.path.join(args.out_dir, "predictions"), exist_ok=True)

    measurements, predictions, rows, skipped = [], [], [], []
    for t in trials:
        strategy, why = strategy_of(t)
        if strategy is None:
            skipped.append({"trial": int(t["trial"]), "measured_s": t["measured"], "why": why})
            continue
        name = f"trial{int(t['trial']):02d}"
        spath = os.path.join(args.out_dir, "strategies", name + ".json")
        ppath = os.path.join(args.out_dir, "predictions", name + ".json")
        predicted = predict(MODEL_FILE, CLUSTER, strategy, spath, ppath, args.calibration)
        predictions.append(ppath)
        m = {"model": MODEL_NAME, "cluster": CLUSTER, "strategy": strategy,
             "source": "imported:amp",
             "origin": f"{os.path.relpath(args.table, ROOT)}:{t['line']}"}
        if math.isfinite(t["measured"]):
            m["iteration_s"] = t["measured"]
        else:
            m["error"] = "AMP's run produced no iteration time (logged as inf)"
        measurements.append(m)
        rows.append({"trial": int(t["trial"]), "strategy": strategy, "measured_s": t["measured"],
                     "amp_predicted_s": t["amp_predicted"],
                     "hetplan_predicted_s": predicted["iteration_s"],
                     "hetplan_feasible": predicted["feasible"],
                     "hetplan_reason": predicted.get("reason", "")})

    write_report(args.out_dir,
                 {"gpu_type": "v100+t4", "framework": "deepspeed",
                  "inputs": [os.path.relpath(args.table, ROOT)],
                  "notes": "AMP's heterogeneous-cluster trials (NeurIPS 2022), "
                           "examples/external/amp/README.md"},
                 measurements, predictions, args.calibration,
                 "hetplan against AMP's measured heterogeneous-cluster trials")

    timed = [r for r in rows if math.isfinite(r["measured_s"]) and r["hetplan_feasible"]]
    summary = {
        "trials": len(trials), "compared": len(timed), "skipped": skipped,
        "failed_runs": [r["trial"] for r in rows if not math.isfinite(r["measured_s"])],
        "hetplan": errors([r["hetplan_predicted_s"] for r in timed],
                          [r["measured_s"] for r in timed]),
        "amp": errors([r["amp_predicted_s"] for r in timed], [r["measured_s"] for r in timed]),
        "best_measured": fastest(timed, "measured_s"),
        "best_by_hetplan": fastest(timed, "hetplan_predicted_s"),
        "best_by_amp": fastest(timed, "amp_predicted_s"),
        "rows": rows,
    }
    print(f"{'trial':>5} {'mb':>3} {'tp':>3} {'dp':>3} {'pp':>3} {'measured':>9} {'hetplan':>9} "
          f"{'error':>7} {'AMP':>8} {'error':>7}")
    for r in rows:
        s = r["strategy"]
        meas = r["measured_s"]
        het = r["hetplan_predicted_s"] if r["hetplan_feasible"] else float("nan")
        err = lambda p: (f"{100 * (p / meas - 1):+6.0f}%"
                         if math.isfinite(meas) and math.isfinite(p) else "      -")
        print(f"{r['trial']:>5} {s['micro_batch']:>3} {s['tp']:>3} {s['dp']:>3} {s['pp']:>3} "
              f"{meas:>8.2f}s {het:>8.2f}s {err(het)} {r['amp_predicted_s']:>7.2f}s "
              f"{err(r['amp_predicted_s'])}"
              + ("" if r["hetplan_feasible"] else f"  hetplan: {r['hetplan_reason']}"))
    for name in ("hetplan", "amp"):
        e = summary[name]
        print(f"{name:>8}: {e['count']} trials, median |error| {100 * e['median_ape']:.1f}%, "
              f"p90 {100 * e['p90_ape']:.1f}%, "
              f"Spearman (throughput) {e['spearman_throughput']:.3f}")
    print(f"fastest measured: trial {summary['best_measured']}; fastest by hetplan: trial "
          f"{summary['best_by_hetplan']}; by AMP: trial {summary['best_by_amp']}")
    for s in skipped:
        print(f"trial {s['trial']} not compared: {s['why']} (measured {s['measured_s']})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
