#!/usr/bin/env python3
"""PyTorch's host cost per kernel of an eager training step, as a calibration file's `host` record
(docs/formats.md; the coefficient of the host floor, search/evaluate.cpp).

In eager mode the host issues every kernel (Python, the dispatcher, autograd, the launch) while
the GPU runs the earlier ones; when the GPU finishes each kernel sooner than the host issues the
next, the step takes the host's time. So a configuration whose device time is small against that
(by default GPT-2 medium, the sweep's host-bound model, at sequence 128, micro-batch 1, two
micro-batches) is run with the reference harness (`hetplan measure`), and its median step time is
divided by the kernels hetplan counts for the same step (`hetplan predict --json`:
`kernels_per_iteration`). The record keeps the step, the count and hetplan's device time for the
step, so that a reader sees how far from host-bound it was.

  measure_host_cost.py --out FILE [--hetplan BIN] [--python PY] [--model M] [--seq-len S]
                       [--micro-batch B] [--global-batch G] [--gpu-type T] [--calibration F...]
  measure_host_cost.py --out FILE --from-measurements MEAS --index I --prediction PRED
                       [--gpu-type T]

The second form takes the step from an earlier measurements file (entry I) and the count from a
prediction of the same configuration (`predict --json` output): no GPU needed. `hetplan fit`
takes the file in with the other calibration files. Standard library only.
"""

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_CLUSTER = os.environ.get("HETPLAN_SESSION_CLUSTER") or "p5.48xlarge:1"
DEFAULT_GPU_TYPE = os.environ.get("HETPLAN_SESSION_GPU_TYPE") or "h100-sxm"
# Above this share of the step (the step under 1.5x hetplan's device time) the device time is no
# longer small against the host's: the
# step then overstates the host's cost per kernel (the two overlap), and the script says so.
HOST_BOUND_SHARE = 2 / 3


def host_record(measurement, prediction, config):
    """The calibration `host` record of one measured step and the prediction of the same step.
    `measurement` is an entry of a measurements file, `prediction` a `predict --json` document.
    Raises ValueError when either cannot give one."""
    if measurement.get("oom") or measurement.get("error"):
        raise ValueError(f"{config}: the measurement has no step time "
                         f"({'out of memory' if measurement.get('oom') else measurement['error']})")
    step = measurement.get("iteration_s")
    if not isinstance(step, dict) or not step.get("median_s", 0) > 0:
        raise ValueError(f"{config}: iteration_s.median_s missing or not > 0")
    p = prediction.get("predicted", prediction)
    kernels = p.get("kernels_per_iteration")
    if not isinstance(kernels, (int, float)) or kernels <= 0:
        raise ValueError(f"{config}: the prediction has no kernels_per_iteration (a hetplan that "
                         "predates the host floor?)")
    # The device's own time: the iteration less any wait for the host the profile already models.
    device_s = p["iteration_s"] - p.get("breakdown", {}).get("host_wait", 0.0)
    return {"framework": "pytorch-eager", "config": config, "kernels": int(round(kernels)),
            "step": {k: v for k, v in step.items() if k == "count" or k.endswith("_s")},
            "device_s": device_s, "s_per_kernel": step["median_s"] / kernels}


def host_bound_note(record):
    """A line on how host-bound the record's step was."""
    share = record["device_s"] / record["step"]["median_s"]
    line = (f"{record['config']}: {record['step']['median_s'] * 1e3:.2f} ms / {record['kernels']} "
            f"kernels = {record['s_per_kernel'] * 1e6:.2f} us per kernel; hetplan's device time "
            f"{record['device_s'] * 1e3:.2f} ms ({100 * share:.0f}% of the step)")
    if share > HOST_BOUND_SHARE:
        line += (f"; above {100 * HOST_BOUND_SHARE:.0f}%: not clearly host-bound, the figure is an "
                 "upper bound")
    return line


def calibration_file(records, gpu_type, command, notes=""):
    """A hetplan-calibration document holding `records` as its host section."""
    return {"format": "hetplan-calibration", "schema_version": 1,
            "context": {"source": "measured", "gpu_type": gpu_type,
                        "date": datetime.datetime.now(datetime.timezone.utc)
                        .strftime("%Y-%m-%dT%H:%M:%SZ"),
                        "command": command, "notes": notes},
            "gemm": [], "kernels": [], "layers": [], "collectives": [], "p2p": [],
            "host_device": [], "host": records, "failures": []}


def strategy(micro_batch, global_batch):
    # What the sweep runs (scripts/measure_sweep.py): one GPU, gradients added by kernels of their
    # own as the harness adds them.
    return {"dp": 1, "tp": 1, "pp": 1, "micro_batch": micro_batch, "global_batch": global_batch,
            "schedule": "1f1b", "recompute": "none", "zero": 0,
            "grad_accumulation_fusion": False}


def config_label(model, seq_len, micro_batch, global_batch):
    return f"{os.path.basename(model)} s{seq_len} mb{micro_batch} gb{global_batch} none"


def measure(a):
    """Runs the harness on the configuration; returns (measurement, prediction, label)."""
    env = dict(os.environ)
    env.setdefault("HETPLAN_CALIBRATION_DIR", os.path.join(ROOT, "calibration_data"))
    env.setdefault("HETPLAN_SCRIPTS_DIR", os.path.join(ROOT, "scripts"))
    with tempfile.TemporaryDirectory() as tmp:
        s_path = os.path.join(tmp, "strategy.json")
        with open(s_path, "w") as f:
            json.dump(strategy(a.micro_batch, a.global_batch), f)
        common = ["--model", a.model, "--seq-len", str(a.seq_len), "--cluster", a.cluster,
                  "--strategy", s_path]
        pred = os.path.join(tmp, "prediction.json")
        cal = sum((["--calibration", c] for c in a.calibration), [])
        subprocess.run([a.hetplan, "predict", *common, "--json", pred, *cal], check=True,
                       env=env, stdout=subprocess.DEVNULL)
        meas = os.path.join(tmp, "measurements.json")
        subprocess.run([a.hetplan, "measure", *common, "--out", meas, "--python", a.python,
                        "--gpu-type", a.gpu_type, "--warmup", "3", "--iters", str(a.iters),
                        "--budget-s", "5"], check=True, env=env)
        with open(pred) as f:
            prediction = json.load(f)
        with open(meas) as f:
            measurement = json.load(f)["measurements"][0]
    return measurement, prediction, config_label(a.model, a.seq_len, a.micro_batch,
                                                 a.global_batch)


def from_files(a):
    with open(a.from_measurements) as f:
        measured = json.load(f)["measurements"]
    if not 0 <= a.index < len(measured):
        raise ValueError(f"{a.from_measurements}: no measurements[{a.index}] "
                         f"({len(measured)} entries)")
    with open(a.prediction) as f:
        prediction = json.load(f)
    m = measured[a.index]
    s = m.get("strategy", {})
    label = (f"{m.get('model', '?')} mb{s.get('micro_batch', '?')} gb{s.get('global_batch', '?')} "
             f"{s.get('recompute', '?')} ({os.path.basename(a.from_measurements)}[{a.index}])")
    return m, prediction, label


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="calibration file to write")
    ap.add_argument("--hetplan", default=os.path.join(ROOT, "build", "cli", "hetplan"))
    ap.add_argument("--python", default=os.environ.get("HETPLAN_PYTHON", "python3"))
    ap.add_argument("--model", default="gpt2-medium")
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--micro-batch", type=int, default=1)
    ap.add_argument("--global-batch", type=int, default=2)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--gpu-type", default=DEFAULT_GPU_TYPE,
                    help=f"hetplan GPU type of the machine (default {DEFAULT_GPU_TYPE})")
    ap.add_argument("--cluster", default=DEFAULT_CLUSTER,
                    help=f"cluster the prediction is for (default {DEFAULT_CLUSTER})")
    ap.add_argument("--calibration", nargs="*", default=[],
                    help="calibration files or a profile for the prediction's device time")
    ap.add_argument("--from-measurements", help="an earlier measurements file (no GPU needed)")
    ap.add_argument("--index", type=int, default=0)
    ap.add_argument("--prediction", help="predict --json of the --from-measurements entry")
    a = ap.parse_args(argv)
    if bool(a.from_measurements) != bool(a.prediction):
        ap.error("--from-measurements and --prediction go together")
    try:
        measurement, prediction, label = from_files(a) if a.from_measurements else measure(a)
        record = host_record(measurement, prediction, label)
    except (OSError, ValueError, KeyError) as e:
        print(f"measure_host_cost: {e}", file=sys.stderr)
        return 2
    except subprocess.CalledProcessError as e:
        print(f"measure_host_cost: {e}", file=sys.stderr)
        return 1
    note = host_bound_note(record)
    print(note)
    doc = calibration_file([record], a.gpu_type, " ".join(["measure_host_cost.py"] + argv), note)
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
