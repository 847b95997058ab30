"""Error statistics and a command runner shared by the scripts that set hetplan's predictions
beside iteration times measured by others (amp_het_cluster.py, megatron_weak_scaling.py)."""

import math
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
