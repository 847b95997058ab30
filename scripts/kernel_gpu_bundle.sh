#!/usr/bin/env bash
# Builds the kernels' GPU programs here (no GPU needed) and gathers what a GPU machine needs to
# run them into gpu_bundle/ (git-ignored): hetplan_gpu_tests, hetplan_kernel_bench, the shared
# libraries they link beyond glibc and libstdc++ (a bare CUDA image may lack yaml-cpp), and the
# run scripts.
# Carry gpu_bundle/ to the GPU machine and run `bash gpu_bundle/kernel_gpu_run.sh` there.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${HETPLAN_BUILD_DIR:-build}
cmake --build "$build" -j"${HETPLAN_JOBS:-2}" --target hetplan_gpu_tests hetplan_kernel_bench
rm -rf gpu_bundle
mkdir -p gpu_bundle/lib
cp "$build/tests/hetplan_gpu_tests" "$build/kernels/hetplan_kernel_bench" gpu_bundle/
for lib in $(ldd gpu_bundle/hetplan_gpu_tests gpu_bundle/hetplan_kernel_bench | awk '/=> \// {print $3}' | sort -u); do
  case "$(basename "$lib")" in
    # glibc and the C++ runtime: the system's. The binaries need GLIBC 2.34 and GLIBCXX 3.4.29
    # (any Ubuntu 22.04+ has them); a copy of this machine's libstdc++ would need glibc 2.36.
    libc.so* | libm.so* | ld-linux* | libpthread* | libdl.so* | librt.so* | libstdc++* | libgcc_s*) ;;
    *) cp -L "$lib" gpu_bundle/lib/ ;;
  esac
done
cp scripts/kernel_gpu_run.sh scripts/bench_attention_torch.py gpu_bundle/
du -sh gpu_bundle
