// A square 16-bit GEMM (TN, random inputs) ready to launch: the work the GPU tests of timing,
// tracing and clocks measure.
#pragma once

#include "profiler/cuda_check.h"
#include "profiler/device.h"
#include "profiler/device_fill.h"
#include "profiler/gemm/lt_gemm.h"

namespace hetplan::profiler {

struct SquareGemm {
  // bf16 where the GPU has it, else fp16; n x n x n.
  SquareGemm(const DeviceInfo& info, int64_t n, cudaStream_t stream)
      : dtype(info.has_bf16() ? Dtype::kBf16 : Dtype::kFp16),
        shape{n, n, n, 1, true, false},
        gemm(handle.get(), dtype, shape, nullptr),
        a(n * n * 2, "A"),
        b(n * n * 2, "B"),
        c(n * n * 2, "C"),
        ws(kGemmWorkspaceBytes, "workspace") {
    fill_uniform(a.get(), n * n, dtype, 1, 1.0f, stream);
    fill_uniform(b.get(), n * n, dtype, 2, 1.0f, stream);
  }
  void run(cudaStream_t stream) { gemm.run(a.get(), b.get(), c.get(), ws.get(), stream); }

  Dtype dtype;
  GemmShape shape;
  LtHandle handle;
  LtGemm gemm;
  DeviceBuffer a, b, c, ws;
};

}  // namespace hetplan::profiler
