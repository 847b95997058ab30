#!/usr/bin/env bash
# The test command: installs what is missing (what only the tests need too: scripts/setup.sh
# --tests), builds everything (the CUDA half where the toolkit is found, every test), runs every
# test. GPU tests (label `gpu`) skip cleanly on a machine without a GPU. Extra arguments go to
# ctest (e.g. -L gpu).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
build_dir=${HETPLAN_BUILD_DIR:-build}
ctest --test-dir "$build_dir" --output-on-failure -j"${HETPLAN_JOBS:-$(nproc)}" "$@"
