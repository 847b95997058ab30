#!/usr/bin/env bash
# Prints registers, stack frame, spills and shared memory per kernel for one .cu file of kernels/, from
# ptxas's resource report (no GPU needed). Usage: scripts/kernel_resources.sh kernels/attention.cu [90]
set -euo pipefail
cd "$(dirname "$0")/.."
src=${1:?usage: $0 kernels/FILE.cu [ARCH]}
arch=${2:-90}
nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
"$nvcc" -I. -O3 -std=c++17 -gencode "arch=compute_${arch},code=sm_${arch}" -lineinfo \
  --resource-usage -c "$src" -o /dev/null 2>&1 |
  awk '/Compiling entry function/ { match($0, /'"'"'[^'"'"']+'"'"'/); name = substr($0, RSTART + 1, RLENGTH - 2) }
       /bytes stack frame/ { spill = $1 " B stack, " $5 " B spilled" }
       /Used [0-9]+ registers/ { match($0, /Used [0-9]+ registers/); regs = substr($0, RSTART + 5, RLENGTH - 15);
         smem = ""; if (match($0, /[0-9]+ bytes smem/)) smem = ", " substr($0, RSTART, RLENGTH);
         print name "\t" regs " regs, " spill smem }' |
  while IFS=$'\t' read -r name rest; do
    printf '%-70s %s\n' "$(echo "$name" | ${CXXFILT:-c++filt} | sed -E 's/hetplan::kernels::(\(anonymous namespace\)::)?//g; s/\(.*//')" "$rest"
  done
