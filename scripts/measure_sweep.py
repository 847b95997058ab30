#!/usr/bin/env python3
"""Predicted against measured on one GPU: for a list of (model, sequence, micro-batch, global
batch, recomputation) configurations, runs `hetplan predict` and the PyTorch reference harness
(one process for all of them) and prints the errors. Writes into OUT:

  profile.json, fit-quality.json   hetplan fit of --calibration files (when given)
  models/, strategies/             the inputs of every configuration
  predictions/NN.json              hetplan predict --json (with the calibration, if any)
  predictions-datasheet/NN.json    hetplan predict --json with the shipped priors only
  plan.json, measurements.json     the harness's plan and its measurements file
  comparison.json                  per configuration and summary errors

With --measurements FILE (an earlier sweep's measurements.json, of the same configurations) the
predictions are made again, e.g. from a newer calibration or build, and compared with FILE
(copied into OUT): no harness runs, so no GPU or PyTorch is needed.

Target (issue 7): median absolute error of iteration time and of peak memory within 10%.
Peak memory is compared as the allocator sees it: hetplan's prediction less its `reserve` term
(CUDA context and library buffers) against torch.cuda.max_memory_allocated (docs/measure.md).
Standard library only.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

sys.dont_write_bytecode = True
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference import clocks  # noqa: E402  (standard library only, as this script)
# The cluster the predictions are made for (the strategies use one GPU of it): one H100 SXM of a
# p5 node unless --cluster (or HETPLAN_SESSION_CLUSTER, which scripts/gpu_session.sh sets from the
# GPU it finds) says otherwise.
DEFAULT_CLUSTER = os.environ.get("HETPLAN_SESSION_CLUSTER") or "p5.48xlarge:1"

# (model, sequence, micro-batch, global batch, recomputation). GPT-style presets of three sizes,
# two LLaMA-style models, micro-batches 1-16, sequences 512-2048, recomputation off and full, and
# one configuration predicted not to fit (its measured out-of-memory is the check).
CONFIGS = [
    ("gpt2-medium", 1024, 1, 2, "none"),
    ("gpt2-medium", 1024, 4, 8, "none"),
    ("gpt2-medium", 1024, 16, 32, "none"),
    ("gpt2-medium", 1024, 8, 16, "full"),
    ("gpt2-medium", 512, 8, 32, "none"),
    ("gpt3-1.3b", 2048, 1, 2, "none"),
    ("gpt3-1.3b", 2048, 4, 8, "none"),
    ("gpt3-1.3b", 2048, 4, 8, "full"),
    ("gpt3-1.3b", 1024, 8, 16, "none"),
    ("gpt3-2.7b", 2048, 1, 2, "none"),
    ("gpt3-2.7b", 2048, 2, 4, "none"),
    ("gpt3-2.7b", 2048, 4, 8, "full"),
    ("gpt3-2.7b", 1024, 4, 8, "none"),
    ("gpt3-2.7b", 2048, 16, 16, "none"),
    ("examples/models/llama-370m.yaml", 2048, 2, 4, "none"),
    ("examples/models/llama-370m.yaml", 2048, 8, 16, "none"),
    ("examples/models/llama-370m.yaml", 2048, 8, 16, "full"),
    ("examples/models/tinyllama-1.1b.yaml", 2048, 2, 4, "none"),
    ("examples/models/tinyllama-1.1b.yaml", 2048, 4, 8, "none"),
    ("examples/models/tinyllama-1.1b.yaml", 2048, 4, 8, "full"),
]
QUICK = [0, 1, 3, 6, 7, 10, 13, 15, 18]


# hetplan finds the shipped priors and the harness through its build-time source path unless told;
# the sweep may run from a copy of the repository elsewhere (a GPU machine).
ENV = dict(os.environ)
ENV.setdefault("HETPLAN_CALIBRATION_DIR", os.path.join(ROOT, "calibration_data"))
ENV.setdefault("HETPLAN_SCRIPTS_DIR", os.path.join(ROOT, "scripts"))


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, text=True, env=ENV, **kw)


def hetplan_json(hetplan, args):
    return json.loads(run([hetplan] + args, capture_output=True).stdout)


def hetplan_version(hetplan):
    """The version `hetplan --version` prints ("hetplan 0.1.0" -> "0.1.0")."""
    return run([hetplan, "--version"], capture_output=True).stdout.split()[-1]


def prepare(a, configs):
    """Model infos, strategies and predictions; returns the plan entries."""
    for sub in ("models", "strategies", "predictions", "predictions-datasheet"):
        os.makedirs(os.path.join(a.out, sub), exist_ok=True)
    profile = None
    if a.calibration:
        profile = os.path.join(a.out, "profile.json")
        print(f"fitting {' '.join(a.calibration)} -> {profile}", flush=True)
        run([a.hetplan, "fit", *a.calibration, "--out", profile, "--json",
             os.path.join(a.out, "fit-quality.json")])
    entries = []
    for i, (model, seq, mb, gb, recompute) in enumerate(configs):
        path = os.path.join(ROOT, model) if model.endswith(".yaml") else model
        info = hetplan_json(a.hetplan, ["model-info", "--model", path, "--seq-len", str(seq),
                                        "--json"])
        info_file = f"models/{info['name']}_s{seq}.json"
        with open(os.path.join(a.out, info_file), "w") as f:
            json.dump(info, f)
        strategy = {"dp": 1, "tp": 1, "pp": 1, "micro_batch": mb, "global_batch": gb,
                    "schedule": "1f1b", "recompute": recompute, "zero": 0,
                    # The harness adds gradients into fp32 main gradients with kernels of their
                    # own (eager PyTorch cannot fuse them into the weight-gradient GEMMs).
                    "grad_accumulation_fusion": False}
        strategy_file = f"strategies/{i:02d}.json"
        with open(os.path.join(a.out, strategy_file), "w") as f:
            json.dump(strategy, f)
        for sub, calib in (("predictions", profile), ("predictions-datasheet", None)):
            if sub == "predictions" and profile is None:
                continue
            cmd = [a.hetplan, "predict", "--model", path, "--seq-len", str(seq), "--cluster",
                   a.cluster, "--strategy", os.path.join(a.out, strategy_file), "--json",
                   os.path.join(a.out, sub, f"{i:02d}.json")]
            if a.framework:
                cmd += ["--framework", a.framework]
            if calib:
                cmd += ["--calibration", calib]
            else:
                # The priors alone: the shipped folder also holds measured H100 data (a
                # profile since 2026-11-23), which would make these the measured predictions.
                cmd += ["--no-default-calibration", "--calibration",
                        os.path.join(ENV["HETPLAN_CALIBRATION_DIR"], "datasheet")]
            run(cmd, capture_output=True)
        label = f"{info['name']} s{seq} mb{mb} gb{gb} {recompute}"
        entries.append({"model_info": info_file, "model": info["name"],
                        "strategy": strategy_file, "cluster": a.cluster, "label": label})
    if profile is None:  # the datasheet predictions are the predictions
        for i in range(len(configs)):
            src = os.path.join(a.out, "predictions-datasheet", f"{i:02d}.json")
            with open(src) as f, open(os.path.join(a.out, "predictions", f"{i:02d}.json"), "w") as g:
                g.write(f.read())
    return entries


def load_measurements(path, entries):
    """The measurements of FILE, checked to be of the sweep's configurations in its order."""
    with open(path) as f:
        doc = json.load(f)
    measured = doc.get("measurements") if isinstance(doc, dict) else None
    if not isinstance(measured, list):
        raise ValueError(f"{path}: no \"measurements\" list (a hetplan measurements file, "
                         "measurements.json of a sweep, was expected)")
    if len(measured) != len(entries):
        raise ValueError(f"{path}: {len(measured)} measurements where the sweep has "
                         f"{len(entries)} configurations (--quick runs {len(QUICK)}, the full "
                         f"sweep {len(CONFIGS)})")
    for i, (entry, m) in enumerate(zip(entries, measured)):
        with open(entry["strategy_path"]) as f:
            strategy = json.load(f)
        keys = ("micro_batch", "global_batch", "recompute")
        got = (m.get("model"),) + tuple(m.get("strategy", {}).get(k) for k in keys)
        want = (entry["model"],) + tuple(strategy[k] for k in keys)
        if got != want:
            raise ValueError(f"{path}: measurements[{i}] is model, micro_batch, global_batch, "
                             f"recompute {got}, where the sweep's configuration {i} is {want} "
                             f"({entry['label']})")
    return measured


def predicted(path):
    with open(path) as f:
        p = json.load(f)["predicted"]
    mem = p["stages"][0]["memory"] if p.get("stages") else {}
    return {"feasible": p["feasible"], "reason": p.get("reason", ""),
            "iteration_s": p["iteration_s"],
            "allocated_bytes": mem.get("total_bytes", 0) - mem.get("reserve_bytes", 0),
            "total_bytes": mem.get("total_bytes", 0), "breakdown": p.get("breakdown", {}),
            "memory": mem}


def rel(pred, meas):
    return pred / meas - 1 if meas else None


def summary(errors):
    if not errors:
        return {"count": 0}
    a = sorted(abs(e) for e in errors)
    # Linear between the two nearest ranks, as `hetplan report` computes it
    # (costmodel/stats.cpp percentile_sorted), so that both print the same p90 for the same runs.
    pos = 0.9 * (len(a) - 1)
    lo = int(pos)
    p90 = a[lo] + (a[min(lo + 1, len(a) - 1)] - a[lo]) * (pos - lo)
    return {"count": len(a), "median_abs_error": statistics.median(a), "p90_abs_error": p90,
            "mean_signed_error": statistics.fmean(errors)}


def compare(a, entries, sub):
    with open(os.path.join(a.out, "measurements.json")) as f:
        measured = json.load(f)["measurements"]
    rows, time_err, mem_err, oom_agree = [], [], [], []
    for i, (entry, m) in enumerate(zip(entries, measured)):
        p = predicted(os.path.join(a.out, sub, f"{i:02d}.json"))
        row = {"index": i, "label": entry["label"], "predicted": p, "measured_oom": m["oom"],
               "error": m.get("error", "")}
        if m["oom"] or m.get("error"):
            oom_agree.append((not p["feasible"]) == m["oom"])
        else:
            t = m["iteration_s"]["median_s"]
            mem = m["peak_memory_bytes"][0] if m.get("peak_memory_bytes") else 0
            row.update({"measured_iteration_s": t, "measured_allocated_bytes": mem,
                        "time_error": rel(p["iteration_s"], t),
                        "memory_error": rel(p["allocated_bytes"], mem) if mem else None,
                        "clocks": m.get("clocks")})
            time_err.append(row["time_error"])
            if row["memory_error"] is not None:
                mem_err.append(row["memory_error"])
            oom_agree.append(p["feasible"])
        rows.append(row)
    return rows, {"iteration_time": summary(time_err), "peak_memory_allocated": summary(mem_err),
                  "oom_agreement": f"{sum(oom_agree)}/{len(oom_agree)}"}


def print_table(title, rows, stats):
    gib = 2.0 ** 30
    print(f"\n{title}")
    # SM MHz: the median SM clock of the measured steps (scripts/reference/clocks.py), "*" where
    # NVML named a power or thermal limit; "-" where the run did not read it.
    print(f"{'#':>2} {'configuration':<36} {'pred ms':>9} {'meas ms':>9} {'err':>7} "
          f"{'pred GiB':>9} {'meas GiB':>9} {'err':>7} {'SM MHz':>7}")
    for r in rows:
        p = r["predicted"]
        if r["measured_oom"] or r["error"]:
            what = "out of memory" if r["measured_oom"] else "failed: " + r["error"][:40]
            said = "predicted infeasible" if not p["feasible"] else "predicted feasible"
            print(f"{r['index']:>2} {r['label']:<36} {what} ({said})")
            continue
        me = r["memory_error"]
        mhz = clocks.label(r.get("clocks"))
        print(f"{r['index']:>2} {r['label']:<36} {p['iteration_s'] * 1e3:>9.1f} "
              f"{r['measured_iteration_s'] * 1e3:>9.1f} {100 * r['time_error']:>+6.1f}% "
              f"{p['allocated_bytes'] / gib:>9.2f} {r['measured_allocated_bytes'] / gib:>9.2f} "
              + (f"{100 * me:>+6.1f}%" if me is not None else "      -") + f" {mhz:>7}"
              + ("" if p["feasible"] else "  (predicted infeasible)"))
    t, m = stats["iteration_time"], stats["peak_memory_allocated"]
    if t["count"]:
        print(f"iteration time: median |error| {100 * t['median_abs_error']:.1f}%, p90 "
              f"{100 * t['p90_abs_error']:.1f}%, mean signed {100 * t['mean_signed_error']:+.1f}% "
              f"over {t['count']} runs (target: median <= 10%)")
    if m["count"]:
        print(f"peak memory (allocated): median |error| {100 * m['median_abs_error']:.1f}%, p90 "
              f"{100 * m['p90_abs_error']:.1f}%, mean signed {100 * m['mean_signed_error']:+.1f}% "
              f"(target: median <= 10%)")
    print(f"out of memory, predicted vs observed: {stats['oom_agreement']} agree")


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--hetplan", default=os.path.join(ROOT, "build", "cli", "hetplan"))
    p.add_argument("--calibration", nargs="*", default=[],
                   help="calibration files or profiles of this GPU (fitted into OUT/profile.json)")
    p.add_argument("--python", default=os.environ.get("HETPLAN_PYTHON", sys.executable),
                   help="Python with PyTorch for the harness")
    p.add_argument("--cluster", default=DEFAULT_CLUSTER,
                   help=f"cluster the predictions are for (default {DEFAULT_CLUSTER})")
    p.add_argument("--quick", action="store_true", help=f"{len(QUICK)} configurations only")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--iters", type=int, default=8)
    p.add_argument("--budget-s", type=float, default=3.0,
                   help="timed seconds per configuration at most (at least 3 iterations)")
    p.add_argument("--compare-only", action="store_true",
                   help="compare OUT's existing predictions and measurements again")
    p.add_argument("--measurements", metavar="FILE",
                   help="predict again and compare with FILE, an earlier sweep's "
                        "measurements.json of the same configurations, instead of measuring")
    p.add_argument("--framework", default="",
                   help="the framework the predictions are for (hetplan predict --framework; "
                        "default: predict's own)")
    p.add_argument("--style", default="reference", choices=["reference", "pytorch"],
                   help="how the harness runs (reference_train.py --style; pytorch: the way "
                        "plain PyTorch runs, to be predicted with --framework pytorch)")
    p.add_argument("--one-microbatch", action="store_true",
                   help="run each configuration with one micro-batch a step (global batch = "
                        "micro-batch): where a framework frees the gradients after each step "
                        "(zero_grad(set_to_none=True)) its peak holds no gradients")
    p.add_argument("--only", default="",
                   help="comma-separated indices of the configurations to run (e.g. 14,15,16,"
                        "17,18,19: the LLaMA-style ones)")
    a = p.parse_args(argv)
    if a.measurements and a.compare_only:
        print("measure_sweep: --measurements and --compare-only exclude each other",
              file=sys.stderr)
        return 2
    os.makedirs(a.out, exist_ok=True)
    try:
        only = [int(i) for i in a.only.split(",")] if a.only else []
        if any(not 0 <= i < len(CONFIGS) for i in only):
            raise ValueError
    except ValueError:
        print(f"measure_sweep: --only: expected indices 0-{len(CONFIGS) - 1}, found {a.only!r}",
              file=sys.stderr)
        return 2
    configs = [CONFIGS[i] for i in only] if only else \
        [CONFIGS[i] for i in QUICK] if a.quick else CONFIGS
    if a.one_microbatch:  # each step one micro-batch: the global batch is the micro-batch
        configs = [(model, seq, mb, mb, recompute) for model, seq, mb, _, recompute in configs]
    t0 = time.time()
    if a.compare_only:
        if not os.path.exists(os.path.join(a.out, "plan.json")):
            print(f"measure_sweep: {a.out}/plan.json missing: --compare-only needs an earlier "
                  "sweep's folder", file=sys.stderr)
            return 2
        with open(os.path.join(a.out, "plan.json")) as f:
            entries = json.load(f)["configs"]
    elif a.measurements:
        if not os.path.isfile(a.measurements):
            print(f"measure_sweep: {a.measurements}: no such file (--measurements)",
                  file=sys.stderr)
            return 2
        entries = prepare(a, configs)
        with open(os.path.join(a.out, "plan.json"), "w") as f:
            json.dump({"configs": entries}, f, indent=1)
        try:
            load_measurements(a.measurements, [
                dict(e, strategy_path=os.path.join(a.out, e["strategy"])) for e in entries])
        except ValueError as e:  # json.JSONDecodeError is one
            print(f"measure_sweep: {e}", file=sys.stderr)
            return 2
        copy = os.path.join(a.out, "measurements.json")
        if not os.path.exists(copy) or not os.path.samefile(a.measurements, copy):
            shutil.copyfile(a.measurements, copy)
        print(f"{len(entries)} configurations predicted in {time.time() - t0:.1f} s; compared "
              f"with {a.measurements}", flush=True)
    else:
        entries = prepare(a, configs)
        with open(os.path.join(a.out, "plan.json"), "w") as f:
            json.dump({"configs": entries}, f, indent=1)
        print(f"{len(entries)} configurations predicted in {time.time() - t0:.1f} s; measuring",
              flush=True)
        rc = subprocess.run([a.python, os.path.join(ROOT, "scripts", "reference_train.py"),
                             "--plan", os.path.join(a.out, "plan.json"), "--out",
                             os.path.join(a.out, "measurements.json"), "--cluster", a.cluster,
                             "--warmup", str(a.warmup), "--iters", str(a.iters), "--budget-s",
                             str(a.budget_s), "--hetplan-version", hetplan_version(a.hetplan),
                             "--style", a.style]).returncode
        if rc not in (0, 1):
            print(f"the harness exited {rc}", file=sys.stderr)
            return 1
    measurements = os.path.join(a.out, "measurements.json")
    if not os.path.exists(measurements):
        # The harness writes its file even when every configuration fails; without it (no
        # PyTorch, no GPU, a crash before the first configuration) there is nothing to compare.
        print(f"measure_sweep: {measurements}: not written by the harness (see its messages "
              "above); nothing to compare", file=sys.stderr)
        return 1
    result = {"cluster": a.cluster}
    for sub, title in (("predictions", "hetplan predict vs PyTorch"),
                       ("predictions-datasheet", "with datasheet priors only")):
        if sub == "predictions-datasheet" and not os.path.exists(os.path.join(a.out,
                                                                             "profile.json")):
            continue
        rows, stats = compare(a, entries, sub)
        print_table(title, rows, stats)
        result[sub] = {"rows": rows, "summary": stats}
    with open(os.path.join(a.out, "comparison.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(f"\nsweep done in {time.time() - t0:.0f} s; {a.out}/comparison.json", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
