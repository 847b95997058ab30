#!/usr/bin/env python3
"""Times PyTorch's scaled_dot_product_attention (forward, and forward + backward) on the attention
shapes of a hetplan_kernel_bench JSON file, and prints them side by side with our kernels' times
from that file. Run on the same GPU, right after the bench:

    python3 scripts/bench_attention_torch.py --ours kernel_bench.json [--json attention_torch.json]

With --between-gemm-ms MS each timed call follows MS milliseconds of bf16 GEMMs on the same
stream (the events time the attention alone), as attention runs inside a layer among its GEMMs:
the ratio to the plain timing is SDPA's in-layer factor, to set against the one `hetplan fit` takes
from hetplan's kernels (docs/costmodel.md "Attention", docs/benchmarks.md item 15).

Each timing keeps the SM clock it ran at (NVML, scripts/reference/clocks.py) as `clocks_<timing>`
(`clocks_fwd_s`, `clocks_fwd_s_after_gemm`, ...), in the form of hetplan's calibration records:
whether the board held its clock down after the GEMMs, and by how much of the factor, is what
item 15 asks. Where NVML cannot be read, `clocks_note` says why.

Torch gets contiguous [batch, heads, seq, head_dim] tensors (its documented layout); ours ran on
[batch, seq, heads, head_dim] (FlashAttention's), the layout a QKV projection produces. Both bf16,
softmax scale 1/sqrt(head_dim). FLOPs are counted as FlashAttention counts them: 4 b h s^2 d for
the forward (halved when causal), 2.5 times that for the backward.
"""
import argparse
import json
import statistics
import sys

import torch
import torch.nn.functional as F

from reference import clocks

try:
    from torch.nn.attention import SDPBackend, sdpa_kernel
except ImportError:  # older torch
    SDPBackend = None


def median_time_s(fn, warmup=5, reps=30, before=None):
    """Median seconds of fn() over `reps` calls, each timed by two events; `before` (if any) is
    enqueued ahead of each call, outside the events."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if before is not None:
            before()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1e-3)
    return statistics.median(times)


def default_backend(q, k, v, causal):
    """The backend SDPA picks by itself (a private helper; None where it is missing)."""
    try:
        choice = torch._fused_sdp_choice(q, k, v, is_causal=causal)
        return SDPBackend(choice).name if SDPBackend is not None else str(choice)
    except Exception:  # noqa: BLE001 - best effort, only for the report
        return None


def gemm_heater(ms):
    """A function that enqueues about `ms` milliseconds of 8192^3 bf16 GEMMs, or None for 0."""
    if ms <= 0:
        return None
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    c = torch.empty_like(a)
    torch.matmul(a, a, out=c)
    one = median_time_s(lambda: torch.matmul(a, a, out=c), warmup=3, reps=5)
    n = max(1, round(ms * 1e-3 / one))

    def heat():
        for _ in range(n):
            torch.matmul(a, a, out=c)
    return heat


def time_torch(b, h, s, d, causal, backend, heat=None, clock=(None, "")):
    """SDPA's times at one shape and backend; `clock` is (sampler, note) of
    clocks.device_sampler, which reads the SM clock of each timing."""
    dev, dt = "cuda", torch.bfloat16
    q, k, v = (torch.randn(b, h, s, d, device=dev, dtype=dt, requires_grad=True) for _ in range(3))
    do = torch.randn(b, h, s, d, device=dev, dtype=dt)

    def fwd():
        with torch.no_grad():
            F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    def fwd_bwd():
        q.grad = k.grad = v.grad = None
        o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        o.backward(do)

    result = {"backend": backend or "default"}
    if backend is None:
        result["picked"] = default_backend(q, k, v, causal)
    ctx = sdpa_kernel([getattr(SDPBackend, backend)]) if backend else torch.enable_grad()

    def timed(key, measure):
        """result[key] = measure(), with the SM clock it ran at as result["clocks_" + key]."""
        sampler, note = clock
        result[key], record = clocks.clocked(sampler, measure)
        if record:
            result["clocks_" + key] = record
        else:
            result.setdefault("clocks_note", note or f"clocks not read: {sampler.reason}")

    try:
        with ctx:
            timed("fwd_s", lambda: median_time_s(fwd))
            timed("fwd_bwd_s", lambda: median_time_s(fwd_bwd))
            if heat is not None:
                timed("fwd_s_after_gemm", lambda: median_time_s(fwd, before=heat))
                timed("fwd_bwd_s_after_gemm", lambda: median_time_s(fwd_bwd, before=heat))
    except Exception as e:  # noqa: BLE001 - a backend may not support the shape
        result["error"] = str(e).splitlines()[0][:200]
    del q, k, v, do
    torch.cuda.empty_cache()
    return result


def clock_change(t, key):
    """'; SM clock A -> B MHz (xA/B)' from the clock of timing `key` alone to after GEMMs, as a
    time ratio at a compute-bound kernel's clock elasticity of 1; '' where either is missing."""
    alone, after = t.get("clocks_" + key), t.get("clocks_" + key + "_after_gemm")
    if not alone or not after:
        return ""
    ratio = alone["sm_mhz_median"] / after["sm_mhz_median"]
    return (f"; SM clock {clocks.label(alone)} -> {clocks.label(after)} MHz (x{ratio:.3f} if "
            "time follows 1/clock)")


def flops(b, h, s, d, causal):
    f = 4.0 * b * h * s * s * d
    return f / 2 if causal else f


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ours", required=True, help="hetplan_kernel_bench JSON")
    ap.add_argument("--json", help="write the comparison here")
    ap.add_argument("--backends", default="FLASH_ATTENTION,CUDNN_ATTENTION,EFFICIENT_ATTENTION",
                    help="explicit SDPA backends to time besides the default")
    ap.add_argument("--between-gemm-ms", type=float, default=0,
                    help="also time each call after this many ms of bf16 GEMMs (0: not)")
    args = ap.parse_args()

    with open(args.ours) as f:
        bench = json.load(f)
    ours = {}
    for r in bench["results"]:
        if r["family"] == "attention" and r["dtype"] == "bf16" and r["status"] == "ok":
            sh = r["shape"]
            key = (sh["batch"], sh["heads"], sh["seq"], sh["head_dim"], bool(sh["causal"]))
            ours.setdefault(key, {})[r["pass"]] = r["time_s"]
    if not ours:
        print("no successful bf16 attention results in", args.ours, file=sys.stderr)
        return 1

    print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}, cuDNN "
          f"{torch.backends.cudnn.version()}")
    backends = [None] + ([b for b in args.backends.split(",") if b] if SDPBackend else [])
    heat = gemm_heater(args.between_gemm_ms)
    clock = clocks.device_sampler(torch, torch.device("cuda"))
    rows = []
    header = (f"{'shape (b,h,s,d,causal)':28} {'ours fwd':>9} {'ours f+b':>9} {'torch fwd':>9} "
              f"{'torch f+b':>9} {'ratio f+b':>9} {'ours TF/s':>9} {'torch TF/s':>10}  torch backend")
    print(header)
    for key in sorted(ours):
        b, h, s, d, causal = key
        mine = ours[key]
        mine_total = mine.get("forward", 0) + mine.get("backward", 0)
        row = {"shape": dict(zip(["batch", "heads", "seq", "head_dim", "causal"], key)),
               "ours_fwd_s": mine.get("forward"), "ours_bwd_s": mine.get("backward"),
               "ours_fwd_bwd_s": mine_total if "forward" in mine and "backward" in mine else None,
               "torch": []}
        for backend in backends:
            row["torch"].append(time_torch(b, h, s, d, causal, backend, heat, clock))
        rows.append(row)
        total_flops = 3.5 * flops(*key)
        for t in row["torch"]:
            if "error" in t:
                print(f"{'':28} {'':9} {'':9} {'-':>9} {'-':>9} {'-':>9} {'':9} {'':10}  "
                      f"{t['backend']}: {t['error']}")
                continue
            ratio = (row["ours_fwd_bwd_s"] / t["fwd_bwd_s"]) if row["ours_fwd_bwd_s"] else float("nan")
            t["ratio_ours_over_torch_fwd_bwd"] = ratio
            label = t["backend"] + (f" (picks {t['picked']})" if t.get("picked") else "")
            ours_tf = total_flops / row["ours_fwd_bwd_s"] / 1e12 if row["ours_fwd_bwd_s"] else float("nan")
            after = ""
            if "fwd_s_after_gemm" in t:
                t["after_gemm_factor_fwd"] = t["fwd_s_after_gemm"] / t["fwd_s"]
                t["after_gemm_factor_fwd_bwd"] = t["fwd_bwd_s_after_gemm"] / t["fwd_bwd_s"]
                after = (f"; after GEMMs x{t['after_gemm_factor_fwd']:.3f} fwd, "
                         f"x{t['after_gemm_factor_fwd_bwd']:.3f} f+b")
                after += clock_change(t, "fwd_bwd_s")
            print(f"{str(key):28} {1e3 * (mine.get('forward') or 0):8.3f}m {1e3 * mine_total:8.3f}m "
                  f"{1e3 * t['fwd_s']:8.3f}m {1e3 * t['fwd_bwd_s']:8.3f}m {ratio:9.2f} {ours_tf:9.1f} "
                  f"{total_flops / t['fwd_bwd_s'] / 1e12:10.1f}  {label}{after}")
    if clock[0] is not None:
        clock[0].close()
    print("ratio f+b = ours / torch for forward + backward; the target is <= 1.5 against the default")
    if heat is not None:
        print(f"after GEMMs: each call timed again after {args.between_gemm_ms:g} ms of 8192^3 bf16 "
              "GEMMs; the factor is that time over the plain one (SDPA's in-layer factor)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"schema": "hetplan.attention_vs_torch/1", "gpu": torch.cuda.get_device_name(),
                       "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
                       "ours_context": bench.get("context"), "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
