#!/usr/bin/env bash
# Formats every C++ and CUDA source with clang-format (.clang-format at the root), or with
# --check lists the files that are not formatted and exits 1. The generated
# kernels/experimental/simt_wgmma_ptx.h (scripts/gen_wgmma_ptx.py) is left as generated.
#   bash scripts/format.sh [--check]
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format > /dev/null || {
  echo "format.sh: clang-format not found (apt-get install clang-format)" >&2
  exit 1
}
mapfile -t files < <(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh' |
  grep -v '^kernels/experimental/simt_wgmma_ptx.h$')
if [ "${1:-}" = --check ]; then
  bad=0
  for f in "${files[@]}"; do
    if ! clang-format --dry-run --Werror "$f" > /dev/null 2>&1; then
      echo "not formatted: $f"
      bad=1
    fi
  done
  exit "$bad"
fi
clang-format -i "${files[@]}"
