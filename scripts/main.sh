#!/usr/bin/env bash
# The main job: build hetplan (the command alone: no tests, no CUDA half; scripts/build.sh --main),
# then plan training on example clusters from the shipped calibration data (no GPU needed). Results
# go to out/ (or $HETPLAN_OUT).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh --main
hetplan=${HETPLAN_BUILD_DIR:-build}/cli/hetplan
out=${HETPLAN_OUT:-out}
mkdir -p "$out"

echo "== Predict GPT-2 medium on 4 g4dn.12xlarge nodes (16 T4) with a fixed strategy"
"$hetplan" predict --model gpt2-medium --cluster g4dn.12xlarge:4 \
  --strategy examples/strategies/gpt2-medium-g4dn.json --json "$out/predict-gpt2-g4dn.json"
echo "wrote $out/predict-gpt2-g4dn.json"

echo
echo "== Search: GPT-2 medium on AMP's heterogeneous cluster (3 p3.8xlarge V100 + 1 g4dn.12xlarge T4)"
"$hetplan" search --model gpt2-medium --cluster p3.8xlarge:3,g4dn.12xlarge:1 --global-batch 32 \
  --top 5 --quiet --json "$out/search-gpt2-amp-hetero.json"

echo
echo "== Search: GPT-3 175B on 1024 GPUs of three generations (H100, A100, V100)"
"$hetplan" search --model gpt3-175b --cluster three-gen-1024 --global-batch 1536 --top 5 \
  --threads "$(nproc)" --quiet --json "$out/search-gpt3-175b-1024.json"

echo
echo "== The same, allowed to leave whole node groups idle (--allow-idle-nodes)"
"$hetplan" search --model gpt3-175b --cluster three-gen-1024 --global-batch 1536 --top 5 \
  --threads "$(nproc)" --allow-idle-nodes --quiet --json "$out/search-gpt3-175b-1024-idle.json"
echo "wrote $out/*.json"
