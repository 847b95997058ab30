#!/usr/bin/env bash
# On a GPU machine: prints the GPU, runs the GPU tests, runs `hetplan calibrate` (every section
# this build has), copies the results to $OUT (when set) and prints a short summary.
#
# Uses gpu-bundle/ (scripts/gpu_bundle.sh) when present, else build/. The calibration and its
# journal live in out/gpu/ (ignored by git) and the run always resumes, so a second call on the same
# machine continues where a time limit stopped the first: nothing measured is lost or repeated.
#
#   bash scripts/gpu_calibrate.sh [full|quick|tests]      (default full)
#   HETPLAN_CALIBRATE_SECONDS  stop calibrating gracefully after this many seconds (default 480)
#   HETPLAN_CALIBRATE_ARGS     extra arguments for hetplan calibrate (e.g. "--gemm")
#   HETPLAN_FRESH=1            delete out/gpu/ first
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-full}
start_s=$(date +%s)
work=out/gpu
[ "${HETPLAN_FRESH:-0}" = 1 ] && rm -rf "$work"
mkdir -p "$work"

if [ -d gpu-bundle/bin ]; then
  bin=gpu-bundle/bin
  export LD_LIBRARY_PATH="$PWD/gpu-bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
else
  bin=build/cli
fi
hetplan=$PWD/$bin/hetplan
gpu_tests=$PWD/$bin/hetplan_gpu_tests
[ -x "$gpu_tests" ] || gpu_tests=$PWD/build/tests/hetplan_gpu_tests
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
missing=$(ldd "$hetplan" | grep "not found" || true)
if [ -n "$missing" ]; then
  echo "gpu_calibrate: hetplan cannot load: $missing" >&2
  exit 1
fi
ldd "$hetplan" | grep -E "cublas|cupti|nccl|yaml" | sed 's/ (0x.*//'

echo "== GPU tests"
if [ -x "$gpu_tests" ]; then
  "$gpu_tests" --gtest_color=no 2>&1 | tee "$work/gpu_tests.log" |
    grep -E "^\[ +(OK|FAILED|SKIPPED|PASSED) +\]|Failure|rror" | awk 'NR <= 60' 
  echo "gpu tests: exit ${PIPESTATUS[0]}"
else
  echo "gpu_calibrate: no GPU test binary" | tee "$work/gpu_tests.log"
fi

if [ "$mode" != tests ]; then
  echo "== hetplan calibrate ($mode)"
  args=(calibrate --out "$work/calibration.json" --resume)
  [ "$mode" = quick ] && args+=(--quick)
  # shellcheck disable=SC2206
  args+=(${HETPLAN_CALIBRATE_ARGS:-})
  # SIGINT at the deadline: hetplan finishes the measurement in flight, writes the file, exits 1.
  # awk, not head: the pipe must never close early (hetplan would die of SIGPIPE).
  timeout --preserve-status --signal=INT --kill-after=60 "${HETPLAN_CALIBRATE_SECONDS:-480}" \
    "$hetplan" "${args[@]}" 2>&1 | tee "$work/calibrate.log" | grep -v "^calibrate: \[" |
    awk 'NR <= 120 { print } NR == 121 { print "... (more in calibrate.log)" }' 
  status=${PIPESTATUS[0]}
  echo "calibrate: exit $status (0 complete, 1 stopped or failed: run this script again to resume)"
  grep "^calibrate: \[" "$work/calibrate.log" | tail -1
fi

echo "== summary"
python3 scripts/calibration_summary.py "$work/calibration.json" 2>&1 | tee "$work/summary.txt"
echo "elapsed $(( $(date +%s) - start_s )) s"

if [ -n "${OUT:-}" ]; then
  cp "$work"/calibration.json "$work"/calibration.json.journal "$work"/calibrate.log \
     "$work"/gpu_tests.log "$work"/summary.txt "$work"/nvidia-smi.txt "$OUT"/ 2>/dev/null
  ls -la "$OUT"
fi
