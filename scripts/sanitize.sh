#!/usr/bin/env bash
# The CPU tests under AddressSanitizer and UndefinedBehaviorSanitizer, in build-asan/ (or
# $HETPLAN_BUILD_DIR): a CPU-only build (no CUDA), every test not labelled gpu. Slow (about 35
# minutes to build on 2 cores); not part of CI. Extra arguments go to ctest (e.g. -R Search).
#
# One test is left out: WgmmaEmulated.GenericStoresNeedTheProxyFence expects an exception thrown
# inside an emulator fiber (ucontext), which ASan reports as a stack overflow it cannot tell from
# a real one (its own warning: "ASan doesn't fully support makecontext/swapcontext").
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
build_dir=${HETPLAN_BUILD_DIR:-build-asan}
flags="-fsanitize=address,undefined -fno-omit-frame-pointer"
if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHETPLAN_CUDA=OFF \
    -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
    -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined"
fi
cmake --build "$build_dir" -j"${HETPLAN_JOBS:-$(nproc)}"
export ASAN_OPTIONS=detect_leaks=0:halt_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
cd "$build_dir"
ctest -j"${HETPLAN_JOBS:-$(nproc)}" -LE gpu --timeout 600 --output-on-failure \
  -E 'WgmmaEmulated.GenericStoresNeedTheProxyFence' "$@"
