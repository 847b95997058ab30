"""Error statistics and a command runner shared by the scripts that set hetplan's predictions
beside iteration times measured by others (amp_het_cluster.py, megatron_weak_scaling.py)."""

import argparse
import json
import math
import os
import subprocess
import sys


def ranks(values):
    """Ranks from 1, ties sharing their mean rank."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


def spearman(a, b):
    ra, rb = ranks(a), ranks(b)
    ma, mb = sum(ra) / len(ra), sum(rb) / len(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    va = math.sqrt(sum((x - ma) ** 2 for x in ra))
    vb = math.sqrt(sum((y - mb) ** 2 for y in rb))
    return cov / (va * vb) if va > 0 and vb > 0 else float("nan")


def percentile(sorted_values, q):
    if not sorted_values:
        return float("nan")
    pos = q * (len(sorted_values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (pos - lo) * (sorted_values[hi] - sorted_values[lo])


def errors(predicted, measured):
    ape = sorted(abs(p / m - 1) for p, m in zip(predicted, measured))
    return {"count": len(ape), "median_ape": percentile(ape, 0.5),
            "p90_ape": percentile(ape, 0.9),
            "spearman_throughput": spearman([1 / p for p in predicted], [1 / m for m in measured])}


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.stderr.write(f"{' '.join(cmd)}\n{r.stdout}{r.stderr}")
        raise SystemExit(r.returncode)
    return r.stdout


def binary():
    """The hetplan binary: $HETPLAN_BINARY, else build/cli/hetplan of this checkout."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return os.environ.get("HETPLAN_BINARY", os.path.join(root, "build", "cli", "hetplan"))


def predict(model, cluster, strategy, strategy_path, prediction_path, calibration):
    """Writes `strategy` to strategy_path, runs `hetplan predict` into prediction_path and returns
    its `predicted` object."""
    with open(strategy_path, "w") as f:
        json.dump(strategy, f, indent=1)
    cmd = [binary(), "predict", "--model", model, "--cluster", cluster, "--strategy",
           strategy_path, "--json", prediction_path]
    for c in calibration:
        cmd += ["--calibration", c]
    run(cmd)
    with open(prediction_path) as f:
        return json.load(f)["predicted"]


def write_report(out_dir, context, measurements, predictions, calibration, title):
    """Writes out_dir/measurements.json (hetplan-measurements) and builds report.html and
    report.json from it and the prediction files."""
    path = os.path.join(out_dir, "measurements.json")
    with open(path, "w") as f:
        json.dump({"format": "hetplan-measurements", "schema_version": 1, "context": context,
                   "measurements": measurements}, f, indent=1)
    cmd = [binary(), "report", "--measurements", path, "--out",
           os.path.join(out_dir, "report.html"), "--json", os.path.join(out_dir, "report.json"),
           "--title", title]
    for p in predictions:
        cmd += ["--predictions", p]
    for c in calibration:
        cmd += ["--calibration", c]
    run(cmd)


def arguments(doc, outputs, input_flag, input_default, read):
    """The command line the comparison scripts share (--out-dir, the input table, --calibration,
    --json), and `read` applied to the input table; a table that cannot be read is exit status 2
    with its error."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--out-dir", required=True, help=outputs)
    ap.add_argument(input_flag, default=input_default, dest="table")
    ap.add_argument("--calibration", action="append", default=[],
                    help="calibration files added to the shipped ones (repeatable)")
    ap.add_argument("--json", help="write the comparison as JSON to FILE")
    args = ap.parse_args()
    try:
        return args, read(args.table)
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2)
