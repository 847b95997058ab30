#!/usr/bin/env bash
# Packs every binary the GPU session runs (scripts/gpu_session.sh, docs/benchmarks.md "Still to
# be measured on a GPU") into gpu-bundle/ (ignored by git; name it in the device tool's `carry`):
#
#   gpu-bundle/hetplan-gpu.tar.xz   bin/: hetplan, libhetplan_gpu.so (its CUDA half, loaded from
#                                   beside it), hetplan_gpu_tests, hetplan_kernel_bench,
#                                   libhetplan_kernels_c.so (the harness's fused kernels),
#                                   hetplan_kernel_metrics (hardware counters through CUPTI);
#                                   lib/: the shared libraries they load beyond glibc, the C++
#                                   runtime and CUDA (CBC, yaml-cpp, LAPACK, ...);
#                                   cupti/: libcupti.so.13 with the libnvperf_host.so and
#                                   libnvperf_target.so it loads at run time (dlopen, so ldd
#                                   does not list them), a matching set for machines whose CUPTI
#                                   lacks them (gpu_session.sh decides; about 5 MB packed)
#   gpu-bundle/MANIFEST.txt         commit, build folder, CUDA architectures, files and sizes
#
# The scripts and Python files run from the repository copy the device tool sends with every
# call. CUDA's own libraries (cuBLAS(Lt), CUPTI, NCCL: hundreds of MB) are not copied: the GPU
# machine has them. The five binaries each hold the kernels' device code; xz over one tar sees
# the copies and keeps one, which is most of the saving (scripts/gpu_session.sh unpacks it).
#
# Usage: scripts/gpu_bundle.sh [BUILD_DIR]   (default $HETPLAN_BUILD_DIR, else build-h100/, else
# build/). Build for the H100 alone first (sm_90; a third of the device code of the default
# three architectures):
#   HETPLAN_BUILD_DIR=build-h100 nice bash scripts/build.sh -DCMAKE_CUDA_ARCHITECTURES=90
# adding -DHETPLAN_EXPERIMENTAL_KERNELS=ON for the session's wgmma steps and Hopper self-tests
# (docs/kernels.md, "Experimental kernels"; without it those steps run the mma.sync kernels).
# Exit status 1 when a binary is missing, a library cannot be resolved, or the archive exceeds
# HETPLAN_BUNDLE_MAX_MIB (default 40: the device tool carries 64 MiB in all, the repository's
# tracked files and earlier calls' results included).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-${HETPLAN_BUILD_DIR:-}}
if [ -z "$build" ]; then
  build=build
  [ -f build-h100/cli/hetplan ] && build="build-h100"
fi
max_mib=${HETPLAN_BUNDLE_MAX_MIB:-40}
bundle=gpu-bundle
binaries=("$build/cli/hetplan" "$build/cli/libhetplan_gpu.so" "$build/tests/hetplan_gpu_tests"
          "$build/kernels/hetplan_kernel_bench" "$build/kernels/libhetplan_kernels_c.so"
          "$build/profiler/metrics/hetplan_kernel_metrics")
for f in "${binaries[@]}"; do
  [ -x "$f" ] || { echo "gpu_bundle: $f missing: build with CUDA first (see above)" >&2; exit 1; }
done

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib"
cp "${binaries[@]}" "$stage/bin/"
# Symbols are not needed to run; the device code is most of what remains.
strip --strip-unneeded "$stage"/bin/*

# The libraries a machine may lack: everything the binaries load (directly or through each
# other) except glibc, the C++ runtime and CUDA. The system's libstdc++ is used on purpose: a copy
# of this machine's would need this machine's glibc (2.36); the binaries need GLIBCXX_3.4.30 (any
# Ubuntu 24.04 has it). gpu_session.sh puts a copied library on the path only where the GPU
# machine lacks it, so that Python and PyTorch keep their own.
is_system_lib() {
  case "$1" in
    linux-vdso.so* | libc.so* | libm.so* | libdl.so* | librt.so* | libpthread.so* | libutil.so* | \
      ld-linux* | libgcc_s.so* | libstdc++.so*) return 0 ;;
  esac
  return 1
}
is_cuda_lib() {
  case "$1" in
    libcuda.so* | libcublas* | libcupti* | libnccl* | libcudart* | libnvidia* | libnvrtc* | \
      libnvJitLink*) return 0 ;;
  esac
  return 1
}
for f in "$stage"/bin/*; do ldd "$f"; done | awk '/=> \// {print $3}' | sort -u |
  while read -r lib; do
    name=$(basename "$lib")
    is_system_lib "$name" || is_cuda_lib "$name" || cp -L "$lib" "$stage/lib/$name"
  done

# Completeness: with lib/ on the path, every dependency of every binary and library resolves into
# lib/, or is a system or CUDA library (which the GPU machine provides). Checked by name, here.
problems=0
for f in "$stage"/bin/* "$stage"/lib/*; do
  while read -r name arrow path _; do
    [ "$arrow" = "=>" ] || continue
    if is_system_lib "$name" || is_cuda_lib "$name"; then continue; fi
    if [ "$path" != "$stage/lib/$name" ]; then
      echo "gpu_bundle: $(basename "$f") needs $name, found at '$path', not in lib/" >&2
      problems=$((problems + 1))
    fi
  done < <(LD_LIBRARY_PATH="$stage/lib" ldd "$f")
done
[ "$problems" -eq 0 ] || exit 1

# CUPTI's profiler libraries, all from the directory of the libcupti the tool links here (they
# must be one version: libcupti checks the libnvperf it loads).
mkdir -p "$stage/cupti"
cupti_lib=$(ldd "$stage/bin/hetplan_kernel_metrics" | awk '/libcupti\.so/ {print $3}')
cupti_dir=$(dirname "$(readlink -f "${cupti_lib:-/nonexistent}")")
for name in "$(basename "${cupti_lib:-libcupti.so.13}")" libnvperf_host.so libnvperf_target.so; do
  if [ ! -f "$cupti_dir/$name" ]; then
    echo "gpu_bundle: $name not found beside libcupti ('$cupti_dir')" >&2
    exit 1
  fi
  cp -L "$cupti_dir/$name" "$stage/cupti/$name"
done

arches=$(sed -n 's/^CMAKE_CUDA_ARCHITECTURES:[A-Z]*=//p' "$build/CMakeCache.txt" 2>/dev/null)
# What the binaries were built from: $HETPLAN_BUNDLE_COMMIT (a build of an exported commit), else
# this checkout's HEAD, marked when the checkout has uncommitted changes.
commit=${HETPLAN_BUNDLE_COMMIT:-}
if [ -z "$commit" ]; then
  commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
  git diff --quiet HEAD -- . 2>/dev/null || commit="$commit + uncommitted changes"
fi
{
  echo "hetplan GPU bundle, made $(date -u +%FT%TZ) on $(hostname) by scripts/gpu_bundle.sh"
  echo "commit $commit; build folder $build; CUDA architectures ${arches:-unknown}"
  "$stage/bin/hetplan" --version
  (cd "$stage" && find bin lib cupti -type f -printf '%10s  %p\n' | sort -k2)
} > "$stage/MANIFEST.txt"

rm -rf "$bundle"
mkdir -p "$bundle"
# One xz stream over the tar: its 64 MiB window (-9) spans the binaries' identical device code.
tar -C "$stage" -cf - MANIFEST.txt bin lib cupti | xz -9 -T"${HETPLAN_JOBS:-2}" > "$bundle/hetplan-gpu.tar.xz"
cp "$stage/MANIFEST.txt" "$bundle/"
raw_kib=$(du -sk "$stage/bin" "$stage/lib" "$stage/cupti" | awk '{s += $1} END {print s}')
packed=$(stat -c %s "$bundle/hetplan-gpu.tar.xz")
cat "$bundle/MANIFEST.txt"
echo "gpu_bundle: $((raw_kib / 1024)) MiB of binaries and libraries -> $bundle/hetplan-gpu.tar.xz" \
  "$((packed / 1048576)).$(((packed % 1048576) * 10 / 1048576)) MiB"
if [ "$packed" -gt $((max_mib * 1048576)) ]; then
  echo "gpu_bundle: the archive exceeds $max_mib MiB (HETPLAN_BUNDLE_MAX_MIB)" >&2
  exit 1
fi
