#!/usr/bin/env bash
# Packs what scripts/gpu_calibrate.sh needs on a GPU machine into gpu-bundle/ (ignored by git; name
# it in the device tool's `carry`): the hetplan and GPU-test binaries and the shared libraries they
# load that a CUDA machine may lack (yaml-cpp, CBC, ...). CUDA's own libraries (cuBLAS(Lt), CUPTI,
# NCCL: hundreds of MB) are not copied: gpu_calibrate.sh finds them on the GPU machine.
# Run after `bash scripts/build.sh` (a CUDA build). Usage: scripts/gpu_bundle.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-${HETPLAN_BUILD_DIR:-build}}
bundle=gpu-bundle
for f in "$build/cli/hetplan" "$build/tests/hetplan_gpu_tests"; do
  [ -x "$f" ] || { echo "gpu_bundle: $f missing: build with CUDA first (bash scripts/build.sh)" >&2; exit 1; }
done
rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib"
cp "$build/cli/hetplan" "$build/tests/hetplan_gpu_tests" "$bundle/bin/"
# Other GPU programs of the build (the kernels benchmark), when present.
for extra in "$build"/kernels/hetplan_kernel_bench; do
  [ -x "$extra" ] && cp "$extra" "$bundle/bin/"
done
# Shared libraries outside glibc, the C++ runtime and CUDA.
for bin in "$bundle"/bin/*; do
  ldd "$bin" | awk '/=> \// {print $3}'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|libutil.so*|ld-linux*|libgcc_s.so*|libstdc++.so*) continue ;;
    libcuda.so*|libcublas*|libcupti*|libnccl*|libcudart*|libnvidia*) continue ;;
  esac
  cp -L "$lib" "$bundle/lib/"
done
du -sh "$bundle"
ls "$bundle/bin" "$bundle/lib"
