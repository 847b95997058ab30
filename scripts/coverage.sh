#!/usr/bin/env bash
# Line and branch coverage of the CPU tests, in build-cov/ (or $HETPLAN_BUILD_DIR): a CPU-only
# build (no CUDA) with gcc's --coverage at -O0, every test not labelled gpu, then gcovr's summary
# per folder and the files least covered. Slow (a full build, and tests about 2x slower); not part
# of CI. Extra arguments go to ctest (e.g. -R Search): the report is then of those tests alone.
#
# What it cannot see: the CUDA half (profiler/ outside profiler/common and profiler/metrics's CPU
# part, kernels/*.cu), which the GPU tests cover on a GPU, and the Python scripts.
#
# Output: build-cov/coverage/summary.txt (per folder and the 25 least-covered files of 100 lines
# or more) and build-cov/coverage/index.html (gcovr's per-line HTML, to open offline).
#
# Left out of the test run, as in scripts/sanitize.sh and for the same reason (code several times
# slower than a release build misses their time limits): ServeSearch.TimeLimitIsHonoured and the
# link bound of Helix's three-region cluster.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --tests
command -v gcovr > /dev/null || {
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends gcovr
}
root=$PWD
build_dir=${HETPLAN_BUILD_DIR:-build-cov}
# Atomic counters: the search's and the serving planner's threads would otherwise race on them
# (gcov then reads negative branch counts, which gcovr cannot parse).
flags="--coverage -O0 -fprofile-update=atomic"
if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DHETPLAN_CUDA=OFF \
    -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_C_FLAGS="$flags" \
    -DCMAKE_EXE_LINKER_FLAGS="--coverage" -DCMAKE_SHARED_LINKER_FLAGS="--coverage"
fi
cmake --build "$build_dir" -j"${HETPLAN_JOBS:-$(nproc)}"
# Counts of an earlier run would add up with this one's.
find "$build_dir" -name '*.gcda' -delete
time_limits='ServeSearch.TimeLimitIsHonoured|ServeLinkBoundHelix.BoundsEveryPlacementFound/ThreeRegions24'
status=0
(cd "$build_dir" && ctest -j"${HETPLAN_JOBS:-$(nproc)}" -LE gpu --timeout 900 --output-on-failure \
  -E "$time_limits" "$@") || status=$?

report=$build_dir/coverage
mkdir -p "$report"
# Our sources only: not the tests themselves, not third-party headers, not generated files.
filters=(--filter "$root/(cli|costmodel|search|report|profiler|kernels)/")
gcovr -r "$root" "$build_dir" "${filters[@]}" --exclude-unreachable-branches \
  --exclude-throw-branches -j"${HETPLAN_JOBS:-$(nproc)}" --json "$report/coverage.json" \
  --html-details "$report/index.html" --print-summary > "$report/total.txt"
python3 scripts/coverage_summary.py "$report/coverage.json" --total "$report/total.txt" \
  | tee "$report/summary.txt"
echo "coverage: $report/summary.txt, $report/index.html (tests exit status $status)"
exit $status
