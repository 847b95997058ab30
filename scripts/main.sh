#!/usr/bin/env bash
# The main job: build hetplan, then plan training on example clusters from the shipped calibration
# data (no GPU needed). Results go to out/ (or $HETPLAN_OUT).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
hetplan=${HETPLAN_BUILD_DIR:-build}/cli/hetplan
out=${HETPLAN_OUT:-out}
mkdir -p "$out"

echo "== Predict GPT-2 medium on 4 g4dn.12xlarge nodes (16 T4) with a fixed strategy"
"$hetplan" predict --model gpt2-medium --cluster g4dn.12xlarge:4 \
  --strategy examples/strategies/gpt2-medium-g4dn.json --json "$out/predict-gpt2-g4dn.json"
echo "wrote $out/predict-gpt2-g4dn.json"
