#!/usr/bin/env python3
"""Eager PyTorch's host cost per kernel, fitted from whole sweeps of measured steps (a
framework file's `host_s_per_kernel.eager`, docs/frameworks.md "The host floor").

In eager mode the host issues every kernel while the GPU runs the ones before; a step whose
device work is short against that takes the host's time. Each run gives, from hetplan's
prediction of it under the framework it ran as (`hetplan predict --json`: `kernels_per_iteration`
K and the device's own time D = iteration_s less the modelled host wait), and its measured median
step T. The evaluator predicts the step as max(D, h x K) (search/eval/host_floor.cpp); the fit is
the h that minimises the sum over every run of log(max(D, h K) / T)^2: host-bound runs pull h to
their T / K, device-bound ones bound it from above (a larger h would make them host-bound), and
the log treats a step predicted 2x too slow as one 2x too fast. Over several sweeps the runs are
pooled (both runs of a day are the same kind of machine, not the same one: each sweep's own fit
is printed too). Host-bound means D < HOST_BOUND_SHARE x T (the device busy under two thirds of
the step, as scripts/measure_host_cost.py takes it); their T / K are printed as samples.

  fit_host_cost.py --sweep PREDICTIONS_DIR MEASUREMENTS [--sweep ...] [--json FILE]

PREDICTIONS_DIR holds NN.json (`predict --json`) for each measurement NN of MEASUREMENTS (a
hetplan measurements file in the same order: what scripts/measure_sweep.py writes into
OUT/predictions/ and OUT/measurements.json). Standard library only. Exit 2 for bad input, or
when no run is host-bound.
"""

import argparse
import json
import math
import os
import statistics
import sys

sys.dont_write_bytecode = True
HOST_BOUND_SHARE = 2 / 3
GRID_S, MAX_S = 0.05e-6, 200e-6  # the fit's resolution and range, seconds per kernel


def runs_of(predictions_dir, measurements_path):
    """[{label, kernels, device_s, step_s}] of the measured (not out of memory, not failed) runs.
    Raises ValueError naming the file when a prediction is missing or lacks its kernel count."""
    with open(measurements_path) as f:
        measured = json.load(f)["measurements"]
    out = []
    for i, m in enumerate(measured):
        if m.get("oom") or m.get("error"):
            continue
        path = os.path.join(predictions_dir, f"{i:02d}.json")
        if not os.path.isfile(path):
            raise ValueError(f"{path}: missing (the prediction of {measurements_path} "
                             f"measurements[{i}])")
        with open(path) as f:
            p = json.load(f)
        p = p.get("predicted", p)
        kernels = p.get("kernels_per_iteration")
        if not isinstance(kernels, (int, float)) or kernels <= 0:
            raise ValueError(f"{path}: predicted.kernels_per_iteration: expected a count > 0")
        s = m.get("strategy", {})
        out.append({"label": f"{m.get('model', '?')} mb{s.get('micro_batch')} "
                             f"gb{s.get('global_batch')} {s.get('recompute')}",
                    "source": f"{os.path.basename(measurements_path)}[{i}]",
                    "kernels": float(kernels),
                    "device_s": p["iteration_s"] - p.get("breakdown", {}).get("host_wait", 0.0),
                    "step_s": m["iteration_s"]["median_s"]})
    return out


def host_bound(run):
    return run["device_s"] < HOST_BOUND_SHARE * run["step_s"]


def squared_log_error(runs, s_per_kernel):
    return sum(math.log(max(r["device_s"], s_per_kernel * r["kernels"]) / r["step_s"]) ** 2
               for r in runs)


def fit(runs):
    """(h, samples): h minimises squared_log_error over a grid of GRID_S steps in
    [GRID_S, MAX_S]; samples are the host-bound runs' T / K. ValueError without a host-bound run
    (then every h up to the device-bound limit fits equally)."""
    samples = [r["step_s"] / r["kernels"] for r in runs if host_bound(r)]
    if not samples:
        raise ValueError("no run is host-bound (device time under "
                         f"{100 * HOST_BOUND_SHARE:.0f}% of its step): nothing to fit")
    grid = (GRID_S * i for i in range(1, int(MAX_S / GRID_S) + 1))
    return min(grid, key=lambda h: squared_log_error(runs, h)), samples


def residuals(runs, s_per_kernel):
    """Each run's step predicted as the slower of device and host, against the measured one."""
    out = []
    for r in runs:
        predicted = max(r["device_s"], s_per_kernel * r["kernels"])
        out.append(dict(r, host_bound=host_bound(r), host_s=s_per_kernel * r["kernels"],
                        predicted_s=predicted, error=predicted / r["step_s"] - 1))
    return out


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sweep", nargs=2, action="append", required=True,
                    metavar=("PREDICTIONS_DIR", "MEASUREMENTS"))
    ap.add_argument("--json", help="write the fit and its residuals to FILE")
    a = ap.parse_args(argv)
    try:
        sweeps = [(m, runs_of(d, m)) for d, m in a.sweep]
        runs = [r for _, own in sweeps for r in own]
        s_per_kernel, samples = fit(runs)
    except (OSError, ValueError, KeyError) as e:
        print(f"fit_host_cost: {e}", file=sys.stderr)
        return 2
    rows = residuals(runs, s_per_kernel)
    print(f"host cost per kernel: {s_per_kernel * 1e6:.2f} us (least squares of log errors over "
          f"{len(runs)} runs; the {len(samples)} host-bound ones give "
          f"{', '.join(f'{x * 1e6:.2f}' for x in sorted(samples))} us)")
    per_sweep = {}
    for m, own in sweeps:
        try:
            per_sweep[m] = fit(own)[0]
            print(f"  {m} alone: {per_sweep[m] * 1e6:.2f} us")
        except ValueError:
            print(f"  {m} alone: no host-bound run")
    print(f"{'run':44s} {'kernels':>8s} {'device ms':>10s} {'host ms':>8s} {'step ms':>8s} "
          f"{'pred ms':>8s} {'error':>7s}")
    for r in rows:
        print(f"{(r['label'] + ' ' + r['source'])[:44]:44s} {r['kernels']:8.0f} "
              f"{r['device_s'] * 1e3:10.1f} {r['host_s'] * 1e3:8.1f} {r['step_s'] * 1e3:8.1f} "
              f"{r['predicted_s'] * 1e3:8.1f} {100 * r['error']:+6.1f}%"
              + ("  host-bound" if r["host_bound"] else ""))
    errors = sorted(abs(r["error"]) for r in rows)
    bound = [abs(r["error"]) for r in rows if r["host_bound"]]
    print(f"residuals: median |error| {100 * statistics.median(errors):.1f}% over {len(rows)} "
          f"runs; {100 * statistics.median(bound):.1f}% over the {len(bound)} host-bound ones")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"s_per_kernel": s_per_kernel, "per_sweep": per_sweep,
                       "samples": samples, "host_bound_share": HOST_BOUND_SHARE, "runs": rows},
                      f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
