#!/usr/bin/env bash
# On a GPU machine: prints the GPU, runs the GPU tests, runs `hetplan calibrate` (every section
# this build has), copies the results to $OUT (when set) and prints a short summary.
#
#   bash scripts/gpu_calibrate.sh [full|quick|calibrate|tests]      (default full)
#     full       GPU tests, then the full calibration (resumable) in out/gpu-full/
#     quick      GPU tests, then `calibrate --quick` in out/gpu-quick/
#     calibrate  no tests: continue the full calibration (a second call after a time limit)
#     tests      GPU tests only
#   HETPLAN_CALL_SECONDS       the time this call may take in all (default 570: the device tool's
#                              600 s limit less a margin); calibration stops gracefully in time
#   HETPLAN_CALIBRATE_ARGS     extra arguments for hetplan calibrate (e.g. "--gemm --kernels")
#   HETPLAN_FRESH=1            delete the calibration folder first
#
# Uses gpu-bundle/ (scripts/gpu_bundle.sh) when present, else build/. The calibration and its
# journal stay in out/ (ignored by git) and the run always resumes, so a second call on the same
# machine continues where the first stopped: nothing measured is lost or measured twice. On a
# fresh machine, put the journals' .gz files from the first call's $OUT into out/gpu-full/ and
# carry that folder too.
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-full}
start_s=$(date +%s)
budget_s=${HETPLAN_CALL_SECONDS:-570}
case "$mode" in
  quick) work=out/gpu-quick ;;
  full|calibrate|tests) work=out/gpu-full ;;
  *) echo "usage: $0 [full|quick|calibrate|tests]" >&2; exit 2 ;;
esac
[ "${HETPLAN_FRESH:-0}" = 1 ] && rm -rf "$work"
mkdir -p "$work"
# Resuming on a fresh machine: journals brought back from an earlier call's $OUT (put the .gz files
# in $work and carry it) are unpacked where --resume looks for them.
for gz in "$work"/*.gz; do
  [ -f "$gz" ] && [ ! -f "${gz%.gz}" ] && gunzip -k "$gz"
done

if [ -d gpu-bundle/bin ]; then
  bin=$PWD/gpu-bundle/bin
  export LD_LIBRARY_PATH="$PWD/gpu-bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  gpu_tests=$bin/hetplan_gpu_tests
else
  bin=$PWD/build/cli
  gpu_tests=$PWD/build/tests/hetplan_gpu_tests
fi
hetplan=$bin/hetplan
export HETPLAN_BINARY=$hetplan

# CUDA libraries: wherever this machine has them (toolkit, CUPTI extras, pip's nvidia-* wheels).
for d in /usr/local/cuda/lib64 /usr/local/cuda/extras/CUPTI/lib64 \
         $(python3 - 2>/dev/null <<'PY'
import glob, os, site
roots = site.getsitepackages() + [site.getusersitepackages()]
for r in roots:
    for d in sorted(glob.glob(os.path.join(r, "nvidia", "*", "lib"))):
        print(d)
PY
); do
  [ -d "$d" ] && LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d"
done
export LD_LIBRARY_PATH

echo "== nvidia-smi"
nvidia-smi 2>&1 | tee "$work/nvidia-smi.txt"
echo "== libraries"
# hetplan loads its CUDA half (libhetplan_gpu.so, beside it) when it calibrates: check both.
module=$(dirname "$hetplan")/libhetplan_gpu.so
for f in "$hetplan" "$module"; do
  [ -f "$f" ] || { echo "gpu_calibrate: $f missing" >&2; exit 1; }
  missing=$(ldd "$f" | grep "not found" || true)
  if [ -n "$missing" ]; then
    echo "gpu_calibrate: $f cannot load: $missing" >&2
    exit 1
  fi
done
ldd "$module" | grep -E "cublas|cupti|nccl|yaml" | sed 's/ (0x.*//'

if [ "$mode" != calibrate ]; then
  echo "== GPU tests"
  "$gpu_tests" --gtest_color=no 2>&1 | tee "$work/gpu_tests.log" |
    grep -E "^\[ +(OK|FAILED|SKIPPED|PASSED) +\]|Failure|rror" | awk 'NR <= 80'
  echo "gpu tests: exit ${PIPESTATUS[0]} after $(( $(date +%s) - start_s )) s"
  grep -E "^(bf16 4096\^3 kernels|best device copy|gpt F|llama F)" "$work/gpu_tests.log"
fi

if [ "$mode" != tests ]; then
  left_s=$(( budget_s - ($(date +%s) - start_s) - 45 ))
  if [ "$left_s" -lt 60 ]; then
    echo "== hetplan calibrate: only ${left_s} s left in this call; run '$0 calibrate' next"
  else
    echo "== hetplan calibrate ($mode, stops gracefully after ${left_s} s)"
    args=(calibrate --out "$work/calibration.json" --resume)
    [ "$mode" = quick ] && args+=(--quick)
    # shellcheck disable=SC2206
    args+=(${HETPLAN_CALIBRATE_ARGS:-})
    # SIGINT at the deadline: hetplan finishes the measurement in flight, writes the file, exits 1.
    # awk, not head: the pipe must never close early (hetplan would die of SIGPIPE).
    timeout --preserve-status --signal=INT --kill-after=40 "$left_s" \
      "$hetplan" "${args[@]}" 2>&1 | tee -a "$work/calibrate.log" | grep -v "^calibrate: \[" |
      awk 'NR <= 100 { print } NR == 101 { print "... (more in calibrate.log)" }'
    status=${PIPESTATUS[0]}
    grep "^calibrate: \[" "$work/calibrate.log" | tail -1
    echo "calibrate: exit $status (0 complete; 1 stopped or failed: '$0 calibrate' continues)"
  fi
fi

echo "== summary"
python3 scripts/calibration_summary.py "$work/calibration.json" 2>&1 | tee "$work/summary.txt"
echo "elapsed $(( $(date +%s) - start_s )) s"

if [ -n "${OUT:-}" ]; then
  # Compressed: a full calibration and its journal are several MB each (the tool takes 16 MiB a
  # file at most).
  for f in calibration.json calibration.json.journal calibration.json.collectives.rank0.jsonl \
           calibrate.log gpu_tests.log; do
    [ -f "$work/$f" ] && gzip -9 -c "$work/$f" > "$OUT/$f.gz"
  done
  for f in summary.txt nvidia-smi.txt; do
    [ -f "$work/$f" ] && cp "$work/$f" "$OUT/"
  done
  ls -la "$OUT"
fi
