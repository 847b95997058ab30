#!/usr/bin/env bash
# On a GPU machine, with gpu_bundle/ (scripts/kernel_gpu_bundle.sh) carried: the kernels' GPU
# tests, the kernel benchmark and the attention comparison with PyTorch's SDPA, in one go, all
# output under $OUT (default ./out). Each step has its own time limit so that the next still runs
# and the whole stays under 10 minutes; the benchmark rewrites its JSON after every result.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$PWD/out}
mkdir -p "$out"
ours() { LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@"; }
summary="$out/summary.txt"
: > "$summary"

{ nvidia-smi; nvidia-smi -q -d CLOCK,PERFORMANCE; } > "$out/gpu.txt" 2>&1

ours timeout 150 "$here/hetplan_gpu_tests" --gtest_filter='*KernelCase*:*KernelProperties*' \
  > "$out/gpu_tests.log" 2>&1
echo "gpu tests: exit $?" >> "$summary"
# Totals and the names of failed tests (their details are in gpu_tests.log).
grep -E '^\[  (PASSED|FAILED|SKIPPED) +\] [0-9]+ tests?|^\[  FAILED  \] .*\([0-9]+ ms\)' \
  "$out/gpu_tests.log" | head -40 >> "$summary"
grep -F 'wgmma self-test' "$out/gpu_tests.log" >> "$summary"

ours timeout 240 "$here/hetplan_kernel_bench" --json "$out/kernel_bench.json" \
  > "$out/bench_table.txt" 2> "$out/bench.log"
echo "kernel bench: exit $?" >> "$summary"

# The attention cases again on each path alone: mma.sync (the sm_80 kernels) and wgmma (which
# compute capability 9.0 runs by default except for the d = 64 backward, attention.cu).
for path in mma wgmma; do
  HETPLAN_ATTENTION_KERNEL=$path ours timeout 60 "$here/hetplan_kernel_bench" --filter attention \
    --json "$out/kernel_bench_$path.json" > "$out/bench_table_$path.txt" 2> "$out/bench_$path.log"
  echo "kernel bench, attention on $path only: exit $?" >> "$summary"
done

PYTHONUNBUFFERED=1 timeout 90 python3 "$here/bench_attention_torch.py" \
  --ours "$out/kernel_bench.json" --json "$out/attention_torch.json" \
  > "$out/attention_compare.txt" 2>&1
echo "torch comparison: exit $?" >> "$summary"

cat "$summary" "$out/bench_table.txt" "$out/attention_compare.txt"
for path in mma wgmma; do grep attention "$out/bench_table_$path.txt" | sed "s/^/$path only: /"; done
