#!/usr/bin/env bash
# Collective calibration on the GPU machine at hand (one H100 is enough): the GPU tests of the
# collective sweep, a full single-node sweep (on one GPU: every collective on a 1-rank
# communicator, send/recv to itself, host-device copies pinned and pageable), its fit, and timings.
# Everything goes to $OUT (default ./out). Run from a built tree: bash scripts/gpu_collectives.sh
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out}
mkdir -p "$out"
bin=${HETPLAN_BINARY:-build/cli/hetplan}
gpu_tests=${HETPLAN_GPU_TESTS:-build/tests/hetplan_gpu_tests}
log="$out/collectives_log.txt"
: > "$log"
say() { echo "$*" | tee -a "$log"; }

say "== $(date -u +%FT%TZ) on $(hostname)"
nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.max,pcie.link.width.max \
  --format=csv 2>&1 | tee -a "$log"
nvidia-smi topo -m 2>&1 | tee -a "$log"

say "== GPU tests (GpuCollectives.*)"
"$gpu_tests" --gtest_filter='GpuCollectives.*' 2>&1 | tee -a "$log"

say "== quick sweep"
start=$(date +%s%N)
"$bin" calibrate-collectives --quick --out "$out/collectives_quick.json" 2>>"$log" | tee -a "$log"
say "quick sweep: $(( ($(date +%s%N) - start) / 1000000 )) ms"

say "== full sweep"
start=$(date +%s%N)
"$bin" calibrate-collectives --out "$out/collectives_full.json" 2>>"$log" | tee -a "$log"
say "full sweep: $(( ($(date +%s%N) - start) / 1000000 )) ms"

say "== fit of the full sweep"
"$bin" fit-collectives "$out/collectives_full.json" --out "$out/collectives_fit.json" 2>&1 |
  tee -a "$log"
