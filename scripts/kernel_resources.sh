#!/usr/bin/env bash
# Prints registers, stack frame, spills and shared memory per kernel for one .cu file of kernels/, from
# ptxas's resource report (no GPU needed), then any warning of the compile (ptxas C75xx included).
# Usage: scripts/kernel_resources.sh kernels/attention.cu [ARCH: 90 (default), 90a, 80, 75]
set -euo pipefail
cd "$(dirname "$0")/.."
src=${1:?usage: $0 kernels/FILE.cu [ARCH]}
arch=${2:-90}
nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
report=$("$nvcc" -I. -O3 -std=c++17 -gencode "arch=compute_${arch},code=sm_${arch}" -lineinfo \
  --resource-usage -c "$src" -o /dev/null 2>&1)
echo "$report" |
  awk '/Compiling entry function/ { match($0, /'"'"'[^'"'"']+'"'"'/); name = substr($0, RSTART + 1, RLENGTH - 2) }
       /bytes stack frame/ { spill = $1 " B stack, " $5 " B spilled" }
       /Used [0-9]+ registers/ { match($0, /Used [0-9]+ registers/); regs = substr($0, RSTART + 5, RLENGTH - 15);
         smem = ""; if (match($0, /[0-9]+ bytes smem/)) smem = ", " substr($0, RSTART, RLENGTH);
         print name "\t" regs " regs, " spill smem }' |
  while IFS=$'\t' read -r name rest; do
    printf '%-70s %s\n' "$(echo "$name" | ${CXXFILT:-c++filt} | sed -E 's/hetplan::kernels::(\(anonymous namespace\)::)?//g; s/\(.*//')" "$rest"
  done
# Warnings the table would hide, above all ptxas's "wgmma serialized" (C7510-C7514), which costs a
# wgmma kernel most of its speed and otherwise shows nowhere.
warnings=$(echo "$report" | grep -E 'warning|C75[0-9][0-9]' | grep -v '^Remark' | sort -u || true)
if [ -n "$warnings" ]; then
  echo "ptxas/nvcc warnings:"
  while IFS= read -r line; do echo "  $line"; done <<< "$warnings"
fi
