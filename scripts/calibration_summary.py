#!/usr/bin/env python3
"""Short text summary of a hetplan calibration file (printed by scripts/gpu_session.sh)."""
import collections
import json
import os
import sys

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference import clocks  # noqa: E402


def fmt_s(s):
    return f"{s * 1e3:.3f} ms" if s >= 1e-3 else f"{s * 1e6:.1f} us"


def main(path):
    try:
        with open(path) as f:
            cal = json.load(f)
    except (OSError, ValueError) as e:
        print(f"no calibration file to summarise: {e}")
        return 1
    ctx = cal["context"]
    print(f"GPU {ctx.get('gpu_name')} -> type {ctx.get('gpu_type')}, {ctx.get('sm_count')} SMs, "
          f"L2 {ctx.get('l2_bytes', 0) / 2**20:.0f} MiB, memory {ctx.get('memory_bytes', 0) / 2**30:.1f} GiB")
    print(f"driver {ctx.get('driver')}, CUDA {ctx.get('cuda_runtime')}, cuBLAS {ctx.get('cublas')}, "
          f"NCCL {ctx.get('nccl')}, CUPTI {ctx.get('cupti', 'unavailable')}, date {ctx.get('date')}")
    if ctx.get("notes"):
        print(f"notes: {ctx['notes'][:600]}")
    counts = {k: len(cal.get(k, [])) for k in
              ("gemm", "kernels", "layers", "collectives", "p2p", "host_device", "failures")}
    print("counts: " + ", ".join(f"{k} {v}" for k, v in counts.items()))

    by_dtype = collections.defaultdict(list)
    for g in cal.get("gemm", []):
        by_dtype[g["dtype"]].append(g)
    if by_dtype:
        print("GEMM (median TFLOP/s): dtype  n  best [shape]  4096^3 TN  8192^3 TN  tensor-core  "
              "cupti-disagree  launch-bound  check-max-err")
    for dtype, gs in sorted(by_dtype.items()):
        best = max(gs, key=lambda g: g["tflops"])

        def at(n):
            for g in gs:
                if g["m"] == g["n"] == g["k"] == n and g["trans_a"] and not g["trans_b"]:
                    return f"{g['tflops']:.0f}"
            return "-"
        tc = sum(1 for g in gs if g.get("tensor_cores"))
        # The cross-check of profiler/cupti_trace.cpp, from the stored numbers, so that files
        # written under earlier rules read the same: clocks apart on a gated batch, or the
        # timed median shorter than the kernels' own time.
        dis = sum(1 for g in gs if "trace" in g and (
            (g["trace"].get("gated") and abs(g["trace"]["event_vs_cupti"]) > 0.1) or
            g["trace"]["kernel_s_per_launch"] > 1.1 * g["time"]["median_s"]))
        bound = sum(1 for g in gs if g.get("trace", {}).get("launch_bound"))
        err = max((g.get("method", {}).get("check", {}).get("relative_error", 0) for g in gs),
                  default=0)
        print(f"  {dtype:5} {len(gs):5}  {best['tflops']:6.0f} [{best['m']}x{best['n']}x{best['k']}]"
              f"  {at(4096):>5}  {at(8192):>5}  {tc}/{len(gs)}  {dis}  {bound}  {err:.1e}")
    tiny = [g for g in cal.get("gemm", []) if g["m"] * g["n"] * g["k"] <= 64**3 and "trace" in g]
    if tiny:
        # The untimed median not spent in kernels (the trace's overhead_s_per_launch since the
        # stream gate of 2026-11-23; computed here so that earlier files read the same).
        kernel = sorted(g["trace"]["kernel_s_per_launch"] for g in tiny)
        over = sorted(max(0.0, g["time"]["median_s"] - g["trace"]["kernel_s_per_launch"])
                      for g in tiny)
        times = sorted(g["time"]["median_s"] for g in tiny)
        print(f"  tiny GEMMs (<= 64^3): median time {fmt_s(times[len(times) // 2])}, "
              f"kernel {fmt_s(kernel[len(kernel) // 2])}, "
              f"launch overhead {fmt_s(over[len(over) // 2])}")
    names = collections.Counter(k for g in cal.get("gemm", []) for k in g.get("kernels", [])[:1])
    for name, n in names.most_common(3):
        print(f"  kernel {n:5}x {name[:100]}")

    kern = collections.defaultdict(list)
    for k in cal.get("kernels", []):
        kern[k["kernel"]].append(k)
    for name, ks in sorted(kern.items()):
        best = max(ks, key=lambda k: k["GBps"])
        print(f"kernel {name:28} n {len(ks):3}  best {best['GBps']:7.0f} GB/s  params {json.dumps(best.get('params'))[:80]}")

    # The SM clock each timing ran at (method.clocks; docs/calibrate.md "SM clocks").
    def clock(method):
        return clocks.label((method or {}).get("clocks"))

    for section, records in (("GEMMs", cal.get("gemm", [])), ("kernels", cal.get("kernels", []))):
        clocked = [r["method"]["clocks"] for r in records if "clocks" in r.get("method", {})]
        if clocked:
            mhz = sorted(c["sm_mhz_median"] for c in clocked)
            limited = sum(1 for c in clocked if c.get("power_thermal_samples", 0))
            print(f"clocks of {len(clocked)} {section}: SM median {mhz[len(mhz) // 2]:.0f} MHz "
                  f"(lowest median {mhz[0]:.0f}), {limited} under a power or thermal limit")

    for l in cal.get("layers", [])[:40]:
        m = l.get("method", {})
        print(f"layer {l['style']:5} b{l['micro_batch']} s{l['seq_len']} h{l['hidden']} tp{l['tp']}: "
              f"F {fmt_s(l['forward']['median_s'])} B {fmt_s(l['backward_input']['median_s'])} "
              f"W {fmt_s(l['backward_weight']['median_s'])}  act {l['activation_bytes'] / 2**20:.1f} MiB "
              f"(costmodel {m.get('costmodel_activation_bytes', 0) / 2**20:.1f} MiB)  "
              f"MHz {clock(m.get('forward'))}/{clock(m.get('backward_input'))}/"
              f"{clock(m.get('backward_weight'))}")

    fails = cal.get("failures", [])
    if fails:
        kinds = collections.Counter(f["error"].split(":")[0][:60] for f in fails)
        print(f"failures: {len(fails)}: " + "; ".join(f"{n}x {k}" for k, n in kinds.most_common(6)))
        for f in fails[:8]:
            print(f"  {f['what']}: {f['error'][:160]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "out/gpu-session/b/calibration.json"))
