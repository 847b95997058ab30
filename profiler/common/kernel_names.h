// What a kernel's name says about it. cuBLAS encodes the instruction path in its kernel names;
// the rule below is how a calibration file's `tensor_cores` flag is decided (docs/calibrate.md).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace hetplan::profiler {

// True when a GEMM kernel's name shows the tensor-core path. Case-insensitive; a name with a SIMT
// marker is never tensor-core:
//   SIMT markers:        sgemm, dgemm, gemv, gemmsn, gemmk1, ffma, simt
//   tensor-core markers: xmma, hmma, wgmma, gmma, tensorop, warpgroup, nvjet (cuBLAS's Hopper and
//                        Blackwell kernels), tf32, and the mma-shape tags h884, h1688, h16816,
//                        s884, s1688, s16816, i8816, i16832 (Volta/Turing/Ampere kernel names)
// Helper kernels of a GEMM (splitKreduce, memset) are neither: false.
bool tensor_core_kernel(std::string_view name);
// Whether a name is a GEMM's main kernel rather than a helper (split-K reduction, memset).
bool gemm_main_kernel(std::string_view name);
// True when any main GEMM kernel in `names` is tensor-core (cuBLAS may split one product into a
// GEMM kernel and a reduction).
bool any_tensor_core(const std::vector<std::string>& names);

}  // namespace hetplan::profiler
