#!/usr/bin/env bash
# Predicted against measured on one GPU (scripts/measure_sweep.py, docs/measure.md):
#   scripts/measure_sweep.sh OUT [CALIBRATION...]
# OUT receives the predictions, the measurements file and comparison.json; CALIBRATION files of
# this GPU (hetplan calibrate output, or a profile) back the predictions. Environment: HETPLAN (the
# binary, default build/cli/hetplan), HETPLAN_PYTHON (a Python with PyTorch, default python3),
# SWEEP_ARGS (more arguments, e.g. --quick, or --measurements FILE: predict again and compare with
# FILE, an earlier sweep's measurements.json, without the harness or a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/measure_sweep.sh OUT [CALIBRATION...]}
shift
python=${HETPLAN_PYTHON:-python3}
args=(--out "$out" --hetplan "${HETPLAN:-build/cli/hetplan}" --python "$python")
if [ $# -gt 0 ]; then args+=(--calibration "$@"); fi
# shellcheck disable=SC2086
exec python3 scripts/measure_sweep.py "${args[@]}" ${SWEEP_ARGS:-}
