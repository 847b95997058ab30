#!/usr/bin/env bash
# Disassembles one .cu file of kernels/ to SASS (the GPU's machine code) without a GPU, and with
# --loops summarises each kernel's loops (scripts/sass_loops.py: instructions per trip, branches,
# MUFU under a branch, spills, instructions per HGMMA).
#
#   scripts/sass.sh kernels/experimental/sm90a/attention_hopper.cu [ARCH] \
#     [--loops [--kernel SUBSTRING]] > out
#
# ARCH: 90a (default for kernels/experimental/sm90a/), 90, 80 or 75. The CUDA toolkit on the
# build machine has nvcc and ptxas but no cuobjdump or nvdisasm. Where $HETPLAN_NVDISASM or the
# toolkit's own nvdisasm is missing, this takes nvdisasm from Debian's nvidia-cuda-toolkit package
# (bookworm non-free, CUDA 11.8; downloaded once, about 84 MB, into
# ${XDG_CACHE_HOME:-~/.cache}/hetplan).
# That nvdisasm knows sm_90's instructions (HGMMA, SYNCS, UBLKCP included) but neither the ELF
# header CUDA 12.8+ writes nor VIADD, which it silently leaves out: scripts/disasm_cubin.py
# bridges both (header rewritten on a copy; VIADD decoded there), and prints UNDECODED with the
# raw words for any other instruction it skips.
set -euo pipefail
cd "$(dirname "$0")/.."
src=${1:?usage: $0 kernels/FILE.cu [ARCH] [--loops [--kernel SUBSTRING]]}
shift
arch=90
case "$src" in kernels/experimental/sm90a/*) arch=90a ;; esac
if [ $# -gt 0 ] && [[ $1 != --* ]]; then
  arch=$1
  shift
fi
loops=0
if [ "${1:-}" = --loops ]; then
  loops=1
  shift
fi
nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
[ -f "$src" ] || { echo "sass.sh: no such file: $src" >&2; exit 1; }

nvdisasm=${HETPLAN_NVDISASM:-}
if [ -z "$nvdisasm" ] && [ -x /usr/local/cuda/bin/nvdisasm ]; then nvdisasm=/usr/local/cuda/bin/nvdisasm; fi
old_header=0
if [ -z "$nvdisasm" ]; then
  cache=${XDG_CACHE_HOME:-$HOME/.cache}/hetplan/nvdisasm-11.8
  nvdisasm=$cache/usr/bin/nvdisasm
  old_header=1
  if [ ! -x "$nvdisasm" ]; then
    echo "sass.sh: fetching nvdisasm (Debian bookworm non-free nvidia-cuda-toolkit) into $cache" >&2
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    mkdir -p "$work/lists/partial" "$work/archives/partial"
    printf 'deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm non-free\n' \
      > "$work/sources.list"
    apt_opts=(-o "Dir::Etc::SourceList=$work/sources.list" -o Dir::Etc::SourceParts=-
      -o "Dir::State::Lists=$work/lists" -o "Dir::Cache::Archives=$work/archives"
      -o APT::Sandbox::User=root)
    apt-get "${apt_opts[@]}" update -qq > /dev/null ||
      { echo "sass.sh: apt-get update of Debian non-free failed" >&2; exit 1; }
    (cd "$work" && apt-get "${apt_opts[@]}" download nvidia-cuda-toolkit > /dev/null) ||
      { echo "sass.sh: apt-get download nvidia-cuda-toolkit failed" >&2; exit 1; }
    mkdir -p "$work/x" "$cache/usr/bin"
    dpkg -x "$work"/nvidia-cuda-toolkit_*.deb "$work/x"
    cp "$work/x/usr/bin/nvdisasm" "$cache/usr/bin/nvdisasm"
  fi
fi

cubin=$(mktemp --suffix=.cubin)
trap 'rm -f "$cubin"' EXIT
"$nvcc" -I. -O3 -std=c++17 -gencode "arch=compute_${arch},code=sm_${arch}" -cubin "$src" -o "$cubin"
disasm() {
  if [ "$old_header" = 1 ]; then
    python3 scripts/disasm_cubin.py "$cubin" "$nvdisasm"
  else
    "$nvdisasm" -c "$cubin"
  fi
}
if [ "$loops" = 1 ]; then
  disasm | python3 scripts/sass_loops.py - "$@"
else
  disasm
fi
