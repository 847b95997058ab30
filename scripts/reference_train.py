#!/usr/bin/env python3
"""PyTorch reference harness: times real training iterations of exactly the model and strategy
hetplan predicts, and writes a hetplan measurements file (docs/formats.md, docs/measure.md).

  # one configuration (hetplan measure runs this for you)
  hetplan model-info --model gpt2-medium --json model.json
  python3 scripts/reference_train.py --model-info model.json --model-name gpt2-medium \\
      --strategy strategy.json --out measured.json

  # many configurations in one process (scripts/measure_sweep.sh)
  python3 scripts/reference_train.py --plan plan.json --out measured.json

  # what would run, without torch or a GPU
  python3 scripts/reference_train.py --model-info model.json --strategy s.json --dry-run

One GPU (dp = tp = pp = 1) is the measured path. `--style pytorch` runs the model as plain
PyTorch code runs it (fp32 parameters under torch.autocast, eager operators, autograd's gradient
accumulation, fused AdamW; reference/plain.py), on one GPU. Several GPUs run under torchrun (reference/
parallel.py); with --device cpu their ranks talk over Gloo, which is how the tests run them
without GPUs (data parallelism here; tensor and pipeline parallelism need torch >= 2.2 / 2.4).
Exit status: 0 when every configuration ran (out of memory is a result), 1 when one failed,
2 for bad input.
"""

import argparse
import datetime
import json
import os
import socket
import sys

sys.dont_write_bytecode = True  # keep the source tree clean

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from reference import spec  # noqa: E402  (pure Python; torch is imported only when running)

MEASUREMENTS_FORMAT = "hetplan-measurements"

# hetplan GPU type keys (presets/gpus) by a substring of the name the driver reports.
GPU_TYPES = [("H200", "h200"), ("H100", "h100-sxm"), ("A100-SXM4-80GB", "a100-80gb"), ("A100 80GB", "a100-80gb"),
             ("A100", "a100-40gb"), ("V100", "v100"), ("T4", "t4"), ("L4", "l4")]


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model-info", help="hetplan model-info --json output")
    p.add_argument("--model-name", help="model name for the measurements file (default: its name)")
    p.add_argument("--strategy", help="strategy file (JSON)")
    p.add_argument("--plan", help="JSON {\"configs\": [{\"model_info\", \"model\", \"strategy\", "
                                  "\"cluster\", \"label\"}]} to run in one process")
    p.add_argument("--out", help="measurements file to write")
    p.add_argument("--cluster", default="", help="cluster name for the measurements file")
    p.add_argument("--gpu-type", default="", help="hetplan GPU type (default: from the GPU name)")
    p.add_argument("--warmup", type=int, default=3, help="warm-up iterations (default 3)")
    p.add_argument("--iters", type=int, default=10, help="timed iterations at most (default 10)")
    p.add_argument("--budget-s", type=float, default=15.0,
                   help="seconds of timed iterations per configuration at most (at least 3 run)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--command", default="", help="the command line to record (hetplan measure)")
    p.add_argument("--hetplan-version", default="")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                   help="cpu: test the harness itself (CPU times, no memory figures)")
    p.add_argument("--style", default="reference", choices=["reference", "pytorch"],
                   help="reference: Megatron-LM's precision layout and hetplan's fused kernels "
                        "(default); pytorch: plain PyTorch, fp32 parameters under autocast "
                        "(one GPU)")
    p.add_argument("--dry-run", action="store_true",
                   help="print what would run (parameter counts per layer) and exit; no torch")
    args = p.parse_args(argv)
    if args.plan is None and (args.model_info is None or args.strategy is None):
        p.error("give --plan, or --model-info and --strategy")
    if not args.dry_run and args.out is None:
        p.error("--out is required (except with --dry-run)")
    if args.warmup < 1 or args.iters < 3:
        p.error("--warmup must be >= 1 and --iters >= 3")
    return args


def load_configs(args):
    """[(info, strategy, model name, cluster, label)] from --plan or the single-run options."""
    out = []
    if args.plan:
        with open(args.plan) as f:
            plan = json.load(f)
        base = os.path.dirname(os.path.abspath(args.plan))
        for i, c in enumerate(plan.get("configs", [])):
            where = f"{args.plan}: configs[{i}]"
            for key in ("model_info", "strategy"):
                if key not in c:
                    raise spec.SpecError(f"{where}.{key}: missing")
            info = spec.load_model_info(os.path.join(base, c["model_info"]))
            strat = c["strategy"]
            strategy = spec.load_strategy(os.path.join(base, strat)) if isinstance(strat, str) \
                else spec.check_strategy(strat, where + ".strategy")
            out.append((info, strategy, c.get("model", info["name"]), c.get("cluster", ""),
                        c.get("label", "")))
    else:
        info = spec.load_model_info(args.model_info)
        strategy = spec.load_strategy(args.strategy)
        out.append((info, strategy, args.model_name or info["name"], args.cluster, ""))
    return out


def gpu_type_of(name):
    for key, gpu in GPU_TYPES:
        if key in name:
            return gpu
    return ""


def context(args, torch, world):
    if args.device == "cpu":
        return {"host": socket.gethostname(), "framework": "pytorch",
                "framework_version": torch.__version__, "gpu_count": 0,
                "command": args.command or " ".join([sys.executable] + sys.argv),
                "notes": "CPU test run of the reference harness: not a measurement of a GPU"}
    name = torch.cuda.get_device_name()
    versions = {"cuda": str(torch.version.cuda), "python": sys.version.split()[0]}
    if torch.backends.cudnn.is_available():
        versions["cudnn"] = str(torch.backends.cudnn.version())
    try:
        versions["nccl"] = ".".join(str(v) for v in torch.cuda.nccl.version())
    except Exception:  # noqa: BLE001 (NCCL is optional)
        pass
    free, total = torch.cuda.mem_get_info()
    return {
        "host": socket.gethostname(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": args.command or " ".join([sys.executable] + sys.argv),
        "hetplan_version": args.hetplan_version,
        "gpu_type": args.gpu_type or gpu_type_of(name),
        "gpu_name": name,
        "gpu_count": world,
        "framework": "pytorch",
        "framework_version": torch.__version__,
        "versions": versions,
        "notes": (f"reference harness scripts/reference_train.py; device memory {total / 2**30:.1f} "
                  f"GiB, {(total - free) / 2**30:.2f} GiB in use at start (CUDA context and "
                  "libraries, not in peak_memory_bytes)"),
    }


def write_measurements(path, ctx, measurements):
    doc = {"format": MEASUREMENTS_FORMAT, "schema_version": 1,
           "context": {k: v for k, v in ctx.items() if v not in ("", None)},
           "measurements": measurements}
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


def main(argv):
    args = parse_args(argv)
    try:
        configs = load_configs(args)
    except (spec.SpecError, OSError, json.JSONDecodeError, KeyError) as e:
        print(f"reference_train: error: {e}", file=sys.stderr)
        return 2
    if args.dry_run:
        print(json.dumps([spec.summary(info, s) for info, s, *_ in configs], indent=1))
        return 0
    try:
        import torch
    except ImportError:
        print("reference_train: failed: PyTorch is not installed for " + sys.executable,
              file=sys.stderr)
        return 1
    if args.device == "cuda" and not torch.cuda.is_available():
        print("reference_train: failed: PyTorch sees no CUDA GPU", file=sys.stderr)
        return 1
    from reference import train  # noqa: E402

    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    results = []
    failed = False
    for i, (info, strategy, name, cluster, label) in enumerate(configs):
        cfg = train.Config(info, strategy, name, cluster or args.cluster, label, args.style)
        devices = strategy["dp"] * strategy["tp"] * strategy["pp"]
        if rank == 0:
            print(f"[{i + 1}/{len(configs)}] {cfg.label}", file=sys.stderr, flush=True)
        if devices == 1 and world == 1:
            r = train.run_single_gpu(cfg, args.warmup, args.iters, args.budget_s, args.seed,
                                     log=lambda text: print(text, file=sys.stderr, flush=True),
                                     device=torch.device(args.device) if args.device == "cpu"
                                     else None)
        elif devices == world and args.style == "pytorch":
            r = {"model": name, "strategy": strategy, "source": "measured:pytorch", "oom": False,
                 "error": "--style pytorch runs one GPU (dp = tp = pp = 1)", "notes": ""}
        elif devices == world:
            from reference import parallel  # noqa: E402
            r = parallel.run_distributed(cfg, args.warmup, args.iters, args.budget_s, args.seed,
                                         device_kind=args.device)
        else:
            r = {"model": name, "strategy": strategy, "source": "measured:pytorch", "oom": False,
                 "error": f"the strategy needs {devices} GPUs, this run has {world} "
                          "(hetplan measure starts torchrun with the right count)", "notes": ""}
        failed = failed or bool(r.get("error"))
        results.append(r)
        if rank == 0:  # written after every configuration, so an interrupted sweep keeps results
            write_measurements(args.out, context(args, torch, world), results)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
