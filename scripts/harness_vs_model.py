#!/usr/bin/env python3
"""The reference harness's operators against hetplan's cost model, layer by layer.

For each distinct layer of MODEL (embedding, block, LM head), runs the harness's layer once
forward and backward under an operator trace (scripts/reference/optrace.py) and sets what it ran
beside what `hetplan model-info --work` counts: GEMM FLOPs (equal when the harness builds the
model hetplan predicts), fused attention kernels, memory-bound bytes and kernel launches, and the
fp32 gradient accumulation the harness adds per micro-batch. Where the memory-bound bytes differ
the cost model's iteration time differs from the harness's measured one: this shows where, without
a GPU.

  python3 scripts/harness_vs_model.py --model gpt2-medium --micro-batch 1 [--device cpu|cuda]
      [--seq-len N] [--top 8] [--json FILE] [--style reference|pytorch]
  python3 scripts/harness_vs_model.py --recipes [--style reference|pytorch] [--json FILE]

--style pytorch traces the plain-PyTorch harness (reference/plain.py: fp32 parameters under
autocast, eager operators, autograd's gradient accumulation) against `--framework pytorch`;
--recipes prints the op families as a style runs them (a framework file's `ops`).

Needs torch (>= 1.13; on the CPU fused attention is a stand-in with flash attention's layouts) and
the hetplan binary (HETPLAN_BINARY, default build/cli/hetplan). Exit status 2 for bad input.
"""

import argparse
import json
import os
import subprocess
import sys

sys.dont_write_bytecode = True
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))


def model_info_with_work(model, micro_batch, seq_len, flash=True, style="reference"):
    """The harness adds every gradient with a kernel of its own: the model is asked the same.
    The pytorch style is compared with the pytorch framework's work at two micro-batches (the
    traced one is the second, whose gradients autograd adds)."""
    binary = os.environ.get("HETPLAN_BINARY", os.path.join(ROOT, "build", "cli", "hetplan"))
    cmd = [binary, "model-info", "--model", model, "--json", "-", "--work",
           "--micro-batch", str(micro_batch), "--no-grad-accumulation-fusion"]
    if style == "pytorch":
        cmd += ["--framework", "pytorch", "--microbatches", "2"]
    if seq_len:
        cmd += ["--seq-len", str(seq_len)]
    if not flash:
        cmd.append("--no-flash-attention")
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        sys.stderr.write(run.stderr)
        raise SystemExit(run.returncode)
    return json.loads(run.stdout)


def mb(x):
    return x / 2**20


def ratio(a, b):
    return f"{a / b:6.2f}" if b > 0 else ("     -" if a == 0 else "   inf")


def print_report(results, top):
    for r in results:
        print(f"\nlayer {r['index']} {r['name']} ({r['kind']})")
        print(f"  {'phase':17s} {'GEMM GFLOP h/m':>22s} {'attn h/m':>9s} {'memory MiB harness':>19s} "
              f"{'model':>9s} {'h/m':>6s} {'kernels h/m':>12s}")
        for ph in ("forward", "backward"):
            h, m = r["harness"][ph], r["model"][ph]
            print(f"  {ph:17s} {h['gemm_flops'] / 1e9:10.3f} /{m['gemm_flops'] / 1e9:10.3f} "
                  f"{h['attention_ops']:4d} /{m['attention_ops']:3d} {mb(h['memory_bytes']):19.1f} "
                  f"{mb(m['memory_bytes']):9.1f} {ratio(h['memory_bytes'], m['memory_bytes'])} "
                  f"{h['kernels']:5d} /{m['kernels']:5g}")
        g, gm = r["harness"]["grad_accumulation"], r["model"]["grad_accumulation"]
        print(f"  {'grad accumulation':17s} {'':22s} {'':9s} {mb(g['memory_bytes']):19.1f} "
              f"{mb(gm['memory_bytes']):9.1f} {ratio(g['memory_bytes'], gm['memory_bytes'])} "
              f"{g['kernels']:5d} /{gm['kernels']:5g}")
        for ph in ("forward", "backward"):
            h, m = r["harness"][ph]["memory_ops"], r["model"][ph]["memory_ops"]
            hs = sorted(h.items(), key=lambda kv: -kv[1])[:top]
            ms = sorted(m.items(), key=lambda kv: -kv[1])[:top]
            print(f"  {ph} memory-bound, largest: harness "
                  + ", ".join(f"{k} {mb(v):.1f}" for k, v in hs))
            print(f"  {' ' * len(ph)}                         model   "
                  + ", ".join(f"{k} {mb(v):.1f}" for k, v in ms))


def print_recipes(style, json_path):
    """Each op family as `style` runs it, in a framework file's terms (docs/frameworks.md)."""
    try:
        import torch  # noqa: F401
    except ImportError:
        sys.stderr.write("harness_vs_model: needs PyTorch (python3 -c 'import torch' fails)\n")
        return 1
    import torch
    from reference import optrace
    recipes = {family: optrace.family_recipe(style, family)
               for family in optrace.STYLE_FAMILIES[style]}
    print(f"op families as the {style} style runs them (torch {torch.__version__}, CPU): "
          "kernels and values per element (act = 2-byte, fp32 = 4-byte, bytes = 1-byte)")
    for family, passes in recipes.items():
        for name, v in passes.items():
            launches = f"{v['launches']:3d} kernels, " if "launches" in v else " " * 13
            print(f"  {family:14s} {name:9s} {launches}act {v['act_values']:6.3f}  fp32 "
                  f"{v['fp32_values']:6.3f}  bytes {v['bytes']:6.3f}")
    if json_path:
        with open(json_path, "w") as f:
            json.dump({"style": style, "torch": torch.__version__, "recipes": recipes}, f,
                      indent=1)
    return 0


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model")
    ap.add_argument("--micro-batch", type=int, default=1)
    ap.add_argument("--seq-len", type=int, default=0)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--top", type=int, default=8, help="largest memory-bound operators listed")
    ap.add_argument("--json", help="write the comparison (with every traced operator) to FILE")
    ap.add_argument("--style", default="reference",
                    choices=["reference", "pytorch", "torchtitan"],
                    help="the harness's style (reference/plain.py for pytorch; torchtitan's "
                         "model code for --recipes only)")
    ap.add_argument("--recipes", action="store_true",
                    help="print the op families (rmsnorm, rotary, swiglu, softmax, "
                         "cross_entropy) as the style runs them, per element: a framework "
                         "file's `ops` (no --model needed)")
    args = ap.parse_args(argv)
    if args.recipes:
        return print_recipes(args.style, args.json)
    if not args.model:
        ap.error("--model is required (except with --recipes)")
    if args.micro_batch <= 0:
        ap.error("--micro-batch: expected a whole number > 0")
    try:
        import torch  # noqa: F401
    except ImportError:
        sys.stderr.write("harness_vs_model: needs PyTorch (python3 -c 'import torch' fails)\n")
        return 1
    from reference import optrace

    info = model_info_with_work(args.model, args.micro_batch, args.seq_len, style=args.style)
    results = optrace.compare(info, args.micro_batch, device=args.device, style=args.style)
    print(f"{info['name']}: micro-batch {args.micro_batch}, sequence {info['seq_len']}, "
          f"{info['dtype']}, device {args.device}, style {args.style} (harness h against model m"
          + ("; a micro-batch after the first, whose gradients autograd adds" if
             args.style == "pytorch" else "") + ")")
    print_report(results, args.top)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"model": info["name"], "micro_batch": args.micro_batch,
                       "seq_len": info["seq_len"], "device": args.device, "layers": results}, f,
                      indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
