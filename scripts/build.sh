#!/usr/bin/env bash
# Configures and builds hetplan into build/ (or $HETPLAN_BUILD_DIR). Extra arguments go to cmake's
# first configure.
#
#   scripts/build.sh          everything: the CUDA half where the toolkit is found, and the tests
#   scripts/build.sh --main   `hetplan` alone, without CUDA and tests: what scripts/main.sh runs
#
# One build folder serves both. A folder that --main configured (HETPLAN_BUILD_SET=main) is
# configured again for everything by the next plain build, which keeps the objects the two share.
set -euo pipefail
cd "$(dirname "$0")/.."
set_wanted=all
if [ "${1:-}" = "--main" ]; then
  set_wanted=main
  shift
fi
if [ "$set_wanted" = main ]; then
  bash scripts/setup.sh
else
  bash scripts/setup.sh --tests
fi
build_dir=${HETPLAN_BUILD_DIR:-build}
jobs=${HETPLAN_JOBS:-$(nproc)}
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)

cache="$build_dir/CMakeCache.txt"
if [ ! -f "$cache" ]; then
  configured=()
  [ "$set_wanted" = main ] && configured=(-DHETPLAN_TESTS=OFF -DHETPLAN_CUDA=OFF)
  cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DHETPLAN_BUILD_SET="$set_wanted" "${configured[@]}" "$@"
elif [ "$set_wanted" = all ] && grep -q '^HETPLAN_BUILD_SET:STRING=main$' "$cache"; then
  cmake -S . -B "$build_dir" -DHETPLAN_BUILD_SET=all -DHETPLAN_TESTS=ON -DHETPLAN_CUDA=AUTO
fi

if [ "$set_wanted" = main ]; then
  cmake --build "$build_dir" -j"$jobs" --target hetplan
else
  cmake --build "$build_dir" -j"$jobs"
fi
