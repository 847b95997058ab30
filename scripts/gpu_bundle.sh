#!/usr/bin/env bash
# Packs what scripts/gpu_calibrate.sh needs on a GPU machine into gpu-bundle/ (ignored by git; name
# it in the device tool's `carry`): the hetplan and GPU-test binaries and the shared libraries they
# load that a CUDA machine may lack (yaml-cpp, CBC, ...). CUDA's own libraries (cuBLAS(Lt), CUPTI,
# NCCL: hundreds of MB) are not copied: gpu_calibrate.sh finds them on the GPU machine.
# Run after a CUDA build. Usage: scripts/gpu_bundle.sh [BUILD_DIR]. For an H100 alone, a build for
# sm_90 only is a third of the size and compiles faster:
#   HETPLAN_BUILD_DIR=build-h100 bash scripts/build.sh -DCMAKE_CUDA_ARCHITECTURES=90
#   bash scripts/gpu_bundle.sh build-h100
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-${HETPLAN_BUILD_DIR:-build}}
bundle=gpu-bundle
for f in "$build/cli/hetplan" "$build/cli/libhetplan_gpu.so" "$build/tests/hetplan_gpu_tests"; do
  [ -x "$f" ] || { echo "gpu_bundle: $f missing: build with CUDA first (bash scripts/build.sh)" >&2; exit 1; }
done
rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib"
# libhetplan_gpu.so: hetplan's CUDA half, loaded from beside the executable when it calibrates.
cp "$build/cli/hetplan" "$build/cli/libhetplan_gpu.so" "$build/tests/hetplan_gpu_tests" \
  "$bundle/bin/"
# Other GPU programs of the build (the kernels benchmark; the kernels' C interface, which the
# PyTorch reference harness loads from here: scripts/reference/fused.py), when present.
for extra in "$build"/kernels/hetplan_kernel_bench "$build"/kernels/libhetplan_kernels_c.so; do
  if [ -x "$extra" ]; then cp "$extra" "$bundle/bin/"; fi
done
# Symbols are not needed to run; the device code (one fatbin per architecture) is most of the size.
for f in "$bundle"/bin/*; do strip --strip-unneeded "$f"; done
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
